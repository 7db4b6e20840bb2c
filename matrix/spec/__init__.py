"""Matrix files: load, validate, and expand into cells.

A matrix file is TOML: ``schema``, ``[options]``, ``[[build]]``, optional ``[pairs]``
(default: the full product), ``[[stack]]`` (trainer stacks crossed with every pair:
``matrix.spec.stacks``), ``[[expect]]`` and ``[gate]`` (docs/matrix-files.md#writing-a-matrix-file).
Its axes are the packages of one check subject (``probes.checks.Subject``): unsloth x
unsloth_zoo builds, or the builds of a subject such as a source tree, one axis per
package; a build's ``package`` says which axis it is on, and a cell is one build per axis.
Validation collects every problem before failing (``SpecError``), each message naming
the file, table and key, quoting the bad value and suggesting a close match. Every
accepted key is declared here, in ``matrix.spec.stacks`` or in a source's ``KEYS``: an
unknown key is an error.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from matrix import REPO_ROOT, settings
from matrix.errors import SpecError
from matrix.index import IndexClient
from matrix.sources import SOURCE_KINDS, BackportSource, BuildSource, PypiSource
from matrix.spec import axes, expect, inputs, stacks, tables
from matrix.spec.stacks import STACK_PACKAGES, Stack
from matrix.spec.tables import check_keys, id_collisions, name_problem, suggest, type_problem
from probes.checks.vocabulary import FAILING_BY_DEFAULT, GUARD_STATES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_MATRIX = REPO_ROOT / "matrix" / "default.toml"
nox_safe = tables.nox_safe  # how nox names a cell's env directory (matrix.cli.bench reads it here)
SCHEMA = 1


TOP_KEYS: dict[str, type | tuple[type, ...]] = {"schema": int, "options": dict, "build": list, "pairs": dict,
                                                "stack": list, "gate": dict, "expect": list}
# strict: a `latent` cell fails the gate too (reports.gate).
GATE_KEYS: dict[str, type] = {"fail_on": list, "strict": bool}
# The failing states are defined once, in the checks' vocabulary; `[gate] fail_on` replaces them per file.
DEFAULT_FAIL_ON = tuple(s for s in GUARD_STATES if s in FAILING_BY_DEFAULT)
BUILD_KEYS: dict[str, type] = {"name": str, "package": str, "source": str}
PAIR_KEYS: dict[str, type] = {"product": bool, "include": list, "exclude": list}
OPTION_CHOICES: dict[str, tuple[str, ...]] = {
    "device": ("cpu", "cuda", "auto"),
    "compile": ("on", "off", "auto"),
    # allow-cpu: UNSLOTH_ALLOW_CPU=1, unsloth keeps its GPU code path without a device.
    # cpu-backend: no UNSLOTH_ALLOW_CPU; recent builds select zoo's real CPU backend.
    "cpu_mode": ("allow-cpu", "cpu-backend"),
}
OPTION_KEYS: dict[str, type | tuple[type, ...]] = {
    "python": str, "device": str, "compile": str, "cpu_mode": str, "timeout": int, "train": bool,
    **dict.fromkeys(STACK_PACKAGES, str),  # torch, transformers, trl: a version or a specifier set
}



@dataclass(frozen=True)
class CellOptions:
    python: str = "3.11"
    device: str = "cpu"
    compile: str = "auto"
    cpu_mode: str = "allow-cpu"
    timeout: int = 1800
    torch: str = ""  # torch, transformers, trl: "" (the resolver picks), a version, or a specifier set
    transformers: str = ""
    trl: str = ""
    train: bool = True  # false: no training run (each check's reach is then unknown, and fails like exposed)

    def resolved_device(self, cuda_available: bool = False) -> str:
        if self.device == "auto":
            return "cuda" if cuda_available else "cpu"
        return self.device

    def resolved_compile(self, device: str) -> bool:
        if self.compile == "auto":
            return device == "cuda"
        return self.compile == "on"


@dataclass(frozen=True)
class Build:
    name: str
    package: str  # canonical distribution name, one of a check subject's packages ("unsloth", "unsloth-zoo" ...)
    source: BuildSource
    guard_module: str | None = None  # the guard protocol module the probes load (default: the check's own)

    @property
    def role(self) -> str:
        return axes.packages()[self.package]

    def describe(self) -> str:
        return self.source.describe()


@dataclass(frozen=True)
class Cell:
    builds: tuple[Build, ...]  # one build per axis of the matrix's subject, in the subject's order
    options: CellOptions
    # (check id, expected guard state) pairs from the file's [[expect]] tables (``matrix.spec.expect``).
    expect: tuple[tuple[str, str], ...] = ()
    stack: Stack | None = None  # the [[stack]] this cell runs with; its values are already in ``options``

    @property
    def id(self) -> str:
        pair = "__".join(b.name for b in self.builds)
        return f"{pair}__{self.stack.name}" if self.stack else pair

    def build(self, role: str) -> Build | None:
        return next((b for b in self.builds if b.role == role), None)

    @property
    def roles(self) -> dict[str, str]:
        """{axis: build name}."""
        return {b.role: b.name for b in self.builds}

    def required(self, role: str, package: str) -> Build:
        """The cell's build on axis ``role``; an AttributeError for a cell of another subject."""
        b = self.build(role)
        if b is None:
            raise AttributeError(f"cell {self.id} has no {package} build")
        return b

    @property
    def unsloth(self) -> Build:
        """The unsloth build (a cell of the unsloth x unsloth_zoo subject)."""
        return self.required("unsloth", "unsloth")

    @property
    def zoo(self) -> Build:
        return self.required("zoo", "unsloth_zoo")

    def describe(self) -> str:
        return " x ".join(b.describe() for b in self.builds)

    @property
    def expect_map(self) -> dict[str, str]:
        return dict(self.expect)


