"""Terminal, Markdown and JSON renderers against the canonical two-check reports, with exact expected text.

The expected lines are written from the fixtures in ``tests/reports/cells.py``:
each grid cell has one line per check, ``label: zoo / guard behaviour · train
outcome``, where the label is the check id's first two dash-separated words.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.advice import NEXT_STEP
from reports.render import RENDERERS, write_all
from reports.render.terminal import TerminalRenderer
from reports.render.view import short_labels
from tests.reports.cells import (
    CPU,
    LOSS,
    error_cell,
    make_report,
    reachable_cell,
    residual_cell,
    two_cell_report,
    unreachable_cell,
)

SCAN = {"timeline": {"fixed_since": {LOSS["id"]: "2026.10.6"}}}
UNREACHABLE = "only an explicit pin or a lockfile reaches this pairing: a plain install refuses it"
REACHABLE = "a plain `pip install` / `uv pip install` admits this pairing"
# the four grid lines of the two-cell report, by reasoning from the fixtures
Z1_LOSS = "toy-loss: vulnerable / missing (exposed) 2/3 (+1 n/a) · train nan-logged from step 4"
Z1_CPU = "cpu-ops: absent / not-needed"
Z2_LOSS = "toy-loss: fixed / not-needed 2/2 · train clean"
Z2_CPU = "cpu-ops: vulnerable / missing (unknown) 3/4"
# the same cells in the terminal's compact grid: the state in the check's words, its reach, a NaN training run
T1_LOSS = "toy-loss: missing (exposed) · train nan-logged from step 4"
T1_CPU = "cpu-ops: not-needed"
T2_LOSS = "toy-loss: not-needed"
T2_CPU = "cpu-ops: missing (unknown)"


@pytest.fixture
def report() -> dict:
    return two_cell_report(scan=SCAN)


def test_short_labels_take_two_words_unless_they_clash() -> None:
    assert short_labels([LOSS, CPU]) == {LOSS["id"]: "toy-loss", CPU["id"]: "cpu-ops"}
    clash = [{"id": "toy-loss-one"}, {"id": "toy-loss-two"}, {"id": "solo"}]
    assert short_labels(clash) == {"toy-loss-one": "toy-loss-one", "toy-loss-two": "toy-loss-two", "solo": "solo"}


def test_terminal_findings_in_full_then_the_grid_then_the_headline(report: dict) -> None:
    text = TerminalRenderer(colour=False).render(report)
    w = len(T1_LOSS)  # the widest line of column z1
    assert text.splitlines() == [
        "skewmatrix: matrix/test.toml (2 cells × 2 checks)",
        "",
        "Findings in full (each once, with the cells it covers):",
        "",
        "FAIL toy-loss-masked-nan: missing (exposed) in u1__z1",
        "    no guard replaced the forward",
        "    symptom: logged loss NaN from step 4 to the end",
        "    reach: exposed: reach exposed",
        f"    install: {UNREACHABLE}",
        "    fix: Upgrade toy_zoo to a release that guards the zero divisor. toy_zoo>=2026.10.6 carries the fix.",
        f"    next step: {NEXT_STEP['missing']}",
        "",
        "FAIL cpu-ops-empty-batch: missing (unknown) in u1__z2",
        "    no guard targets this kernel",
        "    symptom: loss NaN for an all-masked batch with num_items_in_batch=None",
        "    reach: unknown: reach unknown",
        f"    install: {REACHABLE}",
        "    fix: Pass num_items_in_batch explicitly until toy_zoo guards it. No toy_zoo release carries a fix yet: "
        "toy/toy-zoo#7 is open, not released.",
        f"    next step: {NEXT_STEP['missing']}",
        "",
        "unsloth \\ zoo  " + "z1".ljust(w) + "  z2",
        "u1             " + T1_LOSS + "  " + T2_LOSS,
        "               " + T1_CPU.ljust(w) + "  " + T2_CPU,
        "",
        "GATE FAIL: 2 of 2 cells fail",
    ]


def test_terminal_groups_the_same_finding_in_several_cells() -> None:
    one, two = unreachable_cell(), unreachable_cell()
    two["cell_id"] = "u9__z1"
    two["builds"]["unsloth"]["name"] = "u9"
    lines = TerminalRenderer(colour=False).render(make_report([one, two])).splitlines()
    assert lines.count("FAIL toy-loss-masked-nan: missing (exposed) in 2 cells: u1__z1, u9__z1") == 1
    assert lines.count("    no guard replaced the forward") == 1


def test_terminal_colour_per_check_line_only_when_asked(report: dict) -> None:
    coloured = TerminalRenderer(colour=True).render(report)
    assert f"\033[31;1m{T1_LOSS}\033[0m" in coloured
    assert f"\033[32m{T1_CPU.ljust(len(T1_LOSS))}\033[0m" in coloured
    assert "\033[" not in TerminalRenderer(colour=False).render(report)


def test_terminal_colour_follows_tty_and_no_color(report: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\033[" in TerminalRenderer().render(report)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\033[" not in TerminalRenderer().render(report)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert "\033[" not in TerminalRenderer().render(report)


def test_terminal_residual_and_error_cells() -> None:
    text = TerminalRenderer(colour=False).render(make_report([residual_cell(), error_cell()]))
    lines = text.splitlines()
    w = len(T1_CPU)  # the widest line of column z2: "cpu-ops: not-needed"
    grid = lines.index("unsloth \\ zoo  " + "z2".ljust(w) + "  z1")
    assert lines[grid + 1:grid + 3] == [
        "u2             " + "toy-loss: no-ops".ljust(w) + "  toy-loss: error (unknown)",
        "               " + T1_CPU + "  cpu-ops: error (unknown)",
    ]
    assert "PASS toy-loss-masked-nan: no-ops in u2__z2" in lines
    assert lines[lines.index("PASS toy-loss-masked-nan: no-ops in u2__z2") + 1] == \
        "    passes, 1 residual failure (x-probe)"
    assert "FAIL cpu-ops-empty-batch: error (unknown) in u2__z1" in lines
    at = lines.index("FAIL cpu-ops-empty-batch: error (unknown) in u2__z1")
    assert lines[at + 1] == "    build: uv pip install failed (exit 1)"
    assert f"    next step: {NEXT_STEP['error']}" in lines
    assert lines[-1] == "GATE FAIL: 1 of 2 cells fail"


def test_terminal_expected_failures_and_stale_expectations() -> None:
    xfail = unreachable_cell()
    xfail["expect"] = {LOSS["id"]: "missing"}
    xpass = reachable_cell()
    xpass["expect"] = {LOSS["id"]: "missing"}  # toy-loss is not-needed there: the expectation is stale
    lines = TerminalRenderer(colour=False).render(make_report([xfail, xpass])).splitlines()
    grid = next(i for i, line in enumerate(lines) if line.startswith("unsloth \\ zoo"))
    assert lines[grid + 1].split()[1:] == f"{T1_LOSS} · expected {T2_LOSS} · expected missing".split()
    assert "XFAIL toy-loss-masked-nan: missing (exposed) in u1__z1" in lines
    assert "XPASS toy-loss-masked-nan: not-needed in u1__z2" in lines
    assert lines[lines.index("XPASS toy-loss-masked-nan: not-needed in u1__z2") + 1] == (
        "    expected missing, which no longer happens: the expectation is stale; remove or update it in the "
        "matrix file")
    assert "FAIL cpu-ops-empty-batch: missing (unknown) in u1__z2" in lines


def test_markdown_grid_counts_and_failing_checks(report: dict) -> None:
    lines = RENDERERS["markdown"].render(report).splitlines()
    assert ("**❌ GATE FAIL: 2 of 2 cells fail** (2 cell(s) in a failing state; failing states: broken, error, "
            "missing).") in lines
    assert "| `toy-loss-masked-nan` (toy-loss) | missing 1, not-needed 1 |" in lines
    assert "| `cpu-ops-empty-batch` (cpu-ops) | missing 1, not-needed 1 |" in lines
    start = lines.index("| unsloth \\ zoo | z1 (pypi z1) | z2 (pypi z2) |")
    assert lines[start + 1] == "|---|---|---|"
    assert lines[start + 2] == (
        "| u1 (pypi 2026.10.9) "
        "| toy-loss: vulnerable / **missing** (exposed) 2/3 (+1 n/a) · train nan-logged from step 4<br>"
        "cpu-ops: absent / not-needed "
        "| toy-loss: fixed / not-needed 2/2 · train clean<br>cpu-ops: vulnerable / **missing** (unknown) 3/4 |")
    assert lines[5:8] == ["- FAIL toy-loss-masked-nan: missing (exposed) in u1__z1",  # the short summary first
                          "- FAIL cpu-ops-empty-batch: missing (unknown) in u1__z2", ""]
    failing = lines[lines.index("## Findings") + 4:]
    assert failing[:13] == [
        "- **FAIL** `toy-loss-masked-nan`: **missing (exposed)** in `u1__z1`: no guard replaced the forward",
        "  - symptom: logged loss NaN from step 4 to the end",
        "  - reach: exposed: reach exposed",
        f"  - install: {UNREACHABLE}",
        "  - fix: Upgrade toy_zoo to a release that guards the zero divisor. toy_zoo>=2026.10.6 carries the fix.",
        f"  - next step: {NEXT_STEP['missing']}",
        "- **FAIL** `cpu-ops-empty-batch`: **missing (unknown)** in `u1__z2`: no guard targets this kernel",
        "  - symptom: loss NaN for an all-masked batch with num_items_in_batch=None",
        "  - reach: unknown: reach unknown",
        f"  - install: {REACHABLE}",
        "  - fix: Pass num_items_in_batch explicitly until toy_zoo guards it. No toy_zoo release carries a fix yet: "
        "toy/toy-zoo#7 is open, not released.",
        f"  - next step: {NEXT_STEP['missing']}",
        "",
    ]


def test_markdown_cell_details_per_check_with_training_table(report: dict) -> None:
    lines = RENDERERS["markdown"].render(report).splitlines()
    assert "#### `toy-loss-masked-nan`: zoo vulnerable, guard missing (fails the gate)" in lines
    assert "#### `cpu-ops-empty-batch`: zoo absent, guard not-needed" in lines
    assert "- behaviour 2/3 (+1 n/a): 2 pass, 1 fail, 1 n/a (failing: 02-after)" in lines
    assert "- training: nan-logged from step 4: num_items_in_batch reached the loss as 0 on step 4" in lines
    assert "- training: clean: every step finite" in lines
    assert "run ga1 (gradient accumulation 1): nan-logged from step 4" in lines
    # step 4 of the NaN run: no label left, n_items 0, the loss NaN; 5.5412 shown with 4 significant digits
    assert "| 4 | 0 | 0 | nan | nan | 0 | 0 | toy_fused×1 |" in lines
    assert "| 1 | 7 | 7 | 5.541 | 5.541 | 0.5 | 0 | toy_fused×1 |" in lines
    assert "- unsloth: pypi 2026.10.9, installed 2026.10.9, sha256 `aaaaaaaaaaaa`" in lines
    assert "- plain install admits the pair: no (installed with overrides) [uv pip compile (no overrides)]" in lines


def test_markdown_keeps_uvs_full_explanation_folded(report: dict) -> None:
    text = RENDERERS["markdown"].render(report)
    block = ("<details><summary>uv's resolver explanation</summary>\n\n```\n"
             "  × No solution found when resolving dependencies:\n"
             "  ╰─▶ Because unsloth==2026.10.9 depends on unsloth-zoo>=2026.10.6 and you require unsloth-zoo==z1, "
             "we can conclude that your requirements are unsatisfiable.\n```\n\n</details>")
    assert text.count(block) == 1  # u1__z1 only: a plain install admits u1__z2


def test_markdown_residual_and_stale_expectation() -> None:
    xpass = reachable_cell()
    xpass["expect"] = {LOSS["id"]: "missing"}
    text = RENDERERS["markdown"].render(make_report([residual_cell(), xpass]))
    assert "toy-loss: fixed / no-ops 2/2 · train clean · passes, 1 residual failure<br>" in text
    assert "- passes, 1 residual failure: x-probe" in text.splitlines()
    assert ("- **XPASS** `toy-loss-masked-nan`: **not-needed** in `u1__z2`: expected missing, which no longer "
            "happens: the expectation is stale; remove or update it in the matrix file") in text.splitlines()


def test_renderers_survive_missing_fields() -> None:
    """An error cell without a checks key, a cell without verdicts, a report without checks: '-', never a crash."""
    bare = error_cell()
    del bare["checks"]
    no_verdicts = reachable_cell()
    del no_verdicts["verdicts"]
    no_verdicts["admissible"] = None
    reports = [make_report([bare, no_verdicts]), {**make_report([bare]), "checks": None},
               {"schema": "skewmatrix.report/2", "cells": [{}], "grid": {}, "gate": {}}]
    for rep in reports:
        for name, renderer in RENDERERS.items():
            assert isinstance(renderer.render(rep), str), name
    text = TerminalRenderer(colour=False).render(reports[0])
    assert "u1             -                          toy-loss: -" in text.splitlines()  # no verdict: '-'
    assert "                                          cpu-ops: -" in text.splitlines()


def test_json_round_trips_and_validates(tmp_path: Path) -> None:
    from reports.schema import validate_report

    report = make_report([unreachable_cell(), reachable_cell(), residual_cell(), error_cell()])
    written = write_all(report, tmp_path)
    assert sorted(p.name for p in written) == ["junit.xml", "report.html", "report.json", "report.md", "summary.md"]
    loaded = json.loads((tmp_path / "report.json").read_text())
    assert loaded == report
    validate_report(loaded)


def test_training_numbers_one_per_micro_batch() -> None:
    from reports.render.details import number

    assert number([4.2105922, "nan"]) == "4.211, nan" and number(None) == "-" and number(0.0) == "0"
    assert number(True) == "true" and number("tensor(0)") == "tensor(0)" and number([]) == "-"


def test_renderers_name_no_registered_check() -> None:
    """Everything a renderer says about a check comes from the report: no check id, folder or kernel in the code."""
    from probes import checks

    root = Path(__file__).resolve().parents[2]
    # scan_markdown.py renders the scan document and is another module's concern (tests/test_layout.py covers it)
    sources = {p: p.read_text(encoding="utf-8") for p in [*(root / "reports" / "render").glob("*.py"),
                                                          root / "reports" / "advice.py"]
               if p.name != "scan_markdown.py"}
    for name, info in zip(checks.REGISTRY, checks.infos(), strict=True):
        for word in (info.id, name, info.kernel, info.kernel.rsplit(".", 1)[-1]):
            assert not [p.name for p, text in sources.items() if word in text], word


def test_markdown_cell_details_carry_the_checks_own_step_details(report: dict) -> None:
    lines = RENDERERS["markdown"].render(report).splitlines()
    assert "- guard probe: forward replaced after `import unsloth`: no (zoo's own); all-masked call finite: no" \
        in lines
    start = lines.index("All-masked call after import, by route:")
    assert lines[start + 2:start + 5] == ["| route | loss | gradients finite | autograd node |", "|---|---|---|---|",
                                          "| public | nan | unknown | `None` |"]


def test_step_renderers_are_found_through_the_registry_by_check_id() -> None:
    from probes import checks
    from reports.render import details

    for name in checks.REGISTRY:
        r = details.renderer_of(checks.info(name).id)
        assert r is not None and r.TRAIN_COUNT and callable(r.details), name
    assert details.renderer_of("no-such-check") is None


def test_a_symptom_the_reason_already_says_is_said_once() -> None:
    cell = unreachable_cell()
    v = cell["verdicts"][LOSS["id"]]
    v["guard_reason"] = f"no guard replaced the forward; {v['symptom']}"
    lines = TerminalRenderer(colour=False).render(make_report([cell])).splitlines()
    assert sum(v["symptom"] in line for line in lines) == 1
    assert not any(line.startswith("    symptom: ") for line in lines)
