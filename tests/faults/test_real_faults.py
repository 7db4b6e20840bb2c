"""Faults injected into real runs: every fault becomes a finding, nothing is lost.

One matrix holds a healthy cell next to cells whose probe hangs, whose probe
aborts, whose pair does not resolve, whose version does not exist and whose
wheel does not build. Later tests reuse its output directory to show that a
complete cell survives an unreachable index and an interrupted run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, UNSLOTH, explain, nox_argv, nox_env, run_nox

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
FUSED = "fused-ce-masked-nan"

FAULTS = f"""
[options]
timeout = 300

[[build]]
name = "u"
package = "unsloth"
source = "pypi"
version = "{UNSLOTH}"

[[build]]
name = "u-hang"
package = "unsloth"
source = "backport"
base = "u"
backport = "backports/hang"

[[build]]
name = "u-abort"
package = "unsloth"
source = "backport"
base = "u"
backport = "backports/abort"

[[build]]
name = "z"
package = "unsloth_zoo"
source = "pypi"
version = "2026.10.9"

[[build]]
name = "z-torch"
package = "unsloth_zoo"
source = "pypi"
version = "2026.10.9"

[[build]]
name = "z-nover"
package = "unsloth_zoo"
source = "pypi"
version = "2026.99.1"

[[build]]
name = "z-broken"
package = "unsloth_zoo"
source = "path"
path = "broken_zoo"

# Every injected fault is an expected error; the healthy cell is expected as it is: its fused kernel carries
# the fix, its CPU-backend kernel (zoo 2026.10.9) is exposed with no guard, its GRPO loss is floored (fixed
# from 2026.9.8) and the pair imports (pair-compat, as on the default matrix's same pair). So a run that
# keeps every finding exits 0, and a fault that stopped being an error would show as XPASS.
[[expect]]
state = "error"

[[expect]]
unsloth = "u"
zoo = "z"
check = "fused-ce-masked-nan"
state = "not-needed"

[[expect]]
unsloth = "u"
zoo = "z"
check = "cpu-ce-masked-nan"
state = "missing"

[[expect]]
unsloth = "u"
zoo = "z"
check = "grpo-normalizer-nan"
state = "not-needed"

[[expect]]
unsloth = "u"
zoo = "z"
check = "pair-compat"
state = "not-needed"

[pairs]
product = false
include = [
  {{ unsloth = "u", zoo = "z" }},
  {{ unsloth = "u-hang", zoo = "z", options = {{ timeout = 90 }} }},
  {{ unsloth = "u-abort", zoo = "z" }},
  {{ unsloth = "u", zoo = "z-torch", options = {{ torch = "==0.0.1" }} }},
  {{ unsloth = "u", zoo = "z-nover" }},
  {{ unsloth = "u", zoo = "z-broken" }},
]
"""


def write_matrix(base: Path, text: str, name: str = "faults.toml") -> Path:
    for d in ("backports", "broken_zoo"):
        if not (base / d).exists():
            shutil.copytree(HERE / d, base / d)
    path = base / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("faults")
    matrix = write_matrix(base, FAULTS)
    out, envdir = base / "out", base / "envs"
    proc = run_nox(envdir, "-s", "matrix", out=out, matrix=matrix)
    return {"proc": proc, "out": out, "base": base, "envdir": envdir, "matrix": matrix}


def cells(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    return {c["cell_id"]: c for c in report["cells"]}


def test_faulty_matrix_finishes_and_reports_every_cell(faults: dict) -> None:
    assert faults["proc"].returncode == 0, explain(faults["proc"])
    got = cells(faults["out"])
    assert set(got) == {"u__z", "u-hang__z", "u-abort__z", "u__z-torch", "u__z-nover", "u__z-broken"}
    assert got["u__z"]["verdicts"][FUSED]["guard"] == "not-needed" and got["u__z"]["error"] is None
    assert all(v["guard"] == "error" for c in got if c != "u__z" for v in got[c]["verdicts"].values())
    for fmt in ("report.json", "report.md", "report.html", "junit.xml"):
        assert (faults["out"] / fmt).is_file()


def test_hanging_probe_is_a_timeout_with_log_tail(faults: dict) -> None:
    cell = cells(faults["out"])["u-hang__z"]
    assert cell["error"]["kind"] == "timeout"
    # the unsloth process hung: its first step (the first registered check's first unsloth step) names it
    from probes import checks

    first = checks.phases_module(checks.REGISTRY[0]).UNSLOTH_STEPS[0].name
    assert f"probe {FUSED}/{first}: unsloth did not finish within 90 s" in cell["error"]["message"]
    assert "===== unsloth" in cell["error"]["log_tail"]
    for check in (FUSED, "cpu-ce-masked-nan"):
        steps = {s["name"]: s for s in cell["checks"][check]["steps"]}
        assert steps["runtime"]["status"] == "ok"  # the raw phase never imports unsloth
        # one unsloth process for every check, killed once: each of its steps says so
        assert steps["guard"]["status"] == steps["behavior"]["status"] == "timeout"
        assert steps["guard"]["seconds"] < 120


def test_aborting_probe_is_a_crash_with_signal(faults: dict) -> None:
    cell = cells(faults["out"])["u-abort__z"]
    assert cell["error"]["kind"] == "crash"
    assert "unsloth was killed by SIGABRT" in cell["error"]["message"]
    assert "===== unsloth" in cell["error"]["log_tail"]


def test_unresolvable_pair_keeps_uvs_message(faults: dict) -> None:
    cell = cells(faults["out"])["u__z-torch"]
    assert cell["error"]["kind"] == "build"
    assert cell["error"]["message"].startswith("uv pip install failed (exit 1)")
    assert "torch==0.0.1" in cell["error"]["message"]
    assert "Traceback" not in cell["error"]["message"]


def test_missing_version_names_nearest_releases(faults: dict) -> None:
    cell = cells(faults["out"])["u__z-nover"]
    assert cell["error"]["kind"] == "spec"
    assert "unsloth-zoo 2026.99.1 does not exist on the index; nearest releases:" in cell["error"]["message"]


def test_wheel_that_fails_to_build(faults: dict) -> None:
    cell = cells(faults["out"])["u__z-broken"]
    assert cell["error"]["kind"] == "build"
    assert "building a wheel from" in cell["error"]["message"] and "broken_zoo" in cell["error"]["message"]
    assert "Traceback (most recent call last)" not in cell["error"]["message"].split("failed", 1)[0]


def test_unreachable_index_keeps_complete_cells(faults: dict) -> None:
    """A closed loopback port as the index: the complete cell is still reported, the new one says why not."""
    text = FAULTS.split("[pairs]", maxsplit=1)[0] + """