@dataclass(frozen=True)
class Matrix:
    path: Path
    options: CellOptions
    builds: dict[str, Build]
    cells: list[Cell] = field(default_factory=list)
    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    stacks: tuple[Stack, ...] = ()
    strict: bool = False  # [gate] strict: `latent` cells fail the gate too

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        valid = [c.id for c in self.cells]
        raise SpecError(str(self.path), [f"no cell {cell_id!r}{suggest(cell_id, valid)}; cells: {', '.join(valid)}"])


def parse_options(where: str, table: Any, base: CellOptions | None = None) -> tuple[CellOptions, list[str]]:
    if not isinstance(table, dict):
        return base or CellOptions(), [f"{where}: must be a table, got {type(table).__name__} {table!r:.60}"]
    problems = check_keys(where, table, OPTION_KEYS)
    values = dict(base.__dict__) if base else {}
    for key, value in table.items():
        if key not in OPTION_KEYS or type_problem(where, key, value, OPTION_KEYS[key]):
            continue
        if key in OPTION_CHOICES and value not in OPTION_CHOICES[key]:
            choices = OPTION_CHOICES[key]
            problems.append(f"{where}: {key} = {value!r} is not one of {', '.join(choices)}{suggest(value, choices)}")
            continue
        if key == "timeout" and not 1 <= value <= 86400:
            problems.append(f"{where}: timeout = {value} must be between 1 and 86400 seconds")
            continue
        if key == "python" and not re.fullmatch(r"3\.\d{1,2}", value):
            problems.append(f"{where}: python = {value!r} must look like '3.11'")
            continue
        if key in STACK_PACKAGES:
            bad = inputs.requirement_value_problem(where, key, value, key)
            if bad:
                problems.append(bad)
                continue
        values[key] = value.strip() if key in STACK_PACKAGES else value
    return CellOptions(**values), problems


