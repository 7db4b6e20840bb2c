"""The optional capabilities a check folder may declare: one value each, of a type defined here.

A capability is a module of a known name in the check folder holding one
value (``scan.py``: ``TARGET``, a :class:`ScanTarget`; ``mutation.py``:
``TARGET``, a :class:`MutationTarget`; ``gpu.py``: ``MEASURE``, a
:class:`GpuMeasure`) or, for ``render.py``, the two names of
:class:`StepRenderer`. The registry (``probes.checks.capability``) finds
them; generic code that finds none prints ``n/a`` with the registry's
reason (``probes.checks.lacks``). The values are plain data plus, where the
harness calls into the check in its own process, a callable; what runs in a
cell env is named by module (``python -m``), never imported by the harness.

Stdlib only: ``reports`` imports these types with the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol


@dataclass(frozen=True)
class GuardScan:
    """How the scan recognises, in an unsloth release, code that replaces the check's kernel.

    ``module`` is the guard module our backport ships (its file is :attr:`member`, its import from
    ``unsloth/__init__.py`` wires it in); ``owner`` and ``attribute`` are what any replacement writes
    (``Owner.attribute = ...`` or ``setattr(Owner, "attribute", ...)``), the heuristic for other code.
    """

    module: str
    owner: str
    attribute: str

    @property
    def member(self) -> str:
        """The guard module's file inside an unsloth wheel."""
        return self.module.replace(".", "/") + ".py"

    @property
    def basename(self) -> str:
        """The guard module's last name, as ``from .<basename> import ...`` spells it."""
        return self.module.rsplit(".", 1)[-1]


def one_file_detect(file: str, analyze_source: Callable[[str, str], dict[str, Any]],
                    ) -> Callable[[Mapping[str, str]], dict[str, Any]]:
    """A :attr:`ScanTarget.detect` for a check whose static detector reads one file of the release:
    ``absent`` where the release has no ``file``, else ``analyze_source(text, file)``'s verdict, reason and line."""

    def detect(files: Mapping[str, str]) -> dict[str, Any]:
        if file not in files:
            return {"verdict": "absent", "reason": f"no {file}", "evidence_line": None}
        r = analyze_source(files[file], file)
        return {"verdict": r["verdict"], "reason": r["reason"], "evidence_line": r.get("line")}

    return detect


@dataclass(frozen=True)
class ScanTarget:
    """What the wide scan reads for this check in every zoo release, and looks for in every unsloth release.

    ``detect`` is the static detector in the harness's process (no torch, no zoo import): from
    ``{wheel member: text}`` to ``{"verdict": "vulnerable"|"fixed"|"absent"|"unknown", "reason": str,
    "evidence_line": int|None}``. It gets :attr:`file` alone, or with ``follow_imports`` the kernel's package
    and every zoo module reachable from it by imports. ``detector`` is the module (or package) the verdict
    comes from: its source keys the scan's analysis cache. ``runtime`` (``"module:function"``, called with
    the device in a throwaway env) backs ``--confirm``; ``guard`` the unsloth side. Either may be None: the
    scan then says ``n/a`` with the reason.
    """

    package: str  # import name of the distribution that ships the kernel, e.g. "unsloth_zoo"
    file: str  # the kernel's module inside a wheel, e.g. "unsloth_zoo/<package>/<module>.py"
    function: str  # what the detector judges in that file ("Class.method" or "function")
    detect: Callable[[Mapping[str, str]], Mapping[str, Any]]
    detector: ModuleType
    follow_imports: bool = True
    runtime: str | None = None
    guard: GuardScan | None = None

    @property
    def folder(self) -> str:
        """The kernel's package inside a wheel, with a trailing slash."""
        return self.file.rsplit("/", 1)[0] + "/"


def one_file_target(detector: ModuleType, runtime: str | None = None, package: str = "unsloth_zoo") -> ScanTarget:
    """The :class:`ScanTarget` of a check whose static detector reads one module of the release.

    ``detector`` names that module as ``REL`` (its path inside ``package``, as parts), what it judges there
    as ``FUNCTION``, and holds ``analyze_source(text, path)``; the scan reads only that file (``absent`` where
    the release has none: :func:`one_file_detect`). No guard is recognised (the unsloth side is ``n/a``);
    ``runtime`` backs ``--confirm`` where given.
    """
    file = f"{package}/" + "/".join(detector.REL)
    return ScanTarget(package=package, file=file, function=detector.FUNCTION,
                      detect=one_file_detect(file, detector.analyze_source), detector=detector,
                      follow_imports=False, runtime=runtime)


