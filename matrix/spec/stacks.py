"""The trainer stack around a pair: torch, transformers and TRL, an optional axis of a matrix.

Which input reaches a loss kernel (a count, 0, or None) depends on the
transformers and TRL versions around the pair, not on the pair alone. A
matrix file sets them three ways, each value a PEP 440 version (pinned with
``==``) or a specifier set, checked like every value that reaches a
requirements file (``inputs.requirement_value_problem``):

* ``[options]`` ``torch`` / ``transformers`` / ``trl``: every cell;
* a pair's ``options`` in ``[pairs] include``: that pair;
* ``[[stack]]`` tables (``name`` plus any of the three): every selected pair is
  crossed with every stack, cell id ``{unsloth}__{zoo}__{stack}``; a stack's
  values replace the options' for the keys it names (``""``: no constraint).

A cell installs its requested versions with uv ``--overrides`` (so a stack
the pair's pins refuse still installs) and records what it asked for and
what was resolved (``record``/``resolved``: the cell JSON's ``stack``).
``admitted`` derives, with ``uv pip compile``, the floor and the newest
transformers/TRL a requirement admits (the release gate's two stacks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from matrix.envs import recipe
from matrix.spec import inputs
from matrix.spec.tables import check_keys, name_problem

STACK_PACKAGES = ("torch", "transformers", "trl")
STACK_KEYS: dict[str, type] = {"name": str, **dict.fromkeys(STACK_PACKAGES, str)}
# What the gate derives: the trainer packages whose range a release pins (torch follows them).
TRAINER_PACKAGES = ("transformers", "trl")


@dataclass(frozen=True)
class Stack:
    name: str
    values: tuple[tuple[str, str], ...] = ()  # (package, requested value), in STACK_PACKAGES order

    @property
    def as_dict(self) -> dict[str, str]:
        return dict(self.values)

    def describe(self) -> str:
        lines = [line for p, v in self.values if (line := requirement_line(p, v))]
        return f"{self.name} ({', '.join(lines) or 'resolver picks'})"


def requirement_line(package: str, value: str) -> str | None:
    """``pkg==V`` for a bare version, ``pkg<spec>`` for a specifier set, None for no constraint."""
    text = value.strip()
    if not text:
        return None
    return f"{package}{text}" if text[0] in "<>=!~" else f"{package}=={text}"


def requirement_lines(options: Any) -> list[str]:
    """The override (and admissibility) lines for a cell's requested torch, transformers and TRL."""
    return [line for p in STACK_PACKAGES if (line := requirement_line(p, getattr(options, p, "")))]


def requested(options: Any) -> dict[str, str | None]:
    return {p: (getattr(options, p, "") or "").strip() or None for p in STACK_PACKAGES}


def record(name: str | None, wanted: dict[str, str | None] | None) -> dict[str, Any]:
    """The cell JSON's ``stack`` before anything is installed (``resolved`` is filled by the record step)."""
    return {"name": name, "requested": dict(wanted or {}), "resolved": dict.fromkeys(STACK_PACKAGES)}


def resolved(installed: list[dict[str, Any]]) -> dict[str, str | None]:
    """The installed version of each stack package (None: not installed)."""
    found = {canonicalize_name(d["name"]): d.get("version") for d in installed}
    return {p: found.get(p) for p in STACK_PACKAGES}


def cross(cells: list[Any], stacks: list[Stack]) -> list[Any]:
    """Every cell with every stack, pair-major; the stack's values replace the cell's options for its keys."""
    if not stacks:
        return cells
    return [replace(c, options=replace(c.options, **s.as_dict), stack=s) for c in cells for s in stacks]


def parse(raw: Any, problems: list[str]) -> list[Stack]:
    """The file's ``[[stack]]`` tables, in file order; problems are appended to ``problems``."""
    if not isinstance(raw, list):
        return []  # absent, or the top-level type check reports it
    if not raw:
        problems.append("top level: 'stack' is an empty array; add [[stack]] tables or remove it")
    out: list[Stack] = []
    first: dict[str, int] = {}
    for i, table in enumerate(raw, 1):
        where = f"[[stack]] #{i}"
        if not isinstance(table, dict):
            problems.append(f"{where}: must be a table, got {type(table).__name__} {table!r:.60}")
            continue
        name = table.get("name")
        if isinstance(name, str):
            where = f"{where} {name!r}"
        bad = check_keys(where, table, STACK_KEYS)
        if "name" not in table:
            bad.append(f"{where}: missing required key 'name'")
        bad += [p for p in [name_problem(where, name)] if p]
        for pkg in STACK_PACKAGES:
            value = table.get(pkg)
            if isinstance(value, str):
                bad += [p for p in [inputs.requirement_value_problem(where, pkg, value, pkg)] if p]
        problems += bad
        if bad:
            continue
        if name in first:
            problems.append(f"{where}: duplicate stack name {name!r} (first used by [[stack]] #{first[name]})")
            continue
        first[name] = i
        out.append(Stack(name, tuple((p, table[p].strip()) for p in STACK_PACKAGES if p in table)))
    return out


# ---------------------------------------------------------------- what a requirement admits (the release gate)

Runner = Callable[[list[str]], Any]  # argv -> a result with .returncode, .stdout, .stderr (matrix.envs.tools.Ran)


def admitted(requirement: str, python: str, workdir: Path, runner: Runner,
             uv: str = "uv") -> tuple[list[Stack], str]:
    """The floor and the newest transformers/TRL ``requirement`` admits, and a line saying how they were found.

    Resolves ``requirement`` plus ``transformers`` and ``trl`` as direct requirements twice with
    ``uv pip compile``: as usual (newest) and with ``--resolution lowest-direct`` (floor). One stack when
    both resolve to the same versions; none (and the line says why) when either resolution fails.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    req = workdir / "stack-range.in"
    req.write_text("\n".join([requirement, *TRAINER_PACKAGES]) + "\n", encoding="utf-8")
    found: dict[str, dict[str, str]] = {}
    for label, extra in (("floor", ["--resolution", "lowest-direct"]), ("newest", [])):
        argv = [uv, "pip", "compile", str(req), "--python-version", python, "--quiet", "--no-header", *extra]
        res = runner(argv)
        if res.returncode != 0:
            why = (res.stderr or res.stdout or "").strip().splitlines()
            return [], (f"no trainer stacks: uv pip compile ({label}) exited {res.returncode}: "
                        f"{why[-1] if why else 'no output'}")
        pins = recipe.compiled_versions(res.stdout)
        absent = [p for p in TRAINER_PACKAGES if p not in pins]
        if absent:
            return [], f"no trainer stacks: uv pip compile ({label}) resolved no {', '.join(absent)}"
        found[label] = {p: pins[p] for p in TRAINER_PACKAGES}
    how = "uv pip compile of the candidate + transformers + trl (--resolution lowest-direct: floor)"
    if found["floor"] == found["newest"]:
        only = Stack("floor-newest", tuple(found["floor"].items()))
        return [only], f"one trainer stack, floor = newest: {only.describe()} ({how})"
    got = [Stack(label, tuple(found[label].items())) for label in ("floor", "newest")]
    return got, f"trainer stacks {'; '.join(s.describe() for s in got)} ({how})"
