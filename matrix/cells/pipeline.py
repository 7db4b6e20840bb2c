"""The run, as one readable pipeline.

load matrix -> expand cells -> (per cell) build env -> probe -> cell JSON
-> collect -> classify -> render -> gate.

The nox sessions in ``noxfile.py`` and ``python -m matrix`` are thin calls
into this module, each with the run value the command line built
(``matrix.cells.runs.Run``: the parsed matrix, the output directory, strict, the
run id, the shard). :func:`run_matrix` is the loop over a run's cells.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrix import errors, spec
from matrix.cells import rawkey
from matrix.cells.cell import CellRun, error_cell, run_cell, write_json_atomic
from matrix.cells.collect import load_cells
from matrix.cells.runs import Run
from matrix.errors import SkewmatrixError
from matrix.index import IndexClient
from matrix.scan import compare_with_cells
from matrix.spec import REPO_ROOT, Matrix, inputs


def run_matrix(run: Run, *, force: bool = False, device: str | None = None,
               log: Callable[[str], Any] = print) -> None:
    """Every selected cell of ``run``, one after the other (env directories under OUT/envs), each with its
    ``[k/N]`` line."""
    from matrix.cells.progress import next_k

    cells = run.cells
    for cell in cells:
        start = time.perf_counter()
        record = run_one(run, cell.id, run.out / "envs" / cell.id, create_env=True, force=force, device=device,
                         log=log)
        finish_cell(record, cell, run, seconds=time.perf_counter() - start, k=next_k(run.out, run.run_id),
                    n=len(cells), log=log)


def run_one(run: Run, cell_id: str, env_dir: Path, *, create_env: bool = False, force: bool = False,
            log: Callable[[str], Any] = print, device: str | None = None) -> dict:
    """Run one cell.

    Its PyPI versions are checked on the index first: a version that does not
    exist is this cell's ``spec`` error. An index that cannot be reached is
    not fatal by itself -- an unchanged cell is still reused from its stored
    result -- but a cell that then cannot install is an ``index`` error
    naming the unreachable index.
    """
    matrix = run.matrix
    cell = matrix.cell(cell_id)
    if device:  # `--device cuda`: the same matrix on another device (part of the cell digest)
        cell = dataclasses.replace(cell, options=dataclasses.replace(cell.options, device=device))
    out = run.out
    acquire_run_lock(out, run.run_id)
    log(f"[{cell_id}] {cell.describe()} -> {out / 'cells' / cell_id}")
    index = IndexClient()
    problems = [p for b in cell.builds for p in inputs.index_problems(b, f"build {b.name!r}", index)]
    unreachable = [p for p in problems if ": cannot check " in p]
    if problems and not unreachable:
        for p in problems:
            log(f"[{cell_id}] spec error: {p}")
        return error_cell(cell, matrix, out, "spec", "\n".join(problems))
    for p in unreachable:
        log(f"[{cell_id}] warning: {p}")
    rawkey.prune(out, run.run_id)  # raw findings are shared within a run, never across runs
    return run_cell(cell, matrix, out, env_dir, create_env=create_env, force=force, progress=log,
                    index_problem="\n".join(unreachable) or None, raw_cache=rawkey.cache_dir(out, run.run_id))


_RUN_LOCKS: dict[Path, Any] = {}


def acquire_run_lock(out: Path, me: str) -> None:
    """Hold ``OUT/.skewmatrix.lock`` for the life of this process.

    A second run on the same output directory is refused with the holder's
    pid instead of interleaving files. Processes of the *same* run (nox
    ``-j`` runs each session in a subprocess) share the run id and cooperate.
    """
    import fcntl

    out = out.resolve()
    if out in _RUN_LOCKS:
        return
    out.mkdir(parents=True, exist_ok=True)
    fh = (out / ".skewmatrix.lock").open("a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "unknown"
        fh.close()
        if holder == me:
            return  # a sibling session process of this very run holds it
        raise RunLockedError(f"{out}: another skewmatrix run (pid {holder}) is using this output directory; "
                             "wait for it, or set SKEWMATRIX_OUT to another directory") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{me}\n")
    fh.flush()
    _RUN_LOCKS[out] = fh


class RunLockedError(SkewmatrixError):
    """Another process is running on the same output directory."""


def missing_cell(cell: spec.Cell, matrix: Matrix, out: Path) -> dict[str, Any]:
    """A placeholder for a declared cell that left no result: shown as an error, never dropped."""
    run = CellRun.for_cell(cell, matrix, out)
    run.fail("missing", "the cell left no result (it did not run, or it was interrupted)")
    return run.record


def collect(matrix: Matrix, cells: list[spec.Cell], dirs: list[Path], out: Path) -> list[dict[str, Any]]:
    """Cell results for ``cells`` from one or more result directories.

    With one directory, a declared cell without a result becomes a ``missing``
    error cell (shown, never dropped). With several (a merge of shards), a
    cell found in two directories, a declared cell found in none, or a result
    of another schema is refused with a message naming the files.
    """
    ids = [c.id for c in cells]
    found: dict[str, dict[str, Any]] = {}
    where: dict[str, Path] = {}
    for d in dirs:
        if not (d / "cells").is_dir():
            raise MergeError(f"{d}: no cells/ directory here; is this a skewmatrix output directory?")
        for cell in load_cells(d, only=ids):
            cid = cell["cell_id"]
            if cid in found:
                raise MergeError(f"cell {cid} has results in both {where[cid]} and {d}: "
                                 "shards must not overlap; remove one")
            found[cid], where[cid] = cell, d
    if len(dirs) > 1:
        absent = [i for i in ids if i not in found]
        if absent:
            raise MergeError(f"{len(absent)} cell(s) of {matrix.path} have no result in any of the "
                             f"{len(dirs)} directories: {', '.join(absent)}")
    results = [found.get(c.id) or missing_cell(c, matrix, out) for c in cells]
    # Reused or merged results are judged against the matrix file as it is now.
    for cell, r in zip(cells, results, strict=True):
        r["expect"] = cell.expect_map
    return results


def attach_scan(rep: dict[str, Any], out: Path) -> None:
    """When a scan (``scan.json``) sits in ``out``, compare its static verdicts with the cells'."""
    path = out / "scan.json"
    if not path.is_file():
        return
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SkewmatrixError(f"{path}: unreadable scan result ({exc}); rerun `nox -s scan`") from exc
    t = doc.get("timeline") or {}
    rep["scan"] = {"generated": doc.get("generated"), "check": doc.get("check"), "timeline": t,
                   "first_fixed": t.get("first_fixed"), "fixed_since": t.get("fixed_since"),
                   "fixed_since_confirmed_by": t.get("fixed_since_confirmed_by"),
                   "comparisons": compare_with_cells(doc, rep["cells"])}