@dataclass(frozen=True)
class MutationTarget:
    """What ``nox -s mutation`` mutates and scores for this check.

    ``runner`` runs with ``python -m`` in one cell env (``--guard-file``, ``--guard-module``, ``--out``,
    ``--sample``, ``--only``, ``--progress``) and writes the mutants' outcomes; the harness scores them
    against ``equivalents`` (a TOML list inside the check folder). The pairings: ``unsloth`` x ``zoo`` is
    the vulnerable one every mutant runs on; the survivors (and the mutants listed ``unreachable``) then run
    again on ``unsloth`` x each of ``survivor_zoos`` in turn, each pass taking what the ones before left.
    A survivor zoo is a release (``"2026.10.9"``) or a backport folder relative to the repository root,
    applied to ``zoo`` or to the release after an ``@`` (``"tests/backports/<name>"``, ``"<folder>@<version>"``).
    """

    runner: str  # dotted module, e.g. "probes.checks.<folder>.mutate"
    guard_file: str  # the guard under test, relative to the repository root
    guard_module: str  # the name it is loaded under (the check's default guard module)
    equivalents: str  # the equivalence list, relative to the repository root
    unsloth: str
    zoo: str
    survivor_zoos: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuCase:
    """One unsloth build on one zoo build of the GPU device check, by the build names the matrix files use.

    Installed with ``--no-deps`` next to a CUDA Python that already has torch: unsloth (or, with
    ``guard``, the guard backport's wheel rebuilt on the machine), the zoo and the ``companions`` that
    ``import unsloth`` needs there.
    """

    name: str
    unsloth_build: str  # "u<version>" (PyPI) or "u<version>-<backport>"
    unsloth_version: str
    zoo_version: str
    guard: bool
    companions: tuple[tuple[str, str], ...] = ()

    @property
    def zoo_build(self) -> str:
        return f"z{self.zoo_version}"

    def pins(self) -> tuple[tuple[str, str], ...]:
        """(project, version) of every wheel this case installs; unsloth comes from the guard wheel when ``guard``."""
        unsloth = () if self.guard else (("unsloth", self.unsloth_version),)
        return (*unsloth, ("unsloth-zoo", self.zoo_version), *self.companions)

    def unsloth_row(self, compile_mode: str) -> str:
        """The build name of this case's GPU row: distinct from the CPU row, so both fit one report."""
        return f"{self.unsloth_build}-cuda-compile-{compile_mode}"

    def cell_id(self, compile_mode: str) -> str:
        return f"{self.unsloth_row(compile_mode)}__{self.zoo_build}"


@dataclass(frozen=True)
class GpuMeasure:
    """The check's GPU measurement: its cases, the module that measures in a case's interpreter, its table.

    ``module`` runs with ``python -m`` after ``import unsloth`` (``--out F --device cuda --compile off,on``,
    ``--cpu-check`` on a dry run) and writes ``{"modes": {mode: {...}}, "import_unsloth", "guard_module",
    "versions", "settings", "cpu_check"}``; ``summary`` turns the cells' ``gpu`` sections into the Markdown
    table of ``gpu-summary.md``. ``matrix`` declares every case's cells (repository-relative).
    """

    module: str
    cases: tuple[GpuCase, ...]
    unsloth_version: str
    guard_backport: str | None
    pythons: tuple[str, ...]
    compile_modes: tuple[str, ...]
    matrix: str
    summary: Callable[[list[dict[str, Any]]], str]

    def case(self, name: str) -> GpuCase:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"no GPU case {name!r}; cases: {', '.join(c.name for c in self.cases)}")

    def all_pins(self) -> list[tuple[str, str]]:
        """Every (project, version) some case needs, once, plus the guard's base wheel."""
        seen: dict[tuple[str, str], None] = {("unsloth", self.unsloth_version): None}
        for c in self.cases:
            for pin in c.pins():
                seen.setdefault(pin, None)
        return list(seen)


@dataclass(frozen=True)
class DetailTable:
    """A table of a check's step details. Text only; ``code`` columns are monospace, ``bad`` cells flagged."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    code: frozenset[int] = frozenset()  # column indexes
    bad: frozenset[tuple[int, int]] = frozenset()  # (row, column)


@dataclass(frozen=True)
class StepDetails:
    """What a check's renderer makes of its own step payloads, for every format to lay out.

    ``items`` are (label, text) lines next to the check's verdict; text may mark code with backticks.
    """

    items: tuple[tuple[str, str], ...] = ()
    tables: tuple[DetailTable, ...] = field(default=())


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one (a renderer reads JSON that any field may lack)."""
    return value if isinstance(value, dict) else {}