[[build]]
name = "z-old"
package = "unsloth_zoo"
source = "pypi"
version = "2026.9.3"

[pairs]
product = false
include = [{ unsloth = "u", zoo = "z" }, { unsloth = "u", zoo = "z-old" }]
"""
    matrix = write_matrix(faults["base"], text, "offline.toml")
    before = (faults["out"] / "cells" / "u__z" / "cell.json").read_bytes()
    proc = run_nox(faults["envdir"], "-s", "matrix", out=faults["out"], matrix=matrix,
                   UV_DEFAULT_INDEX="http://127.0.0.1:9/simple", UV_NO_CACHE="1")
    assert proc.returncode == 0, explain(proc)
    got = cells(faults["out"])
    assert got["u__z"]["verdicts"][FUSED]["guard"] == "not-needed"
    assert (faults["out"] / "cells" / "u__z" / "cell.json").read_bytes() == before
    old = got["u__z-old"]
    assert old["error"]["kind"] == "index"
    assert old["error"]["message"].startswith("the package index is unreachable")
    assert "127.0.0.1:9" in old["error"]["message"]


def test_free_disk_check_refuses_with_figures(faults: dict) -> None:
    proc = run_nox(faults["envdir"], "-s", "cell(u-abort__z)", "--", "--force", out=faults["out"],
                   matrix=faults["matrix"], SKEWMATRIX_MIN_FREE_GB="1000000")
    assert proc.returncode == 0, explain(proc)
    cell = json.loads((faults["out"] / "cells" / "u-abort__z" / "cell.json").read_text())
    assert cell["error"]["kind"] == "disk"
    assert "GB free, a cell env needs at least 1000000.0 GB" in cell["error"]["message"]


def interruptible(argv: list[str]) -> list[str]:
    """``argv`` with Ctrl-C's default action: a shell without job control starts a background job (`cmd &`)
    with SIGINT ignored, and an ignored signal stays ignored across exec, so a suite started that way would
    otherwise send this run a SIGINT it never sees (Python installs its KeyboardInterrupt handler only where
    SIGINT is not ignored)."""
    reset = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", reset, *argv]


def test_interrupt_keeps_results_lock_refuses_second_run_and_rerun_resumes(faults: dict) -> None:
    text = FAULTS.split("[pairs]", maxsplit=1)[0] + """
[pairs]
product = false
include = [{ unsloth = "u", zoo = "z" }, { unsloth = "u-hang", zoo = "z", options = { timeout = 600 } }]
"""
    matrix = write_matrix(faults["base"], text, "interrupt.toml")
    out = faults["out"]
    done = out / "cells" / "u__z" / "cell.json"
    before = done.read_bytes()
    shutil.rmtree(out / "cells" / "u-hang__z", ignore_errors=True)
    first_log = (faults["base"] / "interrupted-run.log").open("w")
    proc = subprocess.Popen(interruptible(nox_argv(faults["envdir"], "-s", "matrix")), cwd=ROOT,
                            env=nox_env(out, matrix), stdout=first_log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        log = out / "cells" / "u-hang__z" / "work" / "probes.log"
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not (log.is_file() and "===== unsloth" in log.read_text()):
            time.sleep(1)
        assert log.is_file(), "the hanging cell never reached its guard probe"
        second = run_nox(faults["envdir"], "-s", "report", out=out, matrix=matrix, timeout=120)
        assert second.returncode != 0
        assert "another skewmatrix run (pid" in second.stdout + second.stderr
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        first_log.close()
    assert done.read_bytes() == before  # the completed result is untouched
    assert not (out / "cells" / "u-hang__z" / "cell.json").exists()  # nothing half-written
    report = run_nox(faults["envdir"], "-s", "report", out=out, matrix=matrix, timeout=300)
    assert report.returncode == 0, explain(report)
    got = cells(out)
    assert got["u-hang__z"]["error"]["kind"] == "missing"
    assert got["u__z"]["verdicts"][FUSED]["guard"] == "not-needed"
    rerun = run_nox(faults["envdir"], "-s", "cell(u__z)", out=out, matrix=matrix, timeout=600)
    assert rerun.returncode == 0, explain(rerun)
    assert "unchanged since the last run" in rerun.stdout + rerun.stderr
    assert done.read_bytes() == before
