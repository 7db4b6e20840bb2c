"""A subject's source trees as builds: whether a materialised tree is a checkout of its subject.

A subject that is a source tree (``probes.checks.Subject.tree``) is not
installed; how its env is made (the tree's own dependencies, the column's
torch as an override) is the install recipe's (``matrix.envs.recipe``); the
probes find the tree in the subject's variable
(``matrix.cells.cell.record_and_probe``).
"""

from __future__ import annotations

from matrix.envs import recipe
from matrix.errors import BuildError
from matrix.sources import Materialized
from matrix.spec import Cell
from probes import checks


def install_requirements(cell: Cell, made: dict[str, Materialized]) -> tuple[list[str], list[str], list[str]]:
    """The cell's recipe (``matrix.envs.recipe.for_cell``, where it is made) as three lists: what ``uv pip
    install`` gets, what its overrides file forces, and the source arguments admissibility is judged with."""
    how = recipe.for_cell(cell, made)
    return list(how.requirements), list(how.overrides), list(how.admit or ())


def tree_problem(made: Materialized, subject: checks.Subject) -> None:
    """A source tree that lacks a file its subject needs is not a build of it (a wrong ref or path)."""
    missing = [rel for rel in subject.tree_needs if not (made.tree and (made.tree / rel).is_file())]
    if missing:
        raise BuildError(f"the source tree has no {', '.join(missing)}: not a checkout of {', '.join(subject.axes)}")