def yes_no(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, "unknown")


def step_payload(section: dict[str, Any], name: str) -> dict[str, Any]:
    """The result of step ``name`` in a check's section of a cell JSON, whatever its status ({} when none)."""
    steps = section.get("steps") if isinstance(section.get("steps"), list) else []
    found = next((s for s in steps if isinstance(s, dict) and s.get("name") == name), None)
    return as_dict((found or {}).get("result"))


def routes_table(routes: Any) -> tuple[DetailTable, ...]:
    """A guard probe's all-masked call by route (``{route: {loss, loss_finite, grads_finite, grad_fn}}``) as one
    table, the non-finite losses marked; none when no route ran."""
    rows, bad = [], set()
    for i, (route, raw) in enumerate(as_dict(routes).items()):
        r = as_dict(raw)
        rows.append((str(route), str(r.get("loss")), yes_no(r.get("grads_finite")), str(r.get("grad_fn"))))
        if r.get("loss_finite") is False:
            bad.add((i, 1))
    if not rows:
        return ()
    return (DetailTable("All-masked call after import, by route", ("route", "loss", "gradients finite",
                                                                  "autograd node"),
                        tuple(rows), code=frozenset({3}), bad=frozenset(bad)),)


class StepRenderer(Protocol):
    """The shape of a check's ``render.py`` module (stdlib only: ``reports`` imports it).

    ``TRAIN_COUNT``: the key (and column title) under which the check's training steps record the count
    the trainer handed its kernel. ``details(section)``: :class:`StepDetails` from the check's section of a
    cell (``{"static": ..., "steps": [...]}``); it must not raise on missing or odd fields.
    """

    TRAIN_COUNT: str

    def details(self, section: dict[str, Any]) -> StepDetails: ...


@dataclass(frozen=True)
class Subject:
    """What a check's cells are made of: one matrix axis per package under test (``SUBJECT`` in a check's
    ``__init__.py``; required). The harness reads it to validate a matrix file's builds, expand its cells and
    choose the checks a cell runs: a cell runs every check whose subject has exactly the cell's axes.

    ``axes`` maps each distribution to its axis (the role its builds play: the key in the cell JSON's
    ``builds`` and in ``[[expect]]`` / ``[pairs]`` tables), in grid order: the first axis is the grid's rows.
    A package that is a source tree rather than a wheel (``tree`` set) is not installed: its env gets
    the tree's own ``pyproject.toml`` dependencies (plus ``extras`` the tree declares, ``uv --no-sources``),
    and the probes get the tree's path as ``--tree TREE=PATH`` (``probes.handoff.given().trees[tree]``).
    ``tree_needs``: files a tree must hold, checked when it is materialised (a missing one is a build error
    naming the build).
    """

    axes: Mapping[str, str]
    tree: str = ""
    extras: tuple[str, ...] = ()
    tree_needs: tuple[str, ...] = ()

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.axes.values())

    @property
    def is_tree(self) -> bool:
        return bool(self.tree)


# The subject of the checks whose hazard sits between unsloth and unsloth_zoo wheels.

@dataclass(frozen=True)
class PairTarget:
    """How a check judges a pair of releases from both sides' source alone (the history matrix reads it).

    ``references`` turns the referring project's ``{wheel member: text}`` into its reference list,
    ``definitions`` the referred-to project's into its symbol table (both JSON-able, cached per file
    sha256); ``prepare`` makes a table ready for many ``judge(references, prepared)`` calls, which return
    ``{"verdict": one of verdicts, ...evidence}``; ``summary`` is that result in one line. ``reader`` is the
    package whose source keys the cache. No torch, no import of the code under test.
    """

    referrer: str  # the project whose source refers (its package directory name)
    referred: str  # the project referred to (its package directory name)
    references: Callable[[dict[str, str]], dict[str, Any]]
    definitions: Callable[[dict[str, str]], dict[str, Any]]
    prepare: Callable[[dict[str, Any]], Any]
    judge: Callable[[dict[str, Any], Any], dict[str, Any]]
    summary: Callable[[dict[str, Any]], str]
    verdicts: tuple[str, ...]
    reader: str


# The subject of the checks whose hazard sits between unsloth and unsloth_zoo wheels.
UNSLOTH_WITH_ZOO = Subject({"unsloth": "unsloth", "unsloth_zoo": "zoo"})


