"""report.html in a real headless Chromium: the grid, a drill-down, and a screenshot.

The report is rendered from hand-made cells of two made-up checks (``tests/reports/cells.py``,
report schema ``skewmatrix.report/2``; no env builds). Chromium is
Debian's ``chromium`` (``.ci/run`` installs it when missing); it runs with no
network, a throwaway profile, and loads the file over ``file://``. The
drill-down is driven by the page's own fragment handler (``#open=<cell id>``),
and ``--dump-dom`` prints the DOM after the page's scripts ran (the script also
records where the verdict, the grid, the legend and the failure list were laid
out). Screenshots at a laptop's 1366x768 land in ``reports/out/`` (git-ignored)
for a human to look at. An 18-cell report of real-sized evidence (the mutants
matrix's size, ``tests/reports/cells_large.py``) must open with the verdict and
the whole grid on the first screen and weigh under 200 KB.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from reports.render import write_all
from tests.reports.cells import CPU, LOSS
from tests.reports.cells_behavior import four_cell_report
from tests.reports.cells_large import mutants_size_report
from tests.reports.test_html import Node, parse

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "reports" / "out"
pytestmark = pytest.mark.integration

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("chromium not found on PATH; install it with `apt-get install -y chromium` (.ci/run does)")


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser-report")
    write_all(four_cell_report(), out)
    return out / "report.html"


def run_chromium(chromium: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    profile.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    proc = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def dump_dom(chromium: str, tmp_path: Path, url: str) -> Node:
    proc = run_chromium(chromium, tmp_path, "--dump-dom", url)
    assert "<table" in proc.stdout, proc.stderr[-3000:]
    return parse(proc.stdout)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_grid_and_drill_down_in_the_dom(chromium: str, report_html: Path, tmp_path: Path) -> None:
    # without a fragment: failing cells open, passing ones closed; one line per check in every grid cell
    dom = dump_dom(chromium, tmp_path, report_html.as_uri())
    grid = dom.find("table", id="grid")
    tds = {td.attrs["data-cell"]: td for td in grid.find_all("td") if "data-cell" in td.attrs}
    states = {cid: [(n.attrs["data-check"], n.attrs["data-guard"]) for n in td.find_all("span") if "sq" in n.classes()]
              for cid, td in tds.items()}
    assert states == {
        "u1__z1": [(LOSS["id"], "missing"), (CPU["id"], "not-needed")],
        "u1__z2": [(LOSS["id"], "not-needed"), (CPU["id"], "not-needed")],
        "u2__z1": [(LOSS["id"], "error"), (CPU["id"], "error")],
        "u3__z2": [(LOSS["id"], "activates"), (CPU["id"], "not-needed")],
    }
    assert {cid: td.attrs["data-gate"] for cid, td in tds.items()} == {
        "u1__z1": "fail", "u1__z2": "pass", "u2__z1": "fail", "u3__z2": "pass"}
    assert "train nan-logged from step 4" in next(n.attrs["title"] for n in tds["u1__z1"].find_all("span")
                                                  if n.attrs.get("data-check") == LOSS["id"])
    assert "open" not in dom.find("details", id="cell-u1__z2").attrs
    # every cell's evidence starts collapsed; the plain words of the failing check are in the failure list
    assert "open" not in dom.find("details", id="cell-u1__z1").attrs
    assert "only an explicit pin or a lockfile reaches this pairing" in dom.find("ul", id="failing").all_text()

    # the fragment opens a passing cell: the page's script ran in the browser
    dom = dump_dom(chromium, tmp_path, report_html.as_uri() + "#open=u1__z2")
    opened = dom.find("details", id="cell-u1__z2")
    assert "open" in opened.attrs and "focus" in opened.classes()
    assert dom.find("body").attrs.get("data-opened") == "u1__z2"
    text = opened.all_text()
    assert "zoo fixed" in text and "02-after" in text and "run ga1 (gradient accumulation 1): clean" in text

    # the grid's own link form works the same way
    dom = dump_dom(chromium, tmp_path, report_html.as_uri() + "#cell-u3__z2")
    assert "open" in dom.find("details", id="cell-u3__z2").attrs


@pytest.mark.parametrize(("name", "fragment", "size"), [
    # what a reviewer sees first on a laptop
    ("report-screenshot.png", "", (1366, 768)),
    # the whole page with a passing cell drilled into. Headless Chromium's --screenshot paints a blank
    # page once the document has scrolled (as opening a fragment does), so the window is made taller
    # than the page instead (the page shrank from about 7,450 px to well under this since the evidence
    # is said once); the size check below catches a page that outgrows it.
    ("report-drilldown.png", "#open=u1__z2", (1366, 9000)),
])
def test_screenshots(chromium: str, report_html: Path, tmp_path: Path, name: str, fragment: str,
                     size: tuple[int, int]) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / name
    shot.unlink(missing_ok=True)
    run_chromium(chromium, tmp_path, f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}",
                 report_html.as_uri() + fragment)
    assert png_size(shot) == size
    assert shot.stat().st_size > 50_000, f"{shot}: an almost blank screenshot; did the page render?"


def default_matrix_like_report() -> dict:
    """Six cells laid out like the default matrix (2 unsloth x 3 zoo builds), with grid lines as long as a
    real run's: behaviour counts, training outcomes, reach and expected states on both checks."""
    from tests.reports.cells import make_entry, make_report, training, verdict

    long_missing = verdict("vulnerable", "missing", "no guard replaced the forward; logged loss NaN from step 4",
                           behavior=(4, 7, 3, ["02", "03"], "4/11 (+3 n/a)"), reach="exposed",
                           training=training("nan-logged", "nan-logged from step 4", "NaN to the end", 4))
    latent = {**verdict("vulnerable", "missing", "nothing replaced zoo's kernel", behavior=(4, 1, 0, ["c1"], "4/5"),
                        training=training("clean", "clean", "finite"), gate_fail=False, reach="latent"),
              "gate_warn": True}
    fine = verdict("fixed", "no-ops", "a guard is present", behavior=(14, 0, 0, [], "14/14"),
                   training=training("clean", "clean", "finite"))
    absent = verdict("absent", "not-needed", "no CPU backend", behavior=(0, 0, 5, [], "0/0 (+5 n/a)"))
    cells = []
    for u in ("u2026.10.9", "u2026.10.9-guard"):
        for z in ("z2026.9.3", "z2026.9.3-fix", "z2026.10.9"):
            loss = long_missing if (u, z) == ("u2026.10.9", "z2026.9.3") else fine
            cpu = latent if z == "z2026.10.9" else absent
            cells.append(make_entry(f"{u}__{z}", verdicts={LOSS["id"]: loss, CPU["id"]: cpu}, checks=None,
                                    expect={LOSS["id"]: "missing"} if loss is long_missing else None))
    return make_report(cells)


