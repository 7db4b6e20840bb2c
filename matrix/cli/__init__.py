"""The command line: one argparse tree, and the one place exceptions become exit codes.

``skewmatrix COMMAND`` (the console script), ``python -m matrix COMMAND`` and
every nox session (``nox -s COMMAND -- ARGS``) parse their arguments with the
parsers built here and run through :func:`guarded`, which maps a
``SkewmatrixError`` to its ``return_code`` (2) with a one-line message and
no traceback (``--debug`` or ``SKEWMATRIX_DEBUG=1`` shows it). Conventions
follow pip-audit: ``-f/--format``, ``-o/--output``, ``-v/--verbose``. An
unknown argument is a usage line and exit 2; ``--help`` lists the options and
the exit codes (``matrix.errors``).

The nox sessions share their posargs: ``nox -s matrix -- --force`` hands
``--force`` to every cell session too. So ``matrix`` and ``cell`` accept the
same options (:func:`add_run_arguments`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrix import settings
from matrix.cells import runs
from matrix.cells.runs import Run
from matrix.cli.arguments import (
    add_bench_arguments,
    add_gate_arguments,
    add_pinned_arguments,
    add_report_arguments,
    add_run_arguments,
)
from matrix.errors import EXIT_HARNESS, EXIT_INTERRUPTED, EXIT_OK, SkewmatrixError, cell_code, epilog, parse


class _Parser(argparse.ArgumentParser):
    """argparse with the exit codes under every --help (``matrix.errors``), and bad input always exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("epilog", epilog())
        super().__init__(*args, **kwargs)


# ---------------------------------------------------------------- commands: each takes its arguments and the run


def cmd_cells(args: argparse.Namespace, run: Run) -> int:
    cells = run.cells
    if args.format == "json":
        print(json.dumps([{"id": c.id, **c.roles, "expect": c.expect_map}
                          for c in cells], indent=2))
    else:
        for c in cells:
            print(c.id)
    return EXIT_OK


def cmd_checks(args: argparse.Namespace, run: Run) -> int:
    """The registered checks and, per optional capability, whether each declares it (or the n/a reason)."""
    from probes import checks

    for name in checks.REGISTRY:
        print(f"{checks.info(name).id}: {checks.info(name).title}")
        for kind in checks.CAPABILITIES:
            declared = checks.capability(name, kind) is not None
            print(f"  {kind}: {'declared' if declared else checks.lacks(name, kind)}")
        phases = checks.phases_module(name)  # step tables only: the steps import torch when they run
        train = [s.name for t in ("RAW_STEPS", "UNSLOTH_STEPS", "CPU_BACKEND_STEPS")
                 for s in getattr(phases, t, ()) if s.training]
        print(f"  training: step {', '.join(train)}" if train else
              f"  training: n/a: check {checks.info(name).id} has no Step(training=True)")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace, run: Run) -> int:
    from matrix import spec

    # validating a file is parsing it, with the index asked: its own load, not the run's matrix
    matrix = spec.load(args.file or run.matrix_path, check_index=not args.offline)
    expected = sum(bool(c.expect) for c in matrix.cells)
    print(f"{matrix.path}: ok, {len(matrix.builds)} builds, {len(matrix.cells)} cells "
          f"({expected} with expected states), gate fails on {', '.join(matrix.fail_on)}")
    return EXIT_OK


def _print_report(rep: dict[str, Any], fmt: str) -> None:
    if fmt != "terminal":
        from reports.render import RENDERERS

        print(RENDERERS[fmt].render(rep))


def cmd_report(args: argparse.Namespace, run: Run) -> int:
    from matrix.cells import pipeline

    log = _logger(args.format)
    rep = pipeline.report(run, [Path(d) for d in args.dirs] or None, log=log)
    _print_report(rep, args.format)
    return pipeline.judge(rep, run, exit_zero=args.exit_zero, verbose=args.verbose, log=log)


def cmd_matrix(args: argparse.Namespace, run: Run, *, run_cells: bool = True) -> int:
    """Every selected cell (``matrix.cells.pipeline.run_matrix``), then the report and the gate; ``run_cells=False``
    when nox has run the cells as sessions of their own."""
    from matrix.cells import pipeline

    log = _logger(args.format)
    if run_cells:
        pipeline.run_matrix(run, force=args.force, device=args.device, log=log)
    rep = pipeline.report(run, log=log)
    _print_report(rep, args.format)
    return pipeline.judge(rep, run, exit_zero=args.exit_zero, verbose=args.verbose, log=log)


