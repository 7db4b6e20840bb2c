"""The registry of skew checks, and the contract every check folder meets.

A *check* is one known skew hazard between unsloth and unsloth_zoo: its
detectors, its behaviour suite, its training probe, its verdict logic and its
wording. Each check is one package under ``probes/checks/``; adding a hazard
means copying a check folder and adding one line to ``REGISTRY`` below.
Nothing outside a check folder names a hazard.

A check folder ``probes/checks/<name>/`` provides:

``__init__.py`` (stdlib only)
    ``INFO``: a :class:`CheckInfo` (id, title, one-line hazard, meanings of
    the states in this check's words).
``phases.py`` (runs inside a cell env; may import torch and the packages
under test, lazily)
    ``static() -> dict`` -- in the parent probe process, without importing
    zoo: ``{"verdict": "vulnerable"|"fixed"|"absent"|"unknown", "reason": ...}``.
    ``RAW_STEPS`` / ``UNSLOTH_STEPS`` -- ordered tuples of :class:`Step`. Raw
    steps run in a process that never imports unsloth; unsloth steps run after
    ``import unsloth`` in a second process. A step function takes a
    :class:`PhaseContext` and returns a JSON-able dict (``{"ok": False,
    "error": ...}`` for a failure of its own); an exception becomes that
    step's error. ``ctx.shared`` is a dict the steps of one process share;
    what the raw steps leave there reaches the unsloth steps as ``ctx.raw``
    (steps marked ``needs_raw`` wait for it).
    ``CPU_BACKEND_STEPS`` (optional) -- steps that run after an ``import
    unsloth`` in zoo's CPU-backend mode (neither ``UNSLOTH_ALLOW_CPU`` nor
    ``UNSLOTH_IS_PRESENT`` set, so unsloth selects ``unsloth_zoo.cpu`` on a
    host with no accelerator). With ``--cpu-mode cpu-backend`` the unsloth
    process already is that mode: they run there, after the check's
    ``UNSLOTH_STEPS`` (no second import). With ``allow-cpu`` (the default) a
    third process, ``cpu-backend``, is forked alongside the other two, only on
    a ``cpu`` device whose installed zoo has ``unsloth_zoo/cpu`` (checked
    without importing zoo); elsewhere, and with ``--phases raw``, they do not
    run, and each is recorded ``skipped`` with an ``n/a: ...`` reason. Its
    import time is ``import_unsloth_cpu_backend_s`` in the probe JSON; its
    steps name ``cpu-backend`` as their ``process``. Step names are unique
    across a check's three tuples (one list of steps per check in the JSON).
``verdict.py`` (stdlib only: ``reports/`` imports it)
    ``classify(check: dict, cell: dict) -> Verdict``: from this check's
    section of the cell JSON (``cell["checks"][id]``: ``static`` and
    ``steps``) to the states of :mod:`probes.checks.vocabulary`.

The generic machinery (fork/spawn the processes, time and judge each
step, write the probe JSON) lives in ``probes/__main__.py`` and
``probes/phases.py`` and knows no check by name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# The registry: one line per check, in report order.
REGISTRY: tuple[str, ...] = (
    "fused_ce_masked_nan",
    "cpu_ce_masked_nan",
)


@dataclass(frozen=True)
class CheckInfo:
    """What a check is, in words a report can print."""

    id: str          # stable id used in JSON, matrix files and JUnit (kebab-case)
    title: str       # short human title
    hazard: str      # one sentence: what goes wrong for a user
    kernel: str      # what code the check is about (dotted name)
    zoo_meaning: dict[str, str]
    guard_meaning: dict[str, str]
    fix_hint: str    # how a user gets out of the failing states, one sentence


@dataclass(frozen=True)
class Step:
    """One step of a check's phase: its name in the cell JSON and the function that runs it."""

    name: str
    fn: Any  # Callable[[PhaseContext], dict]
    needs_raw: bool = False
    training: bool = False  # a training run: skipped, with the reason, when the matrix turns training off


@dataclass
class PhaseContext:
    """What a step gets: the cell's options and the state its process shares."""

    device: str
    torch_compile: bool
    cpu_mode: str
    workdir: Any  # pathlib.Path
    shared: dict[str, Any]
    raw: dict[str, Any] | None = None  # the raw process's shared state of this check (needs_raw steps only)


def package(name: str) -> str:
    return f"{__name__}.{name}"


def info(name: str) -> CheckInfo:
    return importlib.import_module(package(name)).INFO  # type: ignore[no-any-return]


def infos() -> list[CheckInfo]:
    """Every registered check, in registry order (stdlib-only imports)."""
    return [info(n) for n in REGISTRY]


def ids() -> list[str]:
    return [i.id for i in infos()]


def verdict_module(name: str) -> ModuleType:
    return importlib.import_module(f"{package(name)}.verdict")


def phases_module(name: str) -> ModuleType:
    return importlib.import_module(f"{package(name)}.phases")