def test_default_matrix_grid_needs_no_horizontal_scroll_at_1400px(chromium: str, tmp_path: Path) -> None:
    out = tmp_path / "wide"
    out.mkdir()
    write_all(default_matrix_like_report(), out)
    proc = run_chromium(chromium, tmp_path, "--window-size=1400,900", "--dump-dom", (out / "report.html").as_uri())
    body = parse(proc.stdout).find("body")
    assert int(body.attrs["data-scroll-width"]) <= 1400, body.attrs["data-scroll-width"]


@pytest.fixture(scope="module")
def large_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser-large")
    write_all(mutants_size_report(), out)
    return out / "report.html"


def box(body: Node, part: str) -> tuple[int, int]:
    top, bottom = body.attrs[f"data-box-{part}"].split()
    return int(top), int(bottom)


def test_eighteen_cells_open_with_the_verdict_and_the_grid_under_200_kb(chromium: str, large_html: Path,
                                                                       tmp_path: Path) -> None:
    assert large_html.stat().st_size < 200_000, large_html.stat().st_size
    proc = run_chromium(chromium, tmp_path, "--window-size=1366,768", "--dump-dom", large_html.as_uri())
    dom = parse(proc.stdout)
    body = dom.find("body")
    verdict, grid, legend, failing, cells = (box(body, p) for p in ("verdict", "grid", "legend", "failing", "cells"))
    # laid out top down: the verdict, then the grid (the legend beside it), then the failures, then the evidence
    assert verdict[1] <= grid[0] and grid[1] <= failing[0] <= cells[0], (verdict, grid, failing, cells)
    # the verdict and the whole grid are on the first screen of a laptop, and so is the legend's top
    assert verdict[0] >= 0 and grid[1] <= 768 and legend[0] < 768, (verdict, grid, legend)
    # the same order in the document: nothing of the failures or the evidence comes before the grid
    ids = [n.attrs.get("id") for n in dom.iter() if n.attrs.get("id") in ("verdict", "grid", "failing", "cells")]
    assert ids == ["verdict", "grid", "failing", "cells"]
    grid_squares = [n for n in dom.find("table", id="grid").find_all("span") if "sq" in n.classes()]
    assert len(grid_squares) == 36 and {n.attrs["data-guard"] for n in grid_squares} == {
        "broken", "no-ops", "not-needed", "missing"}
    assert not [n for n in dom.find_all("details") if "open" in n.attrs]  # the evidence waits, collapsed
    shot = SHOTS / "report-18-cells.png"
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot.unlink(missing_ok=True)
    run_chromium(chromium, tmp_path, "--window-size=1366,768", f"--screenshot={shot}", large_html.as_uri())
    assert png_size(shot) == (1366, 768) and shot.stat().st_size > 50_000