class MergeError(SkewmatrixError):
    """Shard results that cannot be merged."""


def report(run: Run, dirs: list[Path] | None = None, *, log: Callable[[str], Any] = print,
           fail_on: frozenset[str] | None = None) -> dict[str, Any]:
    """Collect the selected cells' results, classify, render every format.

    ``dirs`` are result directories to merge (default: the output directory).
    """
    from reports.model import build_report
    from reports.render import RENDERERS, write_all

    matrix, out = run.matrix, run.out
    acquire_run_lock(out, run.run_id)
    cells = run.cells if not dirs else list(matrix.cells)
    results = collect(matrix, cells, [d.resolve() for d in dirs] if dirs else [out], out)
    rel = os.path.relpath(matrix.path, REPO_ROOT) if matrix.path.is_absolute() else str(matrix.path)
    failing = frozenset(fail_on or matrix.fail_on)
    # Judged against the matrix file as it is now (a reused or merged result may carry older expectations),
    # before anything is rendered: every format's headline then says what the exit code says.
    current = {c.id: c.expect_map for c in matrix.cells}
    results = [{**r, "expect": current[r["cell_id"]]} if r.get("cell_id") in current else r for r in results]
    rep = build_report(results, matrix=rel, order=[c.id for c in cells], failing=failing,
                       strict=run.judged_strict)
    attach_scan(rep, out)
    if dirs:
        # A merged output directory carries its cells, so it can be re-rendered or merged again.
        for r in results:
            target = out / "cells" / r["cell_id"] / "cell.json"
            if not target.is_file() or json.loads(target.read_text(encoding="utf-8")) != r:
                write_json_atomic(target, r)
    written = write_all(rep, out)
    for p in written:
        log(f"wrote {p}")
    # Last, so that a terminal ends on it: the findings in full, the grid, the grouped summary, the headline.
    log(RENDERERS["terminal"].render(rep))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        # The summary renderer keeps itself under GitHub's 1 MiB cap.
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(RENDERERS["summary"].render(rep))
    return rep


# ---------------------------------------------------------------- the gate's verdict and the progress lines


def expect_from_matrix(rep: dict[str, Any], matrix: Matrix) -> None:
    """Judge every cell against the matrix file as it is now: a reused or merged
    cell result may carry the expectations of an older file."""
    current = {c.id: c.expect_map for c in matrix.cells}
    for entry in rep["cells"]:
        if entry["cell_id"] in current:
            entry["expect"] = current[entry["cell_id"]]


def judge(rep: dict[str, Any], run: Run, *, exit_zero: bool = False, verbose: int = 0,
          log: Callable[[str], Any] = print) -> int:
    """Print what the gate makes of ``rep`` and return the run's exit code (0 or 1; 0 with ``exit_zero``)."""
    from matrix.cells.progress import paint
    from reports.gate import evaluate

    expect_from_matrix(rep, run.matrix)
    outcome = evaluate(rep)
    # One short line per finding, identical ones grouped (the report printed each in full once); -v lists every
    # (cell, check) with its whole reason.
    for line in [c.describe() for c in outcome.checks] if verbose else outcome.lines(brief=True):
        log(f"  {line}")
    code = errors.run_code(outcome)
    colour = "green" if code == errors.EXIT_OK else "red"
    log(paint(outcome.summary(), colour))
    if exit_zero and code:
        log(f"exit 0 (--exit-zero; the gate alone would exit {code})")
        return errors.EXIT_OK
    log(f"exit {code}" + (" (every cell passes or is in its expected state)" if code == errors.EXIT_OK else
                          " (an unexpected gate failure or an XPASS; see above)"))
    return code


def finish_cell(record: dict[str, Any], cell: spec.Cell, run: Run, *, seconds: float, k: int, n: int,
                log: Callable[[str], Any] = print) -> str:
    """Print the ``[k/N] cell … → verdict (seconds)`` line for a finished cell; return its kind
    (pass, xfail, fail, xpass: see ``reports.gate``)."""
    from matrix.cells.progress import cell_line
    from reports.gate import evaluate
    from reports.model import build_report

    rep = build_report([{**record, "expect": cell.expect_map}], matrix=str(run.matrix.path),
                       failing=frozenset(run.matrix.fail_on), strict=run.judged_strict)
    outcome = evaluate(rep)
    states = {c.check: c.shown for c in outcome.checks}  # in each check's own words
    kind = outcome.cell_kind(cell.id)
    log(cell_line(k, n, cell.id, states, kind, seconds))
    for line in outcome.lines(brief=True):  # the reasons come once, grouped, with the report
        log(f"  {line}")
    return kind
