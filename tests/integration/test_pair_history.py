"""The history on real wheels from the index: the reported failures come out as verdicts.

Reads a handful of wheels (range reads of the large ones, into the shared scan cache) and builds no env:

* unsloth 2025.3.10 imports ``_unsloth_get_batch_samples`` from ``unsloth_zoo.loss_utils`` at import time
  (``unsloth/models/_utils.py``) while declaring ``unsloth_zoo>=2025.3.8``; zoo 2025.3.8 does not define it
  (2025.3.9 does): the pair users hit in unsloth #1992/#2003, read by hand from both wheels;
* unsloth 2026.5.1 x zoo 2026.10.9, the pair a plain ``pip install unsloth==2026.5.1`` resolves today;
* unsloth 2026.10.9 x zoo 2026.10.9, whose ``import unsloth`` succeeds in the default matrix's cells.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from matrix.scan.history import structural_gate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
RUNS = {"march-2025": ("==2025.3.10", ">=2025.3.7,<=2025.3.9"), "old-with-newest": ("==2026.5.1", "==2026.10.9"),
        "newest": ("==2026.10.9", "==2026.10.9")}


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = {}
    for name, (uns, zoo) in RUNS.items():
        folder = tmp_path_factory.mktemp(name)
        proc = subprocess.run([sys.executable, "-m", "matrix", "history", "--unsloth", uns, "--zoo", zoo, "--no-scan",
                               "-o", str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        out[name] = json.loads((folder / "history.json").read_text())
        assert (folder / "history.html").read_text().count("<tr>") == 2  # the header row and one unsloth row
    return out


def pair(doc: dict, zoo: str) -> dict:
    return next(p for p in doc["pairs"] if p["zoo"] == zoo)


def test_the_march_2025_pair_is_incompatible_naming_the_missing_name(docs: dict) -> None:
    doc = docs["march-2025"]
    bad = pair(doc, "2025.3.8")
    assert bad["verdict"] == "incompatible" and bad["admitted"]  # the floor admits the broken zoo
    m = next(m for m in bad["missing"] if m["name"] == "unsloth_zoo.loss_utils._unsloth_get_batch_samples")
    assert m["breaks"] == "import" and m["exception"] == "ImportError"
    assert {k: m["where"][0][k] for k in ("file", "function")} == {"file": "unsloth/models/_utils.py", "function": None}
    assert pair(doc, "2025.3.9")["verdict"] == "compatible"
    assert doc["unsloth"][0]["floor"] == "2025.3.8"
    assert "works with zoo 2025.3.9" in doc["lines"][0] and "_unsloth_get_batch_samples" in doc["lines"][0]


def test_an_old_unsloth_with_the_newest_zoo_gets_a_verdict_with_evidence(docs: dict) -> None:
    doc = docs["old-with-newest"]
    p = pair(doc, "2026.10.9")
    assert p["verdict"] in ("compatible", "degraded", "incompatible", "unknown")
    assert p["admitted"] and doc["unsloth"][0]["plain_pick"] == doc["newest_zoo"]
    assert doc["unsloth"][0]["references"] > 100  # the evidence: every reference was read and resolved
    if p["verdict"] != "compatible":
        assert p["missing"] or p["unknown"]


def test_a_pair_whose_import_succeeds_is_never_incompatible(docs: dict) -> None:
    assert pair(docs["newest"], "2026.10.9")["verdict"] != "incompatible"


def test_the_gate_fails_a_release_whose_floor_admits_an_incompatible_zoo() -> None:
    lines: list[str] = []
    assert structural_gate("2025.3.10", lines.append, upto="2025.3.9") is True
    assert any("zoo 2025.3.8: incompatible" in x and "_unsloth_get_batch_samples" in x for x in lines)


# ---------------------------------------------------------------- --confirm: three pairs installed and imported on CPU
# Read by hand from the wheels:
# * unsloth 2026.10.9 x zoo 2026.10.9: every reference resolves (compatible), and `import unsloth` succeeds on CPU
#   with UNSLOTH_ALLOW_CPU=1 (the default matrix's cells);
# * unsloth 2026.10.9 x zoo 2026.10.8: degraded (zoo 2026.10.8 lacks `unsloth_zoo.cpu`, reached only on the
#   `except _CPUBackendSelected` branch of `unsloth/__init__.py`, which UNSLOTH_ALLOW_CPU=1 does not select, and
#   `fused_losses.fused_linear` and friends, imported inside functions): the import succeeds, so the two sides of
#   the one change of verdict on that row agree with the runtime;
# * unsloth 2026.5.1 x zoo 2026.10.9 (what a plain install resolves): zoo answers DEVICE_TYPE "cuda" under
#   UNSLOTH_ALLOW_CPU=1, and `unsloth/__init__.py` then calls `torch.cuda.get_device_capability()` at import: no
#   accelerator on a CPU host, so the runtime side is n/a and the static verdict stands (static-only).
CONFIRM_RUNS = {"newest-boundary": ("==2026.10.9", ">=2026.10.8"), "old-with-newest": ("==2026.5.1", "==2026.10.9")}


def history(uns: str, zoo: str, folder: Path, cache: Path) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, "-m", "matrix", "history", "--unsloth", uns, "--zoo", zoo, "--no-scan",
                           "--confirm", "-o", str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=1800,
                          check=False, env={**os.environ, "SKEWMATRIX_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((folder / "history.json").read_text()), proc.stdout


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, str, Path]]:
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    for name, (uns, zoo) in CONFIRM_RUNS.items():
        folder = tmp_path_factory.mktemp(name)
        out[name] = (*history(uns, zoo, folder, cache), folder)
    out["rerun"] = (*history(*CONFIRM_RUNS["newest-boundary"], tmp_path_factory.mktemp("rerun"), cache), cache)
    return out


def test_confirm_installs_both_sides_of_the_boundary_and_the_import_agrees(confirmed: dict) -> None:
    doc, log, folder = confirmed["newest-boundary"]
    by = {p["zoo"]: p for p in doc["pairs"]}
    assert (by["2026.10.9"]["verdict"], by["2026.10.8"]["verdict"]) == ("compatible", "degraded")
    for zoo in ("2026.10.9", "2026.10.8"):
        p = by[zoo]
        assert (p["runtime"]["outcome"], p["confirmed_by"], p["confirm_why"]) == ("imports", "runtime", "boundary")
        assert p["runtime"]["versions"]["unsloth"] == "2026.10.9" and p["runtime"]["versions"]["unsloth_zoo"] == zoo
    assert log.index("confirm [1/2] unsloth 2026.10.9 x zoo 2026.10.9 (boundary): static compatible, runtime "
                     "imports") < log.index("confirm [2/2] unsloth 2026.10.9 x zoo 2026.10.8 (boundary): static "
                                            "degraded, runtime imports")
    assert "## Confirmed at runtime" in (folder / "history.md").read_text()
    assert (folder / "history.html").read_text().count('<td class="rt"') == 2


def test_an_unsloth_that_asks_cuda_at_import_is_imported_again_with_the_queries_stubbed(confirmed: dict) -> None:
    """2026.5.1 asks torch.cuda at import: the real import is n/a on this host, so a second import answers the
    accelerator queries (stubbed.py); it imports, which the static reading agrees with, kept apart as
    runtime-stubbed with the real import's reason beside it."""
    doc, log, _ = confirmed["old-with-newest"]
    p = doc["pairs"][0]
    assert (p["runtime"]["outcome"], p["confirmed_by"], p["verdict"]) == ("imports", "runtime-stubbed",
                                                                          p["static_verdict"])
    assert p["runtime"]["mode"] == "stubbed" and p["runtime"]["plain_reason"].startswith("no accelerator: ")
    assert "confirm [1/1] unsloth 2026.5.1 x zoo 2026.10.9 (class)" in log


