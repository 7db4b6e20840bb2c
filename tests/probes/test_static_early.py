"""The static detectors read installed source in a child forked before ``import torch`` (fork isolation), so
that the reading uses the core the import leaves idle; under spawn isolation they are read in the probes'
own process. ``probes.__main__.start_static``."""

from __future__ import annotations

import os
import time
import types
from pathlib import Path
from typing import Any

import pytest

from probes import __main__ as probes_main
from probes import checks
from probes.common import disown, fork_start, reap


def _detectors(monkeypatch: pytest.MonkeyPatch, static: dict[str, Any]) -> None:
    monkeypatch.setattr(checks, "phases_module", lambda name: types.SimpleNamespace(static=static[name]))


def test_fork_reads_in_a_child_started_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    marker = tmp_path / "reading"

    def reads() -> dict[str, Any]:
        marker.touch()
        return {"verdict": "fixed", "pid": os.getpid()}

    _detectors(monkeypatch, {"a": reads})
    collect = probes_main.start_static(["a"], 30, fork=True)
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:  # it reads before anyone asks for it
        time.sleep(0.01)
    assert marker.exists()
    readings, seconds = collect()
    assert readings["a"]["verdict"] == "fixed" and readings["a"]["pid"] != os.getpid()
    assert seconds >= 0


def test_spawn_reads_here_when_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    marker = tmp_path / "reading"

    def reads() -> dict[str, Any]:
        marker.touch()
        return {"verdict": "fixed", "pid": os.getpid()}

    _detectors(monkeypatch, {"a": reads})
    collect = probes_main.start_static(["a"], 30, fork=False)
    time.sleep(0.1)
    assert not marker.exists()
    readings, _ = collect()
    assert readings == {"a": {"verdict": "fixed", "pid": os.getpid()}}


def test_a_detector_that_raises_is_unknown_and_the_others_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def breaks() -> dict[str, Any]:
        raise ValueError("cannot parse")

    _detectors(monkeypatch, {"a": breaks, "b": lambda: {"verdict": "vulnerable"}})
    readings, _ = probes_main.start_static(["a", "b"], 30, fork=True)()
    assert readings["a"]["verdict"] == "unknown" and "ValueError: cannot parse" in readings["a"]["reason"]
    assert readings["b"] == {"verdict": "vulnerable"}


def test_a_reading_child_that_dies_or_hangs_makes_every_reading_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    _detectors(monkeypatch, {"a": lambda: os._exit(3), "b": lambda: {"verdict": "fixed"}})
    readings, _ = probes_main.start_static(["a", "b"], 30, fork=True)()
    assert set(readings) == {"a", "b"}
    assert all(r["verdict"] == "unknown" and "died (exit code 3)" in r["reason"] for r in readings.values())

    _detectors(monkeypatch, {"a": lambda: time.sleep(60) or {}})
    readings, _ = probes_main.start_static(["a"], 1, fork=True)()
    assert readings["a"]["verdict"] == "unknown" and "did not end within 1 s" in readings["a"]["reason"]


def _sleep(send: Any, seconds: float) -> None:
    time.sleep(seconds)
    send.send({"slept": seconds})


def test_a_phase_forked_by_hand_does_not_stop_what_its_parent_started() -> None:
    """The phase processes are forked while the static reading runs: their own reap() must leave it be."""
    reading = fork_start(_sleep, (0.5,), 30, "the parent's child")
    pid = os.fork()
    if pid == 0:  # the phase child: reaps what it started, which is nothing
        code = 1
        try:
            disown()
            reap()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert reading.result() == {"slept": 0.5}
