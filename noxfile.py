# /// script
# requires-python = ">=3.10"
# # The harness's own dependencies (pyproject.toml), so that `uvx nox` or `pipx run nox` can load this
# # file: nox creates an env with them and re-runs itself there when they are missing.
# dependencies = [
#     "nox>=2026.10.20",
#     "uv>=0.13.9",
#     "packaging>=24",
#     "httpx>=0.28",
#     "tomli>=2; python_version < '3.11'",
# ]
# ///
"""nox sessions for skewmatrix -- thin: each parses with ``matrix.cli`` and calls into the packages.

  nox -s matrix          every cell of the selected matrix, then the report and the gate
  nox -s "cell(ID)"      one cell (ids: ``nox --list``)
  nox -s report          classify, render and gate what the cells left in the output directory
  nox -s report -- D...  merge the cell results of shard directories D... into one report
  nox -s pinned -- ...   check an existing env (--python PATH) or exact pins (-r FILE)
  nox -s gate -- --unsloth SOURCE   release gate for a candidate unsloth (--zoo SOURCE: a candidate zoo)
  nox -s scan -- ...     static verdicts for every release, without installing (scan.json, scan.md)
  nox -s mutation -- ... mutation testing of the behaviour suite
  nox -s bench           measure the matrix against its floor (`-- scan`: the scan benchmark)
  nox -s tests           the harness's own test suite (unit + integration)
  nox -s lint            ruff

`nox -s NAME -- --help` lists a session's options and exit codes; an unknown
argument is a usage line and exit 2. The exit codes and what each means per
command: ``matrix.errors`` (the one table). ``_exit`` below is the one
translation from a code to nox's session result.

Why the cells of `nox -s matrix` exit 0 with a failing verdict: nox aborts a
``requires=`` fan-in when any prerequisite failed (checked on nox
2026.10.20), and the `matrix` session must still write the report. So a cell
run as a prerequisite of `matrix` records its verdict, prints it, and exits
0; the `matrix` session then fails the run (exit 1) naming the cells. A cell
session run on its own (`nox -s "cell(ID)"`, as CI's per-cell jobs do) fails
(exit 1) after writing its cell JSON. Either way the other cells still run.

The matrix file is chosen with SKEWMATRIX_MATRIX (default matrix/default.toml);
the output directory with SKEWMATRIX_OUT or `-- -o DIR` (default reports/out/);
a shard of the cells with SKEWMATRIX_SHARD=K/N.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nox
from nox.command import CommandFailed

sys.path.insert(0, str(Path(__file__).resolve().parent))

from matrix import cli, errors, settings
from matrix.cli import sessions
from matrix.envs import recipe
from matrix.settings import RUN_ID_ENV

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["matrix"]
nox.options.error_on_missing_interpreters = True

# The run, built once as nox loads this file: the matrix parsed once, the cells listed from it. Every session
# of this process takes it (with its own `-- -o/--strict`).
BASE = cli.run_or_exit()
RUN = BASE.run_id
CELLS = [c.id for c in BASE.cells]
PYTHON = recipe.venv_python(BASE.matrix.options)  # the cell venv's interpreter; what goes into it: the recipe
# Two workers, a test module on one worker, the longest modules first (tests/conftest.py); the slowest tests are
# listed at the end, so a CI log shows where its time went.
PYTEST_DEFAULT = ["-n", "2", "--dist", "loadscope", "--no-loadscope-reorder", "--durations=25"]

# The only os.environ writes of the harness, and why: under `nox -j` nox starts each session in a process of
# its own, which loads this file again with nox's parent's environment and with nox's own command line gone
# (NOXSESSION names one session). nox offers no other channel to them, so what the first process knows -- the
# run's id (so the session processes share the output directory's lock and count their [k/N] lines together),
# whether `matrix` was asked for (so its cells defer their failures to it), and how many cells the run has --
# is handed to those child processes through the environment they inherit, tied to the run's id so that a
# nested run starts afresh. Nothing in this process reads them back for itself.
FANIN_ENV = settings.FANIN_ENV
PROGRESS_ENV = settings.PROGRESS_ENV  # "RUN N": how many cells this run has, for the [k/N] lines
_requested = sessions.requested_sessions(sys.argv[1:], nox.options.sessions) or []


def _hand_off_to_session_processes(requested: list[str]) -> tuple[bool, int]:
    """(is `matrix` the fan-in of this run, how many cells it has): the parent's answer when this is a session
    process of `nox -j`, else decided here and handed to the session processes nox will start."""
    run, _, n = os.environ.get(PROGRESS_ENV, "").partition(" ")
    if run == RUN and n.isdigit():
        return os.environ.get(FANIN_ENV) == RUN, int(n)  # a session process of `nox -j`: its parent decided
    picked = [s for s in requested if s == "cell" or s.startswith("cell(")]
    total = len(CELLS) if "matrix" in requested or "cell" in picked else max(len(picked), 1)
    os.environ[RUN_ID_ENV] = RUN
    os.environ[PROGRESS_ENV] = f"{RUN} {total}"
    if "matrix" in requested:
        os.environ[FANIN_ENV] = RUN
    return "matrix" in requested, total


FAN_IN, N_CELLS = _hand_off_to_session_processes(_requested)


def _check_posargs(requested: list[str], argv: list[str]) -> None:
    """`nox -s NAME -- ARGS`: --help, or a usage error (exit 2), before nox builds any env."""
    names = {"matrix" if n == "cell" or n.startswith("cell(") else n for n in requested}
    if len(names) != 1 or "--" not in argv:
        return
    name = names.pop()
    if name not in cli.COMMANDS or name in cli.PASSTHROUGH:
        return
    got = cli.parse(cli.session_parser(name, f"nox -s {requested[0]} --"), argv[argv.index("--") + 1:])
    if isinstance(got, int):
        raise SystemExit(got)


_check_posargs(_requested, sys.argv)


def _exit(session: nox.Session, code: int) -> None:
    """A command's exit code as the session's result: 1 fails the session (nox goes on with the
    others and exits 1), 2 stops nox with 2 (bad input, a harness failure)."""
    if code == errors.EXIT_OK:
        return
    if code == errors.EXIT_GATE:
        raise CommandFailed(f"exit {code} (see above)")
    raise SystemExit(code)


@nox.session(python=PYTHON, venv_backend="uv", allow_parallel=True)
@nox.parametrize("cell", [nox.param(c, id=c) for c in CELLS])
def cell(session: nox.Session, cell: str) -> None:
    """Build one cell's env, install its pair (overrides), probe, write cell JSON. Options: see `matrix`."""
    args = cli.parse(cli.session_parser("matrix", "nox -s matrix --"), list(session.posargs))
    if isinstance(args, int):  # --help, or a usage error: every cell would say the same, so stop now
        raise SystemExit(args)
    env_dir = Path(session.virtualenv.location)
    code = cli.guarded(lambda: cli.dispatch(
        lambda a, run: cli.run_cell(cell, env_dir, a, run, n=N_CELLS, strict=not FAN_IN, log=session.log), args,
        BASE), prog=f"skewmatrix cell {cell}")
    if code == errors.EXIT_HARNESS:
        # A harness failure in one cell: the other cells still run; nox then aborts the report.
        session.error(f"cell {cell}: the harness failed (exit 2); see above")
    _exit(session, code)


