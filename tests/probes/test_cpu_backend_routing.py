"""Where a check's CPU-backend steps run (probes/phases.py), decided without importing zoo."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from probes import phases


def fake_zoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, with_cpu: bool) -> None:
    pkg = tmp_path / "site" / "unsloth_zoo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('zoo must not be imported to find its backend')\n")
    if with_cpu:
        (pkg / "cpu").mkdir()
        (pkg / "cpu" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "unsloth_zoo", raising=False)


def test_a_zoo_with_a_cpu_backend_gets_the_third_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_zoo(tmp_path, monkeypatch, with_cpu=True)
    assert phases.cpu_backend_unavailable("cpu") is None
    assert "unsloth_zoo" not in sys.modules


def test_a_zoo_without_one_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_zoo(tmp_path, monkeypatch, with_cpu=False)
    assert phases.cpu_backend_unavailable("cpu") == "n/a: this zoo has no CPU backend (no unsloth_zoo/cpu)"


def test_a_gpu_device_never_selects_the_cpu_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_zoo(tmp_path, monkeypatch, with_cpu=True)
    assert phases.cpu_backend_unavailable("cuda").startswith("n/a: the CPU backend is selected only on a host")


def test_the_cpu_backend_process_drops_both_switches() -> None:
    assert phases.phase_env("cpu-backend", "allow-cpu") == ({}, ("UNSLOTH_IS_PRESENT", "UNSLOTH_ALLOW_CPU"))
    assert phases.phase_env("unsloth", "allow-cpu") == ({"UNSLOTH_ALLOW_CPU": "1"}, ("UNSLOTH_IS_PRESENT",))
    assert phases.phase_env("raw", "cpu-backend")[0] == phases.RAW_ENV
