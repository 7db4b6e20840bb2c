"""The registry of skew checks, and the contract every check folder meets.

A *check* is one known hazard in the code under test (a skew between unsloth
and unsloth_zoo, or the same fault in another training codebase): its
detectors, its behaviour suite, its training probe, its verdict logic and its
wording. Each check is one package under ``probes/checks/``; adding a hazard
means writing a check folder and adding its id to ``REGISTRY`` below.
Nothing outside a check folder names a hazard.

A check folder ``probes/checks/<name>/`` provides:

``__init__.py`` (stdlib only)
    ``INFO``: a :class:`CheckInfo` (id, title, one-line hazard, meanings of
    the states in this check's words). ``SUBJECT``: a :class:`Subject` -- the
    packages under test, one matrix axis each (unsloth x unsloth_zoo wheels,
    or a source tree such as a nanochat checkout); a matrix file's builds
    must be one subject's packages, and a cell runs the checks of that
    subject only. ``FIX`` (optional): an :class:`UpstreamFix` -- the known
    fix upstream (release, pull requests) that every fix line names.
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

Optional capabilities. A check folder may also provide any of these; generic
code iterates the registry for them (:func:`with_capability`) and names no
check. A check that lacks one is shown ``n/a`` with :func:`lacks`'s reason,
never left out in silence. Their value types live in
:mod:`probes.checks.capabilities`.

a training route
    a ``Step(..., training=True)`` among its phases: a real training run on the
    route users take into the kernel, skipped with the reason when the matrix
    turns training off. Its per-step records use the keys of
    ``probes/training.py`` plus the count the trainer handed the kernel, under
    the key its ``render.py`` names (``TRAIN_COUNT``).
``scan.py`` (the harness imports it: no torch)
    ``TARGET``: a :class:`ScanTarget` -- which file and function of which
    package the wide scan reads in every zoo release, the static detector that
    judges it, the runtime detector ``--confirm`` runs, and how an unsloth
    release that replaces the kernel is recognised (its guard).
``mutation.py`` (the harness imports it)
    ``TARGET``: a :class:`MutationTarget` -- the guard file and the module name
    it is loaded under (the check's default guard module, written once in the
    check folder), the probe-side runner (``mutate.py``), the equivalence list
    inside the folder, and the pairings it runs on.
``render.py`` (stdlib only: ``reports/`` imports it)
    the renderers of the check's own step payloads (:class:`StepRenderer`):
    ``details(section)`` gives the items and tables every format shows in a
    cell's drill-down, ``TRAIN_COUNT`` the training table's count column.
``gpu.py`` (the harness imports it)
    ``MEASURE``: a :class:`GpuMeasure` -- the GPU device check's cases and
    wheels, the module that measures in a case's interpreter, and its table.
``pairs.py`` (the harness imports it: no torch)
    ``TARGET``: a :class:`PairTarget` -- how the check judges a pair of
    releases from both sides' source alone; the history matrix
    (``skewmatrix history``) reads every pair of a release window with it.

A check has one name, its id (``REGISTRY``, ``INFO.id``, in JSON, matrix files
and on the command line); its folder is the id with underscores
(:func:`folder`, the one translation), and its short label exists only in
the renderers.

The generic machinery (fork/spawn the processes, time and judge each
step, write the probe JSON) lives in ``probes/__main__.py`` and
``probes/phases.py`` and knows no check by name.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from probes.checks.capabilities import (
    DetailTable,
    GpuCase,
    GpuMeasure,
    GuardScan,
    MutationTarget,
    PairTarget,
    ScanTarget,
    StepDetails,
    StepRenderer,
    Subject,
    UpstreamFix,
)

__all__ = ["CAPABILITIES", "REGISTRY", "CheckInfo", "DetailTable", "GpuCase", "GpuMeasure", "GuardScan",
           "MutationTarget", "PairTarget", "PhaseContext", "RegistryError", "ScanTarget", "Step", "StepDetails",
           "StepRenderer", "Subject", "UpstreamFix", "capability", "folder", "folder_of", "for_axes", "ids", "info",
           "infos", "lacks", "package", "phases_module", "pick", "subject", "subjects", "upstream_fix",
           "verdict_module", "with_capability"]

# The registry: one line per check, its id, in report order. A check's folder is its id with underscores
# (:func:`folder`, the one place that says so); everything here takes and returns ids.
REGISTRY: tuple[str, ...] = (
    "fused-ce-masked-nan",
    "cpu-ce-masked-nan",
    "nanochat-sft-masked-nan",
    "grpo-normalizer-nan",
    "pair-compat",
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
    reads_import: bool = False  # an unsloth step that runs whether or not ``import unsloth`` succeeded
    # Callable[[PhaseContext], None]: called once ``import unsloth`` succeeded, before any check's steps run, to
    # start work this step collects (a child forked with ``probes.common.fork_start``, kept in ``ctx.shared``),
    # so that it runs beside the steps before this one. The step must also work when nothing was started.
    early: Any = None


def start_early(planned: list[tuple[str, tuple[Step, ...], PhaseContext]], train: bool) -> dict[str, Any]:
    """Each planned step's ``early`` work, started before any step runs (``train`` False: a training step's is
    not). One that fails to start is noted under ``early_errors`` (the result), and its step does the work."""
    errors = {}
    for check_id, steps, ctx in planned:
        for st in steps:
            if st.early is not None and (train or not st.training):
                try:
                    st.early(ctx)
                except Exception as exc:  # the step finds the work not started and does it itself
                    errors[f"{check_id}:{st.name}"] = f"{type(exc).__name__}: {exc}"[:500]
    return {"early_errors": errors} if errors else {}


@dataclass
class PhaseContext:
    """What a step gets: the cell's options and the state its process shares."""

    device: str
    torch_compile: bool
    cpu_mode: str
    workdir: Any  # pathlib.Path
    shared: dict[str, Any]
    raw: dict[str, Any] | None = None  # the raw process's shared state of this check (needs_raw steps only)
    # How this process's ``import unsloth`` went (unsloth and CPU-backend processes only):
    # ``{"imported": bool, "chain": [{"type", "message", "link", "name", "where"}, ...]}``, the exception
    # and its whole ``__cause__``/``__context__`` chain; see ``probes.common.exception_chain``.
    imported: dict[str, Any] | None = None


