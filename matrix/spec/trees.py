"""How a cell's env is made from its builds: wheels pinned by override, or a subject's source trees.

A subject that is a source tree (``probes.checks.Subject.tree``) is not
installed: the env gets each tree's own ``pyproject.toml`` dependencies, with
the subject's extras that the tree declares and ``--no-sources`` (a tree's
private indexes are out of reach; the index's torch serves CPU), and the
column's torch as an override; the probes find the tree in the subject's
variable (``matrix.cells.cell.record_and_probe``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from matrix.errors import BuildError
from matrix.sources import Materialized
from matrix.spec import Cell, axes, stacks
from probes import checks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def install_requirements(cell: Cell, made: dict[str, Materialized]) -> tuple[list[str], list[str], list[str]]:
    """What ``uv pip install`` gets for the cell, what its overrides file forces, and the source arguments
    ``uv pip compile`` judges admissibility with (beside the requirement lines).

    Wheel builds: each build's requirement, pinned by override so the resolver cannot swap it. A source-tree
    subject: each tree's own ``pyproject.toml`` dependencies (with the subject's extras the tree declares,
    ``--no-sources``: a tree's private indexes are out of reach), the tree itself not installed."""
    subject = axes.subject_of(cell.roles)
    wanted = stacks.requirement_lines(cell.options)  # the requested torch/transformers/trl
    if subject is None or not subject.is_tree:
        return [m.requirement for m in made.values()], [*(m.pin for m in made.values()), *wanted], []
    install, compile_args = ["--no-sources"], ["--no-sources"]
    for m in made.values():
        pyproject = (m.tree or Path()) / "pyproject.toml"
        declared = tree_extras(pyproject)
        extras = [x for e in subject.extras if e in declared for x in ("--extra", e)]
        install += ["-r", str(pyproject), *extras]
        compile_args += [str(pyproject), *extras]
    return install, wanted, compile_args


def tree_extras(pyproject: Path) -> set[str]:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return set((data.get("project") or {}).get("optional-dependencies") or {})


def tree_problem(made: Materialized, subject: checks.Subject) -> None:
    """A source tree that lacks a file its subject needs is not a build of it (a wrong ref or path)."""
    missing = [rel for rel in subject.tree_needs if not (made.tree and (made.tree / rel).is_file())]
    if missing:
        raise BuildError(f"the source tree has no {', '.join(missing)}: not a checkout of {', '.join(subject.axes)}")
