"""The one place where failures become exit codes.

Every error the harness raises on purpose derives from ``SkewmatrixError``
and carries its ``return_code``. Entry points catch it once (``main`` in
``matrix.cli`` and the nox sessions), print ``str(error)`` without a
traceback (tracebacks only with ``--debug`` / ``SKEWMATRIX_DEBUG=1``), and
exit with the code. Findings about cells are never exceptions: a cell that
cannot be built is an ``error`` cell in the report, not a raised error.

Exit codes (documented in the README):
  0  the report was written (whatever the cell states)
  2  bad input (matrix file, options) or the harness itself failed
"""

from __future__ import annotations


class SkewmatrixError(Exception):
    """Base of every deliberate harness failure."""

    return_code = 2


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
