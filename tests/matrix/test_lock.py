"""The output-directory lock: a second run is refused, sibling session processes cooperate."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from matrix.cells import pipeline

ROOT = Path(__file__).resolve().parents[2]
HOLD = ("import sys, time; from pathlib import Path; from matrix.cells import pipeline; "
        "pipeline.acquire_run_lock(Path(sys.argv[1]), sys.argv[2]); print('held', flush=True); time.sleep(60)")


@pytest.fixture
def holder(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path), "run-A"], env=env, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield tmp_path
    proc.kill()
    proc.wait()
    proc.stdout.close()


def test_another_run_is_refused_with_the_holders_id(holder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "_RUN_LOCKS", {})
    with pytest.raises(pipeline.RunLockedError, match=r"another skewmatrix run \(pid run-A\)"):
        pipeline.acquire_run_lock(holder, "run-B")


def test_a_sibling_process_of_the_same_run_proceeds(holder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "_RUN_LOCKS", {})
    start = time.monotonic()
    pipeline.acquire_run_lock(holder, "run-A")
    assert time.monotonic() - start < 5