def run_cell(cell_id: str, env_dir: Path, args: argparse.Namespace, run: Run, *, n: int, strict: bool,
             create_env: bool = False, log: Callable[[str], Any] = print) -> int:
    """One cell: build, probe, write its cell JSON, print its ``[k/N]`` line.

    ``strict`` (a cell session run on its own, as CI's per-cell jobs do): exit 1
    when the cell fails the gate unexpectedly or XPASSes. Run as a prerequisite
    of ``nox -s matrix`` a cell exits 0 after writing its result, because nox
    aborts a ``requires=`` fan-in when any prerequisite failed, and the
    ``matrix`` session must still write the report; it then fails the run.
    """
    from matrix.cells import pipeline
    from matrix.cells.progress import next_k

    start = time.perf_counter()
    record = pipeline.run_one(run, cell_id, env_dir, create_env=create_env, force=args.force, device=args.device,
                              log=log)
    # k counts cells of this run as they finish, across the session processes of `nox -j`
    kind = pipeline.finish_cell(record, run.matrix.cell(cell_id), run, seconds=time.perf_counter() - start,
                                k=next_k(run.out, run.run_id), n=n, log=log)
    if kind in ("fail", "xpass") and not strict:
        log(f"[{cell_id}] {kind.upper()}: recorded; the matrix session reports it and fails the run")
    return cell_code(kind, strict=strict, exit_zero=args.exit_zero)


def cmd_cell(args: argparse.Namespace, run: Run) -> int:
    env_dir = args.env_dir or run.out / "envs" / args.cell
    return run_cell(args.cell, env_dir, args, run, n=1, strict=True, create_env=True, log=_logger(args.format))


def cmd_gate(args: argparse.Namespace, run: Run) -> int:
    from matrix.cli import release_gate, zoo_gate

    if args.zoo is not None:  # a candidate zoo: its own gate (matrix.cli.zoo_gate)
        return zoo_gate.run(args, run, log=print)
    return release_gate.run(args, run, log=print)


def cmd_pinned(args: argparse.Namespace, run: Run) -> int:
    from matrix.cli import pinned

    return pinned.run(args, run.out / "pinned", strict=run.strict, log=print)


def cmd_scan(args: argparse.Namespace, run: Run) -> int:
    from matrix import scan

    return int(scan.main(list(args.args), out=run.out))


def cmd_history(args: argparse.Namespace, run: Run) -> int:
    from matrix.scan import history

    return int(history.main(list(args.args), out=run.out))


def cmd_mutation(args: argparse.Namespace, run: Run) -> int:
    try:
        from matrix import mutation
    except ImportError as exc:
        raise SkewmatrixError(f"the mutation command is not available in this tree ({exc})") from None
    return int(mutation.main(list(args.args), out=run.out))


def cmd_bench(args: argparse.Namespace, run: Run) -> int:
    argv = list(args.args)
    if argv[:1] == ["scan"]:
        from matrix.cli import bench

        return bench.scan(argv, out=run.out)
    if argv[:1] == ["history"]:
        from matrix.scan.history.history_bench import bench_history

        return bench_history(argv, out=run.out)
    p = _Parser(prog="nox -s bench --", description=COMMANDS["bench"][0], epilog=epilog("bench"))
    add_bench_arguments(p)
    parsed = parse(p, argv)
    if isinstance(parsed, int):
        return parsed
    from matrix.cli import bench

    return bench.run(parsed, run)


def cmd_gpu_check(args: argparse.Namespace, run: Run) -> int:
    from matrix.gpu import check

    return check.main(list(args.args))


def cmd_gpu_wheelhouse(args: argparse.Namespace, run: Run) -> int:
    from matrix.gpu import wheelhouse

    return wheelhouse.main(list(args.args))


def cmd_ci_matrix(args: argparse.Namespace, run: Run) -> int:
    from matrix.cli.ci import from_text

    print(from_text(sys.stdin.read()))
    return EXIT_OK


def _cells_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--format", choices=("text", "json"), default="text")


def _validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", type=Path, default=None,
                   help="matrix file (default: $SKEWMATRIX_MATRIX, else matrix/default.toml)")
    p.add_argument("--offline", action="store_true", help="do not ask the index whether the versions exist")


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dirs", nargs="*", metavar="DIR", help="shard output directories to merge (default: the "
                   "output directory's own results)")
    add_report_arguments(p)


def _cell_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell", help="cell id (`skewmatrix cells` lists them)")
    p.add_argument("env_dir", nargs="?", type=Path, default=None,
                   help="env directory (default: OUT/envs/CELL)")
    add_run_arguments(p)


def _passthrough(p: argparse.ArgumentParser) -> None:
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the command itself (its own --help)")


