"""One way to run an env: every process the harness starts in an env goes through ``matrix.envs.envrun``, with one
result type (``matrix.envs.tools.Ran``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from matrix.cli import bench
from matrix.envs import envrun
from matrix.envs.tools import Ran

ROOT = Path(__file__).resolve().parents[2]
# Where the harness may start a process itself, and why: the runners, the bench's timed `nox -s matrix` (the
# command a user runs, measured as is), and the GPU wheelhouse's `pip download` with the harness's own Python.
STARTERS = {"matrix/envs/tools.py", "matrix/envs/envrun.py", "matrix/cli/bench.py", "matrix/gpu/wheelhouse.py"}


def test_no_other_module_starts_a_process() -> None:
    found = set()
    for path in sorted((ROOT / "matrix").rglob("*.py")):
        if "backports" in path.parts:
            continue
        if re.search(r"subprocess\.(run|Popen|call|check_output|check_call)\(", path.read_text(encoding="utf-8")):
            found.add(str(path.relative_to(ROOT)))
    assert found <= STARTERS, found - STARTERS


def test_one_result_type() -> None:
    text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "matrix").rglob("*.py"))
    assert "ToolResult" not in text and "class Ran" not in (ROOT / "matrix" / "envs" / "envrun.py").read_text()


def test_the_bench_floor_runs_in_a_cells_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, str]] = []

    def run(argv: list[str], *, env: dict[str, str], **_: Any) -> Ran:
        seen.append(env)
        return Ran(argv, 0)

    monkeypatch.setattr(envrun, "run", run)
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    monkeypatch.setenv("UNSLOTH_STRAY", "1")
    bench.floor(tmp_path, ["allow-cpu", "cpu-backend"], repeats=1)
    allow, backend = seen
    for env in seen:
        assert "PYTHONPATH" not in env and "UNSLOTH_STRAY" not in env
        assert {k: env[k] for k in envrun.RUN_ENV} == envrun.RUN_ENV  # offline and silent, as a cell's probes
    assert allow.get("UNSLOTH_ALLOW_CPU") == "1" and "UNSLOTH_ALLOW_CPU" not in backend


def test_a_failing_floor_is_a_bench_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envrun, "run", lambda argv, **_: Ran(argv, 1, "", "ModuleNotFoundError: unsloth"))
    with pytest.raises(bench.BenchError, match="ModuleNotFoundError"):
        bench.floor(tmp_path, ["allow-cpu"], repeats=1)
