"""Every harness error: ``SkewmatrixError`` and its kinds, each carrying its exit code.

Every error the harness raises on purpose derives from ``SkewmatrixError``
and carries its ``return_code`` (2, ``matrix.exits.EXIT_HARNESS``). One
function turns them into exit codes, ``matrix.cli.guarded``: it prints
``str(error)`` without a traceback (tracebacks only with ``--debug`` /
``SKEWMATRIX_DEBUG=1``) and exits with the code. Findings about cells are
never exceptions: a cell that cannot be built is an ``error`` cell in the
report, and ``matrix.exits`` maps the gate's outcome to a code.
"""

from __future__ import annotations

from matrix.exits import EXIT_HARNESS

__all__ = ["BackportError", "BuildError", "EnvironmentSetupError", "IndexLookupError", "MutationError",
           "SkewmatrixError", "SpecError"]


class SkewmatrixError(Exception):
    """Base of every deliberate harness failure."""

    return_code = EXIT_HARNESS


class SpecError(SkewmatrixError):
    """A matrix file is invalid. Holds every problem found, not just the first."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{path}: {len(problems)} problem(s) in the matrix file:"]
        lines += [f"  - {p}" for p in problems]
        super().__init__("\n".join(lines))


class BuildError(SkewmatrixError):
    """A build could not be materialised (wheel build, clone, backport edit)."""


class BackportError(BuildError):
    """A backport edit could not be applied (missing or ambiguous anchor, bad patch)."""


class IndexLookupError(SkewmatrixError):
    """The package index could not be queried."""


class MutationError(SkewmatrixError):
    """A mutation run could not produce a score (bad input, an env build, a runner failure)."""


class EnvironmentSetupError(SkewmatrixError):
    """Something this machine lacks for a session (e.g. the browser the tests need)."""