# name -> (help, add arguments, run); the order is the order of `--help`.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None] | None, Callable[..., int]]] = {
    "matrix": ("every cell of the selected matrix, then the report and the gate", add_run_arguments, cmd_matrix),
    "cell": ("build and probe one cell", _cell_args, cmd_cell),
    "report": ("classify and render collected results (or merge shard directories); gate them", _report_args,
               cmd_report),
    "cells": ("list the cell ids of the selected matrix", _cells_args, cmd_cells),
    "checks": ("list the registered checks and the capabilities each declares", None, cmd_checks),
    "validate": ("validate a matrix file and exit", _validate_args, cmd_validate),
    "gate": ("release gate for a candidate unsloth or unsloth_zoo", add_gate_arguments, cmd_gate),
    "pinned": ("probe an existing interpreter in place, or exactly the pins of a file", add_pinned_arguments,
               cmd_pinned),
    "scan": ("static verdicts for every release, without installing (its own options)", _passthrough, cmd_scan),
    "history": ("every unsloth x zoo release pair judged from source (its own options)", _passthrough, cmd_history),
    "mutation": ("mutation testing of the behaviour suite (its own options)", _passthrough, cmd_mutation),
    "bench": ("measure the matrix against its floor; `bench scan`: the scan's (own options)", _passthrough,
              cmd_bench),
    "gpu-wheelhouse": ("here, with the index: the offline wheelhouse of a check's GPU measurement (its own "
                       "options)", _passthrough, cmd_gpu_wheelhouse),
    "gpu-check": ("there, offline: a check's GPU measurement on an existing CUDA Python (its own options)",
                  _passthrough, cmd_gpu_check),
    "ci-matrix": ("stdin: `nox --list --json`; stdout: a GitHub job matrix", None, cmd_ci_matrix),
}
# These parse their own arguments (each its own --help).
PASSTHROUGH = ("scan", "history", "mutation", "bench", "gpu-wheelhouse", "gpu-check")


def session_parser(name: str, prog: str) -> argparse.ArgumentParser:
    """The parser of one command on its own, e.g. for ``nox -s NAME -- ARGS`` (``prog="nox -s NAME --"``)."""
    help_, add, _ = COMMANDS[name]
    p = _Parser(prog=prog, description=help_, add_help=name not in PASSTHROUGH, epilog=epilog(name))
    if add:
        add(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    root = _Parser(prog="skewmatrix", description="Version-skew compatibility matrix for unsloth x unsloth_zoo.")
    root.add_argument("--debug", action="store_true", help="show tracebacks (also SKEWMATRIX_DEBUG=1)")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_, add, _) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog=epilog(name), add_help=name not in PASSTHROUGH)
        if add:
            add(p)
    return root


def _logger(fmt: str) -> Callable[[str], Any]:
    """Progress to stdout, unless stdout carries a machine-readable report (-f json|junit|…)."""
    if fmt == "terminal":
        return lambda msg: print(msg, flush=True)
    return lambda msg: print(msg, file=sys.stderr, flush=True)


def guarded(fn: Callable[[], int], *, debug: bool = False, prog: str = "skewmatrix") -> int:
    """Run ``fn`` and turn what it raises into an exit code: the one place that does so."""
    debug = debug or settings.value(settings.DEBUG_ENV) == "1"
    try:
        return fn()
    except SkewmatrixError as exc:
        if debug:
            traceback.print_exc()
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.return_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `skewmatrix cells | head`: the reader left early; point stdout at /dev/null so exit is quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # a bug of ours: still no traceback unless asked for
        if debug:
            traceback.print_exc()
        print(f"{prog}: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_HARNESS


def main(argv: list[str] | None = None) -> int:
    """``skewmatrix`` / ``python -m matrix``."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv[:1]
    rest = argv[1:] if debug else argv
    if rest[:1] and rest[0] in PASSTHROUGH:
        # These parse their own arguments (argparse's REMAINDER would refuse a leading --help).
        ns = argparse.Namespace(command=rest[0], args=rest[1:], debug=debug)
        return guarded(lambda: dispatch(COMMANDS[rest[0]][2], ns), debug=debug, prog=f"skewmatrix {rest[0]}")
    args = parse(build_parser(), argv)
    if isinstance(args, int):
        return args
    run = COMMANDS[args.command][2]
    return guarded(lambda: dispatch(run, args), debug=args.debug)


def run_or_exit() -> Run:
    """For the noxfile, which lists the cells as it loads: the run its environment describes, with the matrix
    parsed (once), or exit with the code :func:`guarded` maps the failure to (a bad matrix file: a clean message
    and 2)."""
    got: list[Run] = []

    def load() -> int:
        run = runs.from_environ()
        run.matrix  # noqa: B018 -- parse now, so a bad file is reported here
        got.append(run)
        return EXIT_OK

    code = guarded(load)
    if code != EXIT_OK:
        raise SystemExit(code)
    return got[0]


def session_main(name: str, argv: list[str], run: Callable[..., int] | None = None, *,
                 base: Run | None = None) -> int:
    """``nox -s NAME -- ARGV``: the same parser and the same error mapping as ``skewmatrix NAME``; ``base`` is
    the run the noxfile built as it loaded (its matrix already parsed)."""
    prog = f"nox -s {name} --"
    if name in PASSTHROUGH:
        ns = argparse.Namespace(args=list(argv))
        return guarded(lambda: dispatch(run or COMMANDS[name][2], ns, base), prog=f"skewmatrix {name}")
    args = parse(session_parser(name, prog), argv)
    if isinstance(args, int):
        return args
    return guarded(lambda: dispatch(run or COMMANDS[name][2], args, base), prog=f"skewmatrix {name}")


def dispatch(fn: Callable[[argparse.Namespace, Run], int], args: argparse.Namespace, base: Run | None = None) -> int:
    """Build the run once (the environment's, or the noxfile's ``base``, with this command's own ``-o`` and
    ``--strict``) and run the command with it."""
    return fn(args, (base or runs.from_environ()).with_args(args))
