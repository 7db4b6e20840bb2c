"""The default matrix, built and probed for real from PyPI through `nox -s matrix`.

Slow (two real envs, `import unsloth` twice on CPU): marked integration.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reports.schema import validate_cell, validate_report
from tests.integration.harness import ROOT, explain, run_nox

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("default-out")
    proc = run_nox(tmp_path_factory.mktemp("default-envs"), "-s", "matrix", out=out)
    return proc, out


def test_nox_matrix_exits_zero_and_writes_reports(default_run) -> None:
    proc, out = default_run
    assert proc.returncode == 0, explain(proc)
    assert (out / "report.json").is_file() and (out / "report.md").is_file()
    # the terminal grid is printed at the end of the run
    assert "unsloth \\ zoo" in proc.stdout and "gate: 1 of 2 cell(s)" in proc.stdout


def test_default_states(default_run) -> None:
    _, out = default_run
    report = json.loads((out / "report.json").read_text())
    validate_report(report)
    by_id = {c["cell_id"]: c for c in report["cells"]}
    old = by_id["u2026.10.9__z2026.9.3"]
    new = by_id["u2026.10.9__z2026.10.9"]
    for cell in (old, new):
        validate_cell({k: v for k, v in cell.items() if k not in ("classification", "gate_fail")})
        assert cell["error"] is None
    assert old["classification"]["zoo"] == "vulnerable"
    assert old["classification"]["static"] == old["classification"]["runtime"] == "vulnerable"
    assert old["classification"]["guard"] == "missing"
    assert new["classification"]["zoo"] == "fixed"
    assert new["classification"]["static"] == new["classification"]["runtime"] == "fixed"
    assert new["classification"]["guard"] == "not-needed"
    assert report["gate"]["failed_cells"] == ["u2026.10.9__z2026.9.3"]


def test_evidence_recorded(default_run) -> None:
    _, out = default_run
    old = json.loads((out / "cells" / "u2026.10.9__z2026.9.3" / "cell.json").read_text())
    # the skew needs overrides: a plain resolve refuses it
    assert old["admissible"]["value"] is False and "unsloth-zoo" in old["admissible"]["message"]
    names = {d["name"].lower().replace("_", "-"): d for d in old["installed"]}
    assert names["unsloth-zoo"]["version"] == "2026.9.3" and names["unsloth"]["version"] == "2026.10.9"
    assert len(names["unsloth-zoo"]["wheel_sha256"]) == 64
    assert old["builds"]["zoo"]["digest"] == names["unsloth-zoo"]["wheel_sha256"]
    assert old["torch"]["version"]
    runtime = next(s for s in old["probes"]["steps"] if s["name"] == "runtime")["result"]
    # on CPU the vulnerable kernel gives a NaN loss with finite gradients: both recorded apart
    assert runtime["outcome"]["loss_finite"] is False
    assert runtime["outcome"]["grad_fn"] == "UnslothFusedLossBackward"
    guard = next(s for s in old["probes"]["steps"] if s["name"] == "guard")["result"]
    assert guard["forward"]["original"] is True and guard["all_masked_finite"] is False
    assert {s["name"] for s in old["steps"]} >= {"install", "admissibility", "probes", "probe:runtime", "probe:guard"}
    # probes ran in the cell's own working directory: unsloth's generated code stays there
    assert (out / "cells" / "u2026.10.9__z2026.9.3" / "work" / "probes.log").is_file()
    assert not (ROOT / "unsloth_compiled_cache").exists()