def folder(check_id: str) -> str:
    """The folder (and package name) of a check under ``probes/checks/``: its id with underscores. The one place
    a folder is derived from an id; :func:`folder_of` is the same for an id that may not be registered."""
    return check_id.replace("-", "_")


def package(check_id: str) -> str:
    return f"{__name__}.{folder(check_id)}"


def info(check_id: str) -> CheckInfo:
    """The check's :class:`CheckInfo`; its ``id`` must be the registry's (a folder whose INFO says otherwise
    is a registry error, not a second spelling)."""
    got: CheckInfo = importlib.import_module(package(check_id)).INFO
    if got.id != check_id:
        raise RegistryError(f"probes/checks/{folder(check_id)}/__init__.py: INFO.id is {got.id!r}, but the "
                            f"registry names the check {check_id!r}")
    return got


class RegistryError(ValueError):
    """The registry and a check folder disagree (an id, or a capability declared twice)."""


def infos() -> list[CheckInfo]:
    """Every registered check, in registry order (stdlib-only imports)."""
    return [info(n) for n in REGISTRY]


def ids() -> list[str]:
    return [i.id for i in infos()]


def subject(name: str) -> Subject:
    """The packages a check's cells are made of (``SUBJECT`` in its ``__init__.py``)."""
    return importlib.import_module(package(name)).SUBJECT  # type: ignore[no-any-return]


