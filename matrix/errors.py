"""Every harness error and every exit code: the one owner of the codes, their meaning and their table.

Every error the harness raises on purpose derives from ``SkewmatrixError``
and carries its ``return_code`` (2, ``EXIT_HARNESS``). One function turns
them into exit codes, ``matrix.cli.guarded``: it prints ``str(error)``
without a traceback (tracebacks only with ``--debug`` / ``SKEWMATRIX_DEBUG=1``)
and exits with the code. Findings about cells are never exceptions: a cell
that cannot be built is an ``error`` cell in the report.

Every command returns one of three codes, and what each means per command is
one row of :data:`TABLE`. The same table renders every ``--help`` epilog
(:func:`epilog`) and the README's "Exit codes" section (:func:`markdown`;
``tests/test_exit_table.py`` compares them), so the three cannot drift apart.

The mapping from an outcome to a code is here too: the gate's judgement of a
report (``reports.gate.Outcome``: pure data, no codes) becomes a code in
:func:`run_code` (``matrix``, ``report``, ``cell``) or :func:`gate_code`
(``gate``, ``pinned``, where an unexpected ``error`` cell means "no verdict":
a gate that could not look must not pass); the scan's and the mutation run's
findings in :func:`scan_code` and :func:`mutation_code`.

Why the scan has a 1: ``--confirm`` runs the runtime detector next to the
static one, and when they disagree on a release (``inconsistent``) the scan's
own reading cannot be trusted for it. That is a finding about the releases,
not a harness failure, so it is 1 like a gate failure, after both files are
written.
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reports.gate import Outcome

EXIT_OK, EXIT_GATE, EXIT_HARNESS = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT

# The command groups that differ, in the table's column order (a command in no group is in OTHER).
RUN = ("matrix", "report", "cell")
GATE = ("gate", "pinned")
SCAN = ("scan",)
MUTATION = ("mutation",)
OTHER = ("bench", "history", "cells", "checks", "validate", "gpu-wheelhouse", "gpu-check", "ci-matrix")
GROUPS = (RUN, GATE, SCAN, MUTATION, OTHER)


@dataclass(frozen=True)
class Row:
    """What one exit code means for each command group (``""``: the group never exits with it)."""

    code: int
    meanings: tuple[str, str, str, str, str]  # in GROUPS order


TABLE: tuple[Row, ...] = (
    Row(EXIT_OK, (
        "every cell passes or is in the state the matrix file expects (`expect`)",
        "every cell passes (`activates`, `no-ops`, `not-needed`); `gate --zoo`: and no regression, no reverted fix",
        "`scan.json` and `scan.md` written",
        "the score reaches the bar",
        "done")),
    Row(EXIT_GATE, (
        "a cell fails the gate unexpectedly, or an expected failure no longer happens (XPASS: the expectation is "
        "stale; update the matrix file)",
        "exposure found: a cell is `broken`, or `missing` with reach exposed or unknown (latent too with "
        "`--strict`); a failing state of `[gate] fail_on`; `gate --zoo`: a regression (an unsloth release that "
        "worked with the previous zoo release is `incompatible` with the candidate) or a reverted fix (previous "
        "release `fixed`, candidate `vulnerable`)",
        "written, but the static and runtime detectors disagree on a release (`--confirm`: `inconsistent`)",
        "the score is below the bar",
        "")),
    Row(EXIT_HARNESS, (
        "bad input (arguments, matrix file, a corrupt result) or the harness failed",
        "no verdict: a cell could not be built or probed (`error`), bad input, or the harness failed; `gate "
        "--zoo`: also a pair or a check that could not be judged (`unknown`)",
        "bad input, or the scan could not run",
        "bad input, or no score (an env build or the runner failed)",
        "bad input, or the harness (a benchmark run, a build) failed")),
)
NOTES = (
    "`--exit-zero` (matrix, report, cell) exits 0 whatever the gate says; bad input and harness failures still "
    "exit 2.",
    "For gate and pinned an `error` outranks a finding: a gate that could not look does not pass. `gate --zoo`'s "
    "regressions and reverted fixes, read from the source, are findings that stand (1) whatever its cells say.",
    f"{EXIT_INTERRUPTED}: interrupted (Ctrl-C).",
    "Under nox a session that exits 1 fails and nox goes on with the other sessions, then exits 1; exit 2 stops "
    "nox at once with 2 (under `nox -j N` nox reduces every failed session to 1). nox aborts a `requires=` fan-in "
    "when a prerequisite failed, so the cells of `nox -s matrix` exit 0 after recording a failing verdict and the "
    "`matrix` session exits 1 after writing the report; `nox -s \"cell(ID)\"` on its own exits 1.",
)


def group_of(command: str) -> int:
    """The column of ``command`` in the table (an unknown command reads as OTHER)."""
    return next((i for i, g in enumerate(GROUPS) if command in g), len(GROUPS) - 1)


def epilog(command: str | None = None) -> str:
    """The ``--help`` epilog of ``command`` (``None``: the top-level ``skewmatrix --help``, the run's codes)."""
    col = group_of(command or RUN[0])
    lines = ["exit codes:"]
    for row in TABLE:
        if row.meanings[col]:
            lines.append(textwrap.fill(row.meanings[col], width=100, initial_indent=f"  {row.code}  ",
                                       subsequent_indent="     "))
    return "\n".join(lines)


def markdown() -> str:
    """The README's exit-code table and notes, as Markdown (the body under its ``## Exit codes`` heading)."""
    head = "| code | " + " | ".join(", ".join(g) for g in GROUPS) + " |"
    rule = "|---" * (len(GROUPS) + 1) + "|"
    rows = [f"| {row.code} | " + " | ".join(m or "—" for m in row.meanings) + " |" for row in TABLE]
    return "\n".join([head, rule, *rows, "", *(f"- {n}" for n in NOTES)]) + "\n"


# ---------------------------------------------------------------- outcomes -> codes


def run_code(outcome: Outcome) -> int:
    """``matrix``, ``report``, ``cell``: 1 on an unexpected failure or an XPASS, else 0."""
    return EXIT_OK if outcome.passed else EXIT_GATE


def gate_code(outcome: Outcome) -> int:
    """``gate`` and ``pinned``: like :func:`run_code`, but an unexpected ``error`` cell is 2 (no verdict)."""
    if outcome.no_verdict:
        return EXIT_HARNESS
    return run_code(outcome)


def gate_words(code: int) -> str:
    """What ``gate``/``pinned`` print after their code."""
    return {EXIT_OK: "pass", EXIT_GATE: "exposed (a failing state)", EXIT_HARNESS: "no verdict (error)"}[code]


def scan_code(inconsistent: bool) -> int:
    return EXIT_GATE if inconsistent else EXIT_OK


def mutation_code(passed: bool) -> int:
    return EXIT_OK if passed else EXIT_GATE


def cell_code(kind: str, *, strict: bool, exit_zero: bool) -> int:
    """One cell session: 1 when it fails or XPASSes and it is run on its own (``strict``); a cell run as a
    prerequisite of ``nox -s matrix`` exits 0 and the matrix session fails the run (see ``matrix.cli``)."""
    return EXIT_GATE if kind in ("fail", "xpass") and strict and not exit_zero else EXIT_OK


# ---------------------------------------------------------------- errors

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


# ---------------------------------------------------------------- the one parser factory


def command_parser(command: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A parser for ``command`` with its exit codes (the table above) under ``--help``: every command's parser is
    made here, the CLI's and those of the commands that parse their own arguments (scan, history, mutation, bench,
    the GPU commands). A leaf, so a command's own module imports it without importing the CLI."""
    kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
    kwargs.setdefault("epilog", epilog(command))
    return argparse.ArgumentParser(**kwargs)


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """Parsed arguments, or the exit code argparse chose (0 after --help, 2 on bad input): a usage error is
    argparse's message and an exit code, not an exception, for every command and its own parser."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_HARNESS