def evaluation_details(train: dict[str, Any], count: str) -> StepDetails:
    """The evaluation run of a training step's payload (``train["evaluation"]``, ``probes/training.py``):
    a line with ``eval_loss`` and who made a NaN, a separate ``stack hazard`` line when the NaN is not the
    check's kernel's, and one row per eval batch. ``count`` names the count column. Nothing without a run."""
    ev = as_dict(train.get("evaluation"))
    if not ev:
        return StepDetails()
    outcome = ev.get("outcome")
    who = {"kernel": "from this check's kernel", "stack": "not from this check's kernel"}.get(ev.get("source"), "")
    line = f"`trainer.evaluate()` after training: {outcome}, eval_loss {ev.get('eval_loss')}"
    items = [("evaluation", f"{line} ({who}): {ev.get('symptom')}" if who else f"{line}: {ev.get('symptom')}")]
    if outcome in ("nan-logged", "crash") and ev.get("source") != "kernel":
        items.append(("stack hazard", f"{ev.get('symptom')}"))
    rows, bad = [], set()
    for i, raw in enumerate(b for b in ev.get("batches") or [] if isinstance(b, dict)):
        calls = [as_dict(c) for c in raw.get("kernel_calls") or []]
        kernel = ", ".join(f"{c.get('n_items')} -> {c.get('raw_loss')}" for c in calls) or "not called"
        rows.append((str(raw.get("batch")), str(raw.get("labels_left")), str(raw.get("count")), kernel,
                     str(raw.get("loss"))))
        if isinstance(raw.get("loss"), str):  # a non-finite loss is written as its name
            bad.add((i, 4))
    tables = (DetailTable("Evaluation run, by eval batch", ("eval batch", "labels left", count,
                                                            "kernel calls (count -> loss)", "loss"),
                          tuple(rows), code=frozenset(), bad=frozenset(bad)),) if rows else ()
    return StepDetails(items=tuple(items), tables=tables)


def guard_then_evaluation(section: dict[str, Any], count: str,
                          guard_line: Callable[[dict[str, Any]], str]) -> StepDetails:
    """A ``details`` for a check with a ``guard`` step and an evaluated ``train`` step: the guard probe's line
    (``guard_line`` of its payload) and routes table first, then :func:`evaluation_details`."""
    evaluated = evaluation_details(step_payload(section, "train"), count)
    g = step_payload(section, "guard")
    if not g:
        return evaluated
    return StepDetails(items=(("guard probe", guard_line(g)), *evaluated.items),
                       tables=(*routes_table(g.get("routes")), *evaluated.tables))


@dataclass(frozen=True)
class UpstreamFix:
    """The known fix of a check's hazard upstream, as data (``FIX`` in the check's ``__init__.py``).

    ``package`` is the distribution the fix goes into (``unsloth_zoo``, ``nanochat``); ``release`` the first
    release of it that carries the fix, or None while no release does. ``prs`` are the upstream pull requests
    (``owner/repo#N``) that carry or propose it, empty where none is recorded; ``prs_state`` says where they
    stand (``merged``, ``open``, ``closed``). ``title`` says in a few words what the fix does. For a check with
    a scan target, the wide scan compares ``release`` with its timeline (:meth:`against_scan`).
    """

    package: str
    release: str | None
    prs: tuple[str, ...] = ()
    prs_state: str = ""
    title: str = ""

    def sentence(self) -> str:
        """The fix line's release clause, one sentence: the first release that carries it, or that none does."""
        prs = ", ".join(self.prs)
        where = f" ({prs}{', ' + self.prs_state if self.prs_state else ''})" if prs else ""
        if self.release:
            return f"{self.package}>={self.release} carries the fix{where}."
        if prs:
            verb = "are" if len(self.prs) > 1 else "is"
            state = f"{self.prs_state}, not released" if self.prs_state else "not released"
            return f"No {self.package} release carries a fix yet: {prs} {verb} {state}."
        return f"No {self.package} release fixes it yet."

    def against_scan(self, fixed_since: str | None) -> str:
        """Empty when ``release`` is the scan's timeline boundary (``fixed_since``: the first fixed release after
        the last vulnerable one, None when there is none); else one sentence saying how they differ."""
        if self.release == fixed_since:
            return ""
        declared = self.release or "no release"
        scanned = fixed_since or "no fixed release after the last vulnerable one"
        return (f"the check declares {declared} as the first {self.package} release carrying the fix, but the "
                f"scan's timeline says {scanned}")