def _parse_build(i: int, table: Any, base_dir: Path, problems: list[str]) -> tuple[str, str, str, dict] | None:
    where = f"[[build]] #{i}"
    if not isinstance(table, dict):
        problems.append(f"{where}: must be a table, got {type(table).__name__}")
        return None
    name = table.get("name")
    if isinstance(name, str):
        where = f"[[build]] #{i} {name!r}"
    kind = table.get("source")
    src_cls = SOURCE_KINDS.get(kind) if isinstance(kind, str) else None
    allowed: dict[str, Any] = {**BUILD_KEYS, "guard_module": str, **(src_cls.KEYS if src_cls else {})}
    if src_cls is None:
        # Unknown kind: only judge the common keys, the rest depends on the kind.
        allowed.update({k: object for k in table if k not in BUILD_KEYS})
    problems += check_keys(where, table, allowed)
    for key in BUILD_KEYS:
        if key not in table:
            problems.append(f"{where}: missing required key {key!r}")
    problems += [p for p in [name_problem(where, name)] if p]
    package = table.get("package")
    known = axes.packages()
    if isinstance(package, str) and canonicalize_name(package) not in known:
        problems.append(f"{where}: package {package!r} is not a package any check is about{suggest(package, known)};"
                        f" valid: {', '.join(known)}")
    problems += inputs.guard_module_problems(where, table.get("guard_module"), package)
    if isinstance(kind, str) and src_cls is None:
        problems.append(f"{where}: unknown source kind {kind!r}{suggest(kind, SOURCE_KINDS)}; "
                        f"valid kinds: {', '.join(SOURCE_KINDS)}")
    if src_cls is not None:
        for key in src_cls.REQUIRED:
            if key not in table:
                problems.append(f"{where}: source {kind!r} needs key {key!r}")
    if not (isinstance(name, str) and isinstance(package, str) and src_cls):
        return None
    if canonicalize_name(package) not in known:
        return None
    return name, canonicalize_name(package), kind, table


