"""Exit codes 0/1/2 of real runs, with expected states (strict xfail), XPASS and --exit-zero.

One real cell is built and probed (unsloth 2026.10.9 x the vulnerable zoo
2026.9.3, whose first check is ``missing``); every other run rejudges the
same result with another matrix file (``nox -s report``) or reuses it by its
cell digest (``nox -s "cell(ID)"``), so the module costs about one cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.harness import explain, run_nox
from tests.matrices import ONE_CELL

pytestmark = pytest.mark.integration

FUSED, CPU = "fused-ce-masked-nan", "cpu-ce-masked-nan"
BASE = ONE_CELL


def matrix_file(tmp: Path, name: str, expect: str = "") -> Path:
    path = tmp / f"{name}.toml"
    path.write_text(BASE + expect, encoding="utf-8")
    return path


def expect(check: str, state: str) -> str:
    return f'[[expect]]\nzoo = "z1"\ncheck = "{check}"\nstate = "{state}"\n'


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """`nox -s matrix` once, on a matrix that expects what the vulnerable zoo shows."""
    tmp = tmp_path_factory.mktemp("exit-codes")
    out, envdir = tmp / "out", tmp / "nox"
    m = matrix_file(tmp, "expected", expect(FUSED, "missing"))
    proc = run_nox(envdir, "-s", "matrix", out=out, matrix=m, SKEWMATRIX_TICK="5")
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, explain(proc)
    # the progress line as the cell finishes, and the gate's closing lines
    assert f"[1/1] cell u1__z1 → {FUSED}: missing" in text and " XFAIL (" in text, explain(proc)
    assert "still probing… " in text, explain(proc)
    assert f"u1__z1 {FUSED}: missing (exposed) (XFAIL: expected)" in text
    assert "exit 0 (every cell passes or is in its expected state)" in text
    cell = json.loads((out / "cells" / "u1__z1" / "cell.json").read_text())
    assert cell["expect"] == {FUSED: "missing"}
    return tmp, out, envdir


def test_expected_failure_exits_0(ran: tuple[Path, Path, Path]) -> None:
    _, out, _ = ran
    report = json.loads((out / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["verdicts"][FUSED]["guard"] == "missing" and cell["expect"] == {FUSED: "missing"}


def test_a_matrix_that_expects_the_wrong_state_exits_1(ran: tuple[Path, Path, Path]) -> None:
    tmp, out, envdir = ran
    proc = run_nox(envdir, "-s", "report", out=out, matrix=matrix_file(tmp, "wrong", expect(FUSED, "broken")))
    assert proc.returncode == 1, explain(proc)
    assert f"u1__z1 {FUSED}: missing (exposed) (FAIL: expected broken)" in proc.stdout + proc.stderr


def test_an_unexpected_failure_exits_1_and_exit_zero_opts_out(ran: tuple[Path, Path, Path]) -> None:
    tmp, out, envdir = ran
    plain = matrix_file(tmp, "plain")
    proc = run_nox(envdir, "-s", "report", out=out, matrix=plain)
    assert proc.returncode == 1, explain(proc)
    assert f"u1__z1 {FUSED}: missing (exposed) (FAIL: fails the gate)" in proc.stdout + proc.stderr
    proc = run_nox(envdir, "-s", "report", "--", "--exit-zero", out=out, matrix=plain)
    assert proc.returncode == 0, explain(proc)
    assert "exit 0 (--exit-zero; the gate alone would exit 1)" in proc.stdout + proc.stderr


def test_a_stale_expectation_is_an_xpass_and_exits_1(ran: tuple[Path, Path, Path]) -> None:
    tmp, out, envdir = ran
    # zoo 2026.9.3 has no CPU-backend kernel: expecting it `missing` is stale
    m = matrix_file(tmp, "stale", expect(FUSED, "missing") + expect(CPU, "missing"))
    proc = run_nox(envdir, "-s", "report", out=out, matrix=m)
    assert proc.returncode == 1, explain(proc)
    assert f"u1__z1 {CPU}: " in proc.stdout and "(XPASS: expected missing, which no longer happens; " \
        "the expectation is stale" in proc.stdout


def test_the_failing_cells_own_session_fails_after_writing_its_result(ran: tuple[Path, Path, Path]) -> None:
    tmp, out, envdir = ran
    proc = run_nox(envdir, "-s", "cell(u1__z1)", out=out, matrix=matrix_file(tmp, "plain"))
    assert proc.returncode == 1, explain(proc)
    text = proc.stdout + proc.stderr
    assert "unchanged since the last run" in text  # reused by its digest, not rebuilt
    assert f"[1/1] cell u1__z1 → {FUSED}: missing" in text and " FAIL (" in text
    assert "Session cell(u1__z1) failed." in text


def test_in_the_matrix_run_the_cell_succeeds_and_the_matrix_session_fails(ran: tuple[Path, Path, Path]) -> None:
    """nox aborts a requires= fan-in after a failed prerequisite, so the report needs the cell to exit 0."""
    tmp, out, envdir = ran
    proc = run_nox(envdir, "-s", "matrix", out=out, matrix=matrix_file(tmp, "plain"))
    assert proc.returncode == 1, explain(proc)
    text = proc.stdout + proc.stderr
    assert "FAIL: recorded; the matrix session reports it and fails the run" in text
    assert "* cell(u1__z1): success" in text and "* matrix: failed" in text
    assert (out / "report.html").is_file() and "exit 1 (an unexpected gate failure" in text


def test_a_corrupt_result_is_a_harness_failure_exit_2(ran: tuple[Path, Path, Path]) -> None:
    tmp, _, envdir = ran
    broken = tmp / "broken"
    (broken / "cells" / "u1__z1").mkdir(parents=True)
    (broken / "cells" / "u1__z1" / "cell.json").write_text("{ truncated", encoding="utf-8")
    proc = run_nox(envdir, "-s", "report", "--", str(broken), out=tmp / "merged", matrix=matrix_file(tmp, "plain"))
    assert proc.returncode == 2, explain(proc)
    assert "unreadable cell result" in proc.stderr and "Traceback" not in proc.stdout + proc.stderr


def test_a_cell_without_a_training_run_has_unknown_reach_and_fails(tmp_path: Path) -> None:
    # The same vulnerable pair with training turned off: no run on the kernel's route, so nothing can say
    # the hazard is latent; the reach is unknown and `missing` fails the default gate like exposed.
    m = tmp_path / "no-train.toml"
    m.write_text(BASE.replace("schema = 1\n", "schema = 1\n[options]\ntrain = false\n", 1), encoding="utf-8")
    proc = run_nox(tmp_path / "nox", "-s", "matrix", out=tmp_path / "out", matrix=m)
    assert proc.returncode == 1, explain(proc)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (cell,) = report["cells"]
    v = cell["verdicts"][FUSED]
    assert (v["guard"], v["reach"], v["gate_fail"]) == ("missing", "unknown", True), v
    assert "training runs are turned off" in v["reach_reason"]
    train = next(s for s in cell["checks"][FUSED]["steps"] if s["name"] == "train")
    assert train["status"] == "skipped"