def subjects() -> list[Subject]:
    """The distinct subjects of the registered checks, in registry order."""
    out: list[Subject] = []
    for name in REGISTRY:
        s = subject(name)
        if all(dict(s.axes) != dict(o.axes) for o in out):
            out.append(s)
    return out


def for_axes(roles: Any) -> list[str]:
    """The registered checks whose subject has exactly the axes ``roles`` (the checks a cell runs)."""
    want = set(roles)
    return [n for n in REGISTRY if set(subject(n).roles) == want]


def upstream_fix(name: str) -> UpstreamFix | None:
    """The check's declared upstream fix (``FIX`` in its ``__init__.py``), or None when it declares none."""
    value = getattr(importlib.import_module(package(name)), "FIX", None)
    return value if isinstance(value, UpstreamFix) else None


def verdict_module(name: str) -> ModuleType:
    return importlib.import_module(f"{package(name)}.verdict")


def phases_module(name: str) -> ModuleType:
    return importlib.import_module(f"{package(name)}.phases")


# Optional capability -> (the module that declares it in a check folder, the value's name there, in words).
CAPABILITIES: dict[str, tuple[str, str, str]] = {
    "scan": ("scan", "TARGET", "scan target"),
    "mutation": ("mutation", "TARGET", "mutation target"),
    "render": ("render", "", "step renderer"),
    "gpu": ("gpu", "MEASURE", "GPU measurement"),
    "pairs": ("pairs", "TARGET", "pair reader"),
}


def folder_of(check_id: str) -> str | None:
    """The folder of a registered check id, or None for an id no registered check has. A check is spelt by its
    id in every file and output; the folder is where its code lives, and a report's short label exists only
    when rendering."""
    return folder(check_id) if check_id in REGISTRY else None


def capability(name: str, kind: str) -> Any:
    """The check's declared value of capability ``kind`` (``CAPABILITIES``), or None when it declares none.

    For ``render`` the value is the module itself (a :class:`StepRenderer`). Looked up with
    ``find_spec`` first, so a missing module is "none", while an error inside a present one still raises.
    """
    module, attr, _ = CAPABILITIES[kind]
    full = f"{package(name)}.{module}"
    if importlib.util.find_spec(full) is None:
        return None
    mod = importlib.import_module(full)
    return getattr(mod, attr) if attr else mod


def with_capability(kind: str) -> list[str]:
    """The registered checks that declare capability ``kind``, in registry order."""
    return [n for n in REGISTRY if capability(n, kind) is not None]


class PickError(ValueError):
    """No registered check fits :func:`pick`; the message says why and lists the ids that would."""


def pick(kind: str, check_id: str = "", *, sole: bool = False) -> str:
    """The id of the check ``check_id`` if it declares capability ``kind``; with no id, the first registered
    check that declares it (``sole``: the only one, else an error naming them). The one place a command turns
    ``--check ID`` into a check with a capability (the scan, the mutation run, the GPU run, the history)."""
    declared = with_capability(kind)
    valid = list(declared)
    module, _, words = CAPABILITIES[kind]
    if not check_id:
        if not declared:
            raise PickError(f"no registered check declares a {words} ({module}.py in its folder)")
        if sole and len(declared) != 1:
            raise PickError(f"--check is required: the checks with a {words} are {', '.join(valid)}")
        return declared[0]
    if check_id in declared:
        return check_id
    close = difflib.get_close_matches(check_id, valid, n=1)
    why = lacks(check_id, kind) if check_id in REGISTRY else "no registered check has this id"
    raise PickError(f"--check {check_id!r}: {why}; valid: {', '.join(valid) or 'none'}"
                    + (f" (did you mean {close[0]!r}?)" if close else ""))


def lacks(check_id: str, kind: str) -> str:
    """The ``n/a`` reason a report or command shows for a check without capability ``kind``."""
    module, _, words = CAPABILITIES[kind]
    return f"n/a: check {check_id} declares no {words} (no {module}.py in probes/checks/{folder(check_id)}/)"