def load(path: Path | str | None = None, *, index: IndexClient | None = None, check_index: bool = True) -> Matrix:
    """Load and validate a matrix file; raise ``SpecError`` listing every problem.

    ``check_index`` asks the index whether each PyPI version exists (one
    request per package); pass ``False`` to validate offline.
    """
    path = Path(path) if path else Path(settings.value(settings.MATRIX_ENV) or DEFAULT_MATRIX)
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        found = sorted(p.name for p in (REPO_ROOT / "matrix").glob("*.toml"))
        raise SpecError(label, [f"file not found; matrix files shipped in matrix/: {', '.join(found)}"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(label, [f"cannot read the file: {exc}"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(label, [f"TOML syntax error: {exc}"]) from None
    return from_dict(data, path, index=index, check_index=check_index)


def from_dict(data: dict[str, Any], path: Path, *, index: IndexClient | None = None,
              check_index: bool = True) -> Matrix:
    problems = check_keys("top level", data, TOP_KEYS)
    schema = data.get("schema", SCHEMA)
    if isinstance(schema, int) and not isinstance(schema, bool) and schema != SCHEMA:
        problems.append(f"top level: schema = {schema} is not supported (this skewmatrix reads schema {SCHEMA})")
    options, opt_problems = parse_options("[options]", data.get("options", {}))
    problems += opt_problems
    base_dir = path.resolve().parent

    raw_builds = data.get("build", [])
    if not isinstance(raw_builds, list):
        raw_builds = []
    if not raw_builds:
        problems.append("no [[build]] tables: a matrix needs a build of each package of one check subject "
                        f"({axes.subjects_text()})")
    parsed: dict[str, tuple[str, str, dict]] = {}
    first_seen: dict[str, int] = {}
    for i, table in enumerate(raw_builds, 1):
        got = _parse_build(i, table, base_dir, problems)
        if got is None:
            continue
        name, package, kind, tbl = got
        if name in parsed:
            problems.append(f"[[build]] #{i}: duplicate build name {name!r} "
                            f"(first used by [[build]] #{first_seen[name]})")
            continue
        parsed[name] = (package, kind, tbl)
        first_seen[name] = i

    builds: dict[str, Build] = {}
    for name, (package, kind, tbl) in parsed.items():
        src = SOURCE_KINDS[kind].from_table(package, tbl, base_dir)
        builds[name] = Build(name, package, src, tbl.get("guard_module"))
    # Link backports to their base, then run each source's own checks.
    for name, b in list(builds.items()):
        src = b.source
        where = f"[[build]] #{first_seen[name]} {name!r}"
        if isinstance(src, BackportSource):
            base = builds.get(src.base)
            if base is None:
                problems.append(f"{where}: base {src.base!r} is not a build in this file{suggest(src.base, builds)}; "
                                f"builds: {', '.join(builds)}")
                continue
            if base.package != b.package:
                problems.append(f"{where}: base {src.base!r} is a {base.package} build, not {b.package}")
                continue
            if isinstance(base.source, BackportSource):
                problems.append(f"{where}: base {src.base!r} is itself a backport; stack edits in one backport")
                continue
            src = BackportSource(package=src.package, base_dir=src.base_dir, base=src.base,
                                 backport=src.backport, base_source=base.source)
            builds[name] = Build(name, b.package, src, b.guard_module)
            problems += inputs.cached_anchor_problems(src, name, where)
        if isinstance(src, PypiSource) and isinstance(src.version, str) and inputs.CONTROL_RE.search(src.version):
            problems.append(str(inputs.requirement_value_problem(where, "version", src.version, b.package)))
            continue
        problems += src.problems(where)

    if check_index and not problems:
        problems += _check_index(builds, first_seen, index or IndexClient())

    by_role: dict[str, list[Build]] = {}
    for b in builds.values():
        by_role.setdefault(b.role, []).append(b)
    subject = axes.subject(by_role, problems) if parsed and not problems else None
    if subject is not None:
        by_role = {role: by_role.get(role, []) for role in subject.roles}
        problems += inputs.tree_problems(builds, first_seen, subject)

    pairs = data.get("pairs", {})
    cells: list[Cell] = []
    if isinstance(pairs, dict):
        problems += check_keys("[pairs]", pairs, PAIR_KEYS)
        cells = (axes.expand(pairs, builds, by_role, options, problems, make_cell=Cell, parse_options=parse_options)
                 if subject is not None else [])
    file_stacks = stacks.parse(data.get("stack"), problems)
    cells = stacks.cross(cells, file_stacks)
    problems += id_collisions([c.id for c in cells])
    fail_on, strict = _parse_gate(data.get("gate", {}), problems)
    if "expect" in data:
        found = expect.resolve(data["expect"], {n: b.role for n, b in builds.items()},
                               [(c.id, c.roles, c.stack.name if c.stack else None) for c in cells], problems,
                               stacks=[s.name for s in file_stacks],
                               axes={r: d for d, r in (subject.axes.items() if subject else ())})
        cells = [replace(c, expect=tuple(sorted(found[c.id].items()))) if found.get(c.id) else c for c in cells]
    if problems:
        raise SpecError(str(path), problems)
    return Matrix(path=path, options=options, builds=builds, cells=cells, fail_on=fail_on,
                  stacks=tuple(file_stacks), strict=strict)


def _parse_gate(gate: Any, problems: list[str]) -> tuple[tuple[str, ...], bool]:
    """``[gate]``: ``fail_on`` (guard states) and ``strict`` (a bool)."""
    if not isinstance(gate, dict):
        return DEFAULT_FAIL_ON, False  # the top-level type check reports it
    problems += check_keys("[gate]", gate, GATE_KEYS)
    fail_on = DEFAULT_FAIL_ON
    raw = gate.get("fail_on", list(DEFAULT_FAIL_ON))
    if isinstance(raw, list):
        bad = [s for s in raw if s not in GUARD_STATES]
        problems += [f"[gate]: fail_on entry {b!r} is not a guard state{suggest(str(b), GUARD_STATES)}; "
                     f"valid: {', '.join(GUARD_STATES)}" for b in bad]
        fail_on = tuple(raw)
    strict = gate.get("strict", False)
    return fail_on, strict if isinstance(strict, bool) else False


def _check_index(builds: dict[str, Build], first_seen: dict[str, int], index: IndexClient) -> list[str]:
    return [p for name, b in builds.items() for p in
            inputs.index_problems(b, f"[[build]] #{first_seen[name]} {name!r}", index)]