def test_a_rerun_builds_nothing_and_every_env_was_deleted(confirmed: dict) -> None:
    doc, log, cache = confirmed["rerun"]
    assert log.count(", cached)") == 2 and [p["confirmed_by"] for p in doc["pairs"]] == ["runtime", "runtime"]
    assert not list((cache / "history-confirm" / "envs").iterdir())


# ---------------------------------------------------------------- what a plain install gets: uv over the whole graph
# unsloth 2025.8.5 declares only `unsloth_zoo>=2025.8.4`, so the newest zoo above the floor is the newest zoo of all
# (2026.10.9 on 2026-12-04); but zoo's caps on TRL and transformers, against unsloth's own, make a resolver stop at an
# older zoo (2026.3.6 on that day, `uv pip compile` by hand). The test asks uv itself for today's answer.
def test_the_plain_install_answer_is_uvs_resolution_not_the_newest_zoo_above_the_floor(tmp_path: Path) -> None:
    from uv import find_uv_bin

    from matrix.envs import recipe
    from matrix.scan.history import plain_install

    proc = subprocess.run([sys.executable, "-m", "matrix", "history", "--unsloth", "==2025.8.5", "--zoo",
                           "==2026.10.9", "--no-scan", "-o", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "history.json").read_text())
    row = doc["unsloth"][0]
    uv = subprocess.run([os.fsdecode(find_uv_bin()), "pip", "compile", "-", "--python-version", "3.11",
                         "--python-platform", plain_install.PLATFORM, "--no-header", "--no-annotate", "--quiet"],
                        input="unsloth==2025.8.5\n", capture_output=True, text=True, timeout=600, check=True)
    resolved = recipe.compiled_versions(uv.stdout)["unsloth-zoo"]
    assert row["plain_install"]["resolved_by"] == "uv" and row["plain_install"]["zoo"] == resolved
    assert Version(resolved) < Version("2026.10.9") and row["plain_pick"] == doc["newest_zoo"] != resolved
    plain = next(p for p in doc["plain_pairs"] if p["zoo"] == resolved)  # outside the zoo window: judged alone
    assert plain["unsloth"] == "2025.8.5" and plain["verdict"] in ("compatible", "degraded", "incompatible")
    md = (tmp_path / "history.md").read_text()
    assert md.index("## What a plain install gets today") < md.index("## Atlas")
    assert f"| 2025.8.5 | 2025.8.4 | {resolved} | uv |" in md
