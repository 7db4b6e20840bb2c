"""Every harness error, and the exit codes they and the gate map to.

Every error the harness raises on purpose derives from ``SkewmatrixError``
and carries its ``return_code``. One function turns them into exit codes,
``matrix.cli.main``: it prints ``str(error)`` without a traceback
(tracebacks only with ``--debug`` / ``SKEWMATRIX_DEBUG=1``) and exits with
the code. The nox sessions go through the same function. Findings about
cells are never exceptions: a cell that cannot be built is an ``error`` cell
in the report, and the gate (``reports.gate.evaluate``) turns cell states
into ``EXIT_OK`` or ``EXIT_GATE`` (defined there, with the gate, and re-exported here).

Exit codes (documented in the README and in every ``--help``):
  0  every cell passes or is in the state its matrix file expects
  1  a cell fails the gate unexpectedly, or an expected failure no longer
     happens (XPASS: the expectation is stale)
  2  bad input (matrix file, arguments, a corrupt result) or the harness
     itself failed; for ``gate`` and ``pinned`` also a cell that could not be
     probed (no verdict)
"""

from __future__ import annotations

from reports.gate import EXIT_GATE, EXIT_HARNESS, EXIT_OK

__all__ = ["EXIT_CODES_HELP", "EXIT_GATE", "EXIT_HARNESS", "EXIT_OK", "BackportError", "BuildError",
           "EnvironmentSetupError", "IndexLookupError", "MutationError", "SkewmatrixError",
           "SpecError"]

EXIT_CODES_HELP = """\
exit codes:
  0  every cell passes or is in the state the matrix file expects (`expect`)
  1  a cell fails the gate unexpectedly, or an expected failure no longer
     happens (XPASS: the expectation is stale; update the matrix file)
  2  bad input (arguments, matrix file, a corrupt result) or the harness failed"""


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
