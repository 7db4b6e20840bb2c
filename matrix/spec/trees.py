"""A cell's install recipe (``matrix.envs.recipe.Recipe``) from its builds, and whether a source tree is its subject's.

Wheel builds are pinned by override; a subject that is a source tree
(``probes.checks.Subject.tree``) is not installed: its env gets the tree's
own dependencies, with the column's torch as an override. The probes get
the tree's path on their command line (``probes.handoff``). The recipe is
made here, in the matrix-file room, so that ``matrix.envs`` (which builds
and runs envs) imports nothing of a matrix file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from matrix.envs.recipe import Recipe
from matrix.errors import BuildError
from matrix.sources import Materialized
from matrix.spec import Cell, axes, stacks
from probes import checks

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def recipe_of(cell: Cell, made: dict[str, Materialized]) -> Recipe:
    """A cell's recipe. Wheel builds: each build's requirement, pinned by override so the resolver cannot swap
    it, with the requested torch/transformers/trl forced too. A source-tree subject: each tree's own
    ``pyproject.toml`` dependencies (with the subject's extras the tree declares, ``--no-sources``: a tree's
    private indexes are out of reach), the tree itself not installed, the requested stack as overrides."""
    subject = axes.subject_of(cell.roles)
    wanted = stacks.requirement_lines(cell.options)
    python = cell.options.python
    if subject is None or not subject.is_tree:
        return Recipe(python=python, requirements=tuple(m.requirement for m in made.values()),
                      overrides=(*(m.pin for m in made.values()), *wanted))
    install, admit = ["--no-sources"], ["--no-sources"]
    for m in made.values():
        pyproject = (m.tree or Path()) / "pyproject.toml"
        declared = tree_extras(pyproject)
        extras = [x for e in subject.extras if e in declared for x in ("--extra", e)]
        install += ["-r", str(pyproject), *extras]
        admit += [str(pyproject), *extras]
    return Recipe(python=python, requirements=tuple(install), overrides=tuple(wanted), admit=tuple(admit))


def tree_extras(pyproject: Path) -> set[str]:
    """The optional-dependency groups a tree's ``pyproject.toml`` declares (none when unreadable)."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return set((data.get("project") or {}).get("optional-dependencies") or {})


def install_requirements(cell: Cell, made: dict[str, Materialized]) -> tuple[list[str], list[str], list[str]]:
    """The cell's recipe (:func:`recipe_of`) as three lists: what ``uv pip install`` gets, what its overrides
    file forces, and the source arguments admissibility is judged with."""
    how = recipe_of(cell, made)
    return list(how.requirements), list(how.overrides), list(how.admit or ())


def tree_problem(made: Materialized, subject: checks.Subject) -> None:
    """A source tree that lacks a file its subject needs is not a build of it (a wrong ref or path)."""
    missing = [rel for rel in subject.tree_needs if not (made.tree and (made.tree / rel).is_file())]
    if missing:
        raise BuildError(f"the source tree has no {', '.join(missing)}: not a checkout of {', '.join(subject.axes)}")