@nox.session(python=False, requires=["cell"])
def matrix(session: nox.Session) -> None:
    """Run every cell (as dependencies), then classify, report and gate (exit 0/1/2)."""
    _exit(session, cli.session_main("matrix", list(session.posargs),
                                    run=lambda a, run: cli.cmd_matrix(a, run, run_cells=False), base=BASE))


@nox.session(python=False)
def report(session: nox.Session) -> None:
    """Classify, render and gate results: those in the output directory, or merge `-- DIR...` (shards)."""
    _exit(session, cli.session_main("report", list(session.posargs), base=BASE))


@nox.session(python=False)
def pinned(session: nox.Session) -> None:
    """Check an existing env in place (`-- --python PATH`) or exact pins (`-- -r FILE`); exit 0/1/2."""
    _exit(session, cli.session_main("pinned", list(session.posargs), base=BASE))


@nox.session(python=False)
def gate(session: nox.Session) -> None:
    """Release gate for a candidate unsloth or zoo: `-- --unsloth|--zoo VERSION|PATH|git+URL@REF`; exit 0/1/2."""
    _exit(session, cli.session_main("gate", list(session.posargs), base=BASE))


@nox.session(python=False)
def scan(session: nox.Session) -> None:
    """Statically classify every zoo and unsloth release without installing anything."""
    _exit(session, cli.session_main("scan", list(session.posargs), base=BASE))


@nox.session(python=False)
def history(session: nox.Session) -> None:
    """Every unsloth x zoo release pair of a window, judged from source: history.json/.md/.html."""
    _exit(session, cli.session_main("history", list(session.posargs), base=BASE))


@nox.session(python=False)
def mutation(session: nox.Session) -> None:
    """Mutation testing of the behaviour suite (`matrix.mutation`; its own options)."""
    _exit(session, cli.session_main("mutation", list(session.posargs), base=BASE))


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """Measure the default matrix against its floor (R, S, rerun, cold); `-- scan` for the scan."""
    _exit(session, cli.session_main("bench", list(session.posargs), base=BASE))


@nox.session(python=PYTHON, venv_backend="uv")
def tests(session: nox.Session) -> None:
    """The harness's own tests. Pass pytest arguments after `--`. Installs Debian's chromium when root."""
    def browser() -> int:
        path = sessions.ensure_chromium(
            lambda argv: session.run(*argv, external=True, env={"DEBIAN_FRONTEND": "noninteractive"}),
            log=session.log)
        session.log(f"chromium: {path}")
        return 0

    _exit(session, cli.guarded(browser, prog="nox -s tests"))
    session.install("-e", ".[test]")
    start = time.perf_counter()
    # The tests start runs of their own: they must not inherit this run's identity.
    session.run("pytest", *(session.posargs or PYTEST_DEFAULT), env={RUN_ID_ENV: "", FANIN_ENV: "", PROGRESS_ENV: ""})
    session.log(f"tests passed in {time.perf_counter() - start:.0f} s")


@nox.session(python=PYTHON, venv_backend="uv")
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
