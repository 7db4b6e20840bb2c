"""nox sessions for skewmatrix -- thin: each calls into ``matrix.pipeline``.

  nox -s matrix          every cell of the selected matrix, then the report
  nox -s "cell(ID)"      one cell (ids: ``nox --list``)
  nox -s report          classify and render what the cells left in reports/out/
  nox -s report -- D...  merge the cell results of shard directories D... into one report
  nox -s pinned -- ...   check an existing env (--python PATH) or exact pins (-r FILE); exit 0/1/2
  nox -s gate -- --unsloth SOURCE   release gate for a candidate unsloth; exit 0/1/2
  nox -s scan -- ...     static verdicts for every release, without installing (scan.json, scan.md)
  nox -s bench           measure the matrix against its floor (`-- scan`: the scan benchmark)
  nox -s tests           the harness's own test suite (unit + integration)
  nox -s lint            ruff

The matrix file is chosen with SKEWMATRIX_MATRIX (default matrix/default.toml);
the output directory with SKEWMATRIX_OUT (default reports/out/); a shard of the
cells with SKEWMATRIX_SHARD=K/N. `-- --force` reruns cells whose result is current.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).resolve().parent))

from matrix import pipeline
from matrix.errors import SkewmatrixError

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["matrix"]
nox.options.error_on_missing_interpreters = True

pipeline.run_id()  # set once here, inherited by the session processes of `nox -j`
CELLS = pipeline.cell_ids_or_exit()
PYTHON = pipeline.load_matrix().options.python


def _guarded(session: nox.Session, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except SkewmatrixError as exc:
        session.error(str(exc))


@nox.session(python=PYTHON, venv_backend="uv", allow_parallel=True)
@nox.parametrize("cell", [nox.param(c, id=c) for c in CELLS])
def cell(session: nox.Session, cell: str) -> None:
    """Build one cell's env, install its pair (overrides), probe, write cell JSON."""
    env_dir = Path(session.virtualenv.location)
    force = "--force" in session.posargs
    _guarded(session, pipeline.run_one, cell, env_dir, force=force, log=session.log)


@nox.session(python=False, requires=["cell"])
def matrix(session: nox.Session) -> None:
    """Run every cell (as dependencies), then classify and report."""
    _guarded(session, pipeline.report, log=print)


@nox.session(python=False)
def report(session: nox.Session) -> None:
    """Classify and render results: those in the output directory, or merge `-- DIR...` (shards)."""
    dirs = [Path(a) for a in session.posargs if not a.startswith("-")]
    _guarded(session, pipeline.report, dirs or None, log=print)


@nox.session(python=False)
def pinned(session: nox.Session) -> None:
    """Check an existing env in place (`-- --python PATH`) or exact pins (`-- -r FILE`); exit 0/1/2."""
    from matrix import pinned as pinned_mod

    out = pipeline.out_dir() / "pinned"
    code = _guarded(session, pinned_mod.main, list(session.posargs), out, log=print)
    if code:
        raise SystemExit(code)


@nox.session(python=False)
def gate(session: nox.Session) -> None:
    """Release gate for a candidate unsloth: `-- --unsloth VERSION|PATH|git+URL@REF`; exit 0/1/2."""
    from matrix import gate as gate_mod

    code = _guarded(session, gate_mod.main, list(session.posargs), pipeline.out_dir() / "gate", log=print)
    if code:
        raise SystemExit(code)


@nox.session(python=False)
def scan(session: nox.Session) -> None:
    """Statically classify every zoo and unsloth release without installing anything."""
    from matrix import scan as scan_mod

    code = scan_mod.main(list(session.posargs))
    if code:
        raise SystemExit(code)


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """Measure the default matrix against its floor (R, S, rerun, cold); `-- scan` for the scan."""
    from matrix import bench as bench_mod

    code = bench_mod.main(list(session.posargs))
    if code:
        raise SystemExit(code)


@nox.session(python=PYTHON, venv_backend="uv")
def tests(session: nox.Session) -> None:
    """The harness's own tests. Pass pytest arguments after `--`."""
    session.install("-e", ".[test]")
    # The tests start runs of their own: they must not inherit this run's identity.
    session.run("pytest", *(session.posargs or ["-n", "2"]), env={pipeline.RUN_ID_ENV: ""})


@nox.session(python=PYTHON, venv_backend="uv")
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", ".")
