"""Work a step starts early (``checks.Step.early``): forked children started at once and collected later
(``probes.common.fork_start``), started by the unsloth phase right after its import, reaped when never
collected."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from probes import checks, phases
from probes.checks import Step
from probes.common import fork_start, in_fork, reap


def _meet(send: Any, mine: str, other: str) -> None:
    """Mark this child started, then wait (at most 5 s) for the other child's mark."""
    Path(mine).touch()
    deadline = time.monotonic() + 5
    while not Path(other).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    send.send({"met": Path(other).exists()})


def _sleep(send: Any, seconds: float) -> None:
    time.sleep(seconds)
    send.send({"slept": seconds})


def test_two_children_started_at_once_run_beside_each_other(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    first = fork_start(_meet, (a, b), 30, "a")
    second = fork_start(_meet, (b, a), 30, "b")
    assert first.result() == {"met": True} and second.result() == {"met": True}
    assert first.result() is first.result()  # collected once


def test_one_after_the_other_they_would_not_meet(tmp_path: Path) -> None:
    """The control: in_fork waits for its child, so the first child waits out its 5 s alone."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert in_fork(_meet, (a, b), 30, "a") == {"met": False}


def test_the_timeout_counts_from_the_start_not_from_the_collection() -> None:
    slow = fork_start(_sleep, (30.0,), 1.0, "sleeping")
    time.sleep(1.2)
    began = time.monotonic()
    got = slow.result()
    assert got == {"state": "error", "reason": "sleeping did not end within 1 s"}
    assert time.monotonic() - began < 1.0


def test_a_child_never_collected_is_stopped_by_reap() -> None:
    left = fork_start(_sleep, (60.0,), 120, "left behind")
    reap()
    assert not left._proc.is_alive()


class _Fake:
    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.UNSLOTH_STEPS = steps


def _plan(monkeypatch: pytest.MonkeyPatch, steps: tuple[Step, ...], imports: bool) -> None:
    monkeypatch.setattr(phases, "_check_names", lambda selected: ["fake-check"])
    monkeypatch.setattr(checks, "phases_module", lambda name: _Fake(steps))
    monkeypatch.setattr(checks, "info", lambda name: types.SimpleNamespace(id=name))
    monkeypatch.setitem(sys.modules, "unsloth", types.ModuleType("unsloth") if imports else None)


def test_the_unsloth_phase_starts_early_work_after_the_import_and_before_any_step(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    order: list[str] = []

    def early(ctx: checks.PhaseContext) -> None:
        order.append("early")
        ctx.shared["started"] = fork_start(_sleep, (0.0,), 30, "early work")

    def first(ctx: checks.PhaseContext) -> dict[str, Any]:
        order.append("first")
        return {}

    def second(ctx: checks.PhaseContext) -> dict[str, Any]:
        order.append("second")
        return ctx.shared.pop("started").result()

    def breaks(ctx: checks.PhaseContext) -> None:
        raise OSError("no fork here")

    def alone(ctx: checks.PhaseContext) -> dict[str, Any]:
        return {"started": "started" in ctx.shared}

    _plan(monkeypatch, (Step("first", first), Step("second", second, early=early),
                        Step("alone", alone, early=breaks)), imports=True)
    out = phases.run_unsloth("cpu", False, "allow-cpu", tmp_path)
    assert order == ["early", "first", "second"]
    steps = out["checks"]["fake-check"]["steps"]
    assert steps["second"]["slept"] == 0.0 and steps["second"]["ok"] is True
    # work that did not start is said, and its step still ran
    assert out["early_errors"] == {"fake-check:alone": "OSError: no fork here"}
    assert steps["alone"] == {"ok": True, "started": False, "seconds": steps["alone"]["seconds"]}


def test_no_early_work_when_the_import_failed_and_none_left_running(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started: list[Any] = []

    def early(ctx: checks.PhaseContext) -> None:
        started.append(fork_start(_sleep, (60.0,), 120, "never collected"))

    def reads(ctx: checks.PhaseContext) -> dict[str, Any]:
        return {"imported": (ctx.imported or {}).get("imported")}

    _plan(monkeypatch, (Step("reads", reads, reads_import=True, early=early),), imports=False)
    out = phases.run_unsloth("cpu", False, "allow-cpu", tmp_path)
    assert started == [] and out["checks"]["fake-check"]["steps"]["reads"]["imported"] is False

    _plan(monkeypatch, (Step("skips", lambda ctx: {}, early=early),), imports=True)
    phases.run_unsloth("cpu", False, "allow-cpu", tmp_path)
    assert len(started) == 1 and not started[0]._proc.is_alive()  # its step never collected it: reaped
