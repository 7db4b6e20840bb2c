"""The argument groups that several commands share (``matrix.cli`` builds the parsers from them).

Kept apart from the CLI so that each command's options read in one place:
the run options of ``matrix``/``cell`` (nox hands a session's posargs to
every session it runs), the report options, the gate's, pinned's and bench's,
and ``--strict`` (latent cells fail too), which the run value carries
(``matrix.cells.runs``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

FORMATS = ("terminal", "markdown", "json", "junit", "html")




# ---------------------------------------------------------------- argument groups shared by several commands


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``matrix`` and ``cell`` (nox hands a session's posargs to every session it runs)."""
    p.add_argument("--force", action="store_true", help="rerun cells whose stored result is current")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default=None,
                   help="run every cell on this device instead of the matrix file's [options] device")
    add_report_arguments(p)


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even when the gate fails (errors of the harness still exit 2)")
    p.add_argument("-f", "--format", choices=FORMATS, default="terminal",
                   help="the format printed on stdout at the end (default: terminal); every file format is "
                        "written to the output directory regardless")
    p.add_argument("-o", "--output", type=Path, default=None, metavar="DIR",
                   help="output directory (default: $SKEWMATRIX_OUT, else reports/out)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="also list every passing cell and check")
    add_strict_argument(p)


def add_strict_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict", action="store_true",
                   help="fail `missing` even where its reach is latent (a clean training run on the cell's own "
                        "stack); also [gate] strict = true in the matrix file, or SKEWMATRIX_STRICT=1")


def add_gate_arguments(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--unsloth", metavar="SOURCE",
                       help="a candidate unsloth: a version, a checkout or wheel path, or git+URL@REF")
    which.add_argument("--zoo", metavar="SOURCE",
                       help="a candidate unsloth_zoo: a version, a checkout or wheel path, or git+URL@REF; judged "
                            "against every unsloth release whose zoo requirement admits it, beside the previous "
                            "zoo release")
    p.add_argument("--below", type=int, default=3,
                   help="--unsloth: zoo releases below the admitted floor (default 3)")
    p.add_argument("--backport", action="append", default=[], metavar="NAME@BASEVERSION",
                   help="--unsloth: also a zoo backport from matrix/backports (repeatable)")
    p.add_argument("--cells", type=int, default=2, metavar="N",
                   help="--zoo: real CPU cells of the newest N admitting unsloth releases x the candidate "
                        "(default 2; 0: none)")
    p.add_argument("--all", dest="everything", action="store_true",
                   help="--zoo: judge every unsloth release, not the last 12 months")
    p.add_argument("--against", default="", metavar="SPEC",
                   help="--zoo: only the unsloth releases this PEP 440 specifier selects (e.g. '>=2026.10')")
    p.add_argument("--previous", default="", metavar="VERSION",
                   help="--zoo: the zoo release to compare with (default: the published release of the "
                        "candidate's version for a wheel, tree or git candidate, else the newest one below it)")
    add_strict_argument(p)


def add_pinned_arguments(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--python", type=Path, help="an existing interpreter to probe in place")
    which.add_argument("-r", "--requirements", type=Path, help="a requirements or lock file to build exactly")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    p.add_argument("--cpu-mode", choices=("allow-cpu", "cpu-backend"), default="allow-cpu")
    add_strict_argument(p)


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", nargs="?", choices=("matrix",), default="matrix",
                   help="what to measure; `scan` instead runs the scan's benchmark (its own options follow)")
    p.add_argument("--no-cold", action="store_true", help="skip the cold-cache run")
    p.add_argument("--no-warmup", action="store_true", help="the uv cache is known to be warm")


