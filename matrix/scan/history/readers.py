"""The history's inputs: the releases of both projects in a window, and each release read once.

Releases come from the index through the scan's ``ScanIndex`` (its page cache answers when the index does
not); their upload times from the same JSON page (PEP 700 ``upload-time``). Each release's ``.py`` members and
core metadata are read by the scan's ``Fetcher`` (whole small files, range reads of large wheels) and turned
at once into the pair reader's analysis (a reference list or a symbol table): the extract cached per file
sha256 holds that analysis, not the sources, under a key that changes with the reader's code.

The analyses run in worker processes (:func:`analysis_pool`: one per CPU, started by a forkserver, so no worker
is forked from a threaded parent): parsing is CPU-bound, and in one process the readers' threads take turns
under ``AST_LOCK`` (concurrent ``ast.parse`` corrupts CPython 3.11), which left the second core idle while a
cold ``--all`` run parsed 458 wheels. The fetching threads stay in this process; each hands the sources of one
release to the pool and waits for its analysis, as JSON. An analyser the pool cannot pickle (a closure) runs
here, under the lock, as before.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from matrix.index import Release
from matrix.scan.cache import ScanIndex
from matrix.scan.fetch import Fetcher
from matrix.scan.terms import AST_LOCK, FetchError, Want
from probes import checks
from probes.checks.capabilities import PairTarget

ANALYSIS = "__pair_analysis__.json"
WINDOW_DAYS = 365


def pair_target() -> tuple[str, PairTarget]:
    """The registered check that declares the pair reader, with its id: exactly one may (a second ``pairs.py``
    would otherwise be ignored without a word), through the registry's one ``pick``."""
    from matrix.errors import SkewmatrixError

    try:
        cid = checks.pick("pairs", sole=True)
    except checks.PickError as exc:
        raise SkewmatrixError(f"history: {exc}") from exc
    return cid, checks.capability(cid, "pairs")


def reader_key(t: PairTarget) -> str:
    """Identifies the reader's code: a change re-reads every release (old extracts are ignored)."""
    spec = find_spec(t.reader)
    assert spec is not None and spec.submodule_search_locations
    h = hashlib.sha256()
    for p in sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


TASKS_PER_WORKER = 12  # a worker is replaced after this many releases: CPython keeps the arenas of the ASTs
# it parsed, so a worker's memory would otherwise grow to its largest releases' (a restart is cheap beside a parse)
_POOL: dict[str, ProcessPoolExecutor] = {}  # "pool": the one running, while it runs
_POOL_LOCK = threading.Lock()


def analysis_pool() -> ProcessPoolExecutor:
    """The worker processes the analyses run in (see the module docstring), started on first use."""
    with _POOL_LOCK:
        if "pool" not in _POOL:
            _POOL["pool"] = ProcessPoolExecutor(max_workers=os.cpu_count() or 1, max_tasks_per_child=TASKS_PER_WORKER,
                                                mp_context=multiprocessing.get_context("forkserver"))
        return _POOL["pool"]


def close_pool() -> None:
    """Stop the worker processes (their memory is the run's largest after the reading); the next read starts
    new ones."""
    with _POOL_LOCK:
        pool = _POOL.pop("pool", None)
    if pool is not None:
        pool.shutdown(wait=True)


def worker_pids() -> list[int]:
    """The live worker processes' ids."""
    with _POOL_LOCK:
        procs = getattr(_POOL.get("pool"), "_processes", None) or {}  # ProcessPoolExecutor has no public list
        return list(procs)


def analysis_json(analyze: Callable[[dict[str, str]], dict[str, Any]], sources: dict[str, str]) -> str:
    """In a worker: the analysis of one release's sources, as JSON (a string crosses back cheaply)."""
    return json.dumps(analyze(sources))


def _poolable(fn: Callable[..., Any]) -> bool:
    """A module-level function is pickled by name; a closure or a lambda cannot cross to a worker."""
    return "<" not in getattr(fn, "__qualname__", "<")


def want(package: str, analyze: Callable[[dict[str, str]], dict[str, Any]], key: str) -> Want:
    def closure(names: list[str], read: Callable[[str], str]) -> dict[str, str]:
        sources = {n: read(n) for n in names}
        if _poolable(analyze):
            return {ANALYSIS: analysis_pool().submit(analysis_json, analyze, sources).result()}
        with AST_LOCK:  # see AST_LOCK: concurrent ast.parse corrupts CPython 3.11
            return {ANALYSIS: analysis_json(analyze, sources)}

    return Want(name=lambda n: n.startswith(package + "/") and n.endswith(".py"), metadata=True,
                closure=closure, key=f"history-{package}-{key}")


@dataclass(frozen=True)
class Listed:
    release: Release
    uploaded: str | None  # ISO time of the file read, from the index page

    @property
    def version(self) -> str:
        return str(self.release.version)


def listed(index: ScanIndex, project: str) -> list[Listed]:
    """Every release with the upload time of the file the history reads, ascending by version."""
    page, _ = index.page(project)
    times = {f.get("filename"): f.get("upload-time") for f in page.get("files", [])}
    releases, _ = index.releases(project)
    out = []
    for r in releases:
        f = r.pick()
        out.append(Listed(r, times.get(f.filename) if f is not None else None))
    return out


def uploaded_at(row: Listed) -> datetime | None:
    return datetime.fromisoformat(row.uploaded.replace("Z", "+00:00")) if row.uploaded else None


def window(rows: list[Listed], spec: str, everything: bool, now: datetime | None = None) -> list[Listed]:
    """The releases a side's specifier selects (yanked ones left out); with no specifier and no ``--all``, the
    last :data:`WINDOW_DAYS` days by upload time."""
    chosen = [r for r in rows if not r.release.yanked and r.release.pick() is not None]
    if spec:
        s = SpecifierSet(spec)
        return [r for r in chosen if s.contains(r.release.version, prereleases=True)]
    if everything:
        return chosen
    since = (now or datetime.now(timezone.utc)) - timedelta(days=WINDOW_DAYS)
    return [r for r in chosen if r.uploaded and datetime.fromisoformat(r.uploaded.replace("Z", "+00:00")) >= since]


def read_all(jobs: list[tuple[Listed, Want]], fetcher: Fetcher, workers: int,
             log: Callable[[str], None], *, parse: bool = True) -> list[dict[str, Any]]:
    """``{"analysis", "metadata", "integrity"}`` or ``{"error"}`` per job, in order; one ``[k/N]`` line per read.
    ``parse=False`` leaves each analysis as its JSON text (:func:`parsed` turns it into objects later): a
    release's parsed analysis takes several times its text's memory, and the whole window's, parsed while the
    workers and uv still run, was most of a cold ``--all`` run's peak."""
    done = [0]
    started = time.monotonic()

    def one(job: tuple[Listed, Want]) -> dict[str, Any]:
        row, w = job
        f = row.release.pick()
        assert f is not None
        hit = fetcher.cached(f, w) is not None
        try:
            ex = fetcher.get(f, w)
            text = ex.members[ANALYSIS]
            out = {"analysis": json.loads(text) if parse else text, "metadata": ex.metadata,
                   "integrity": ex.integrity, "sha256": f.sha256}
        except (FetchError, KeyError, ValueError) as exc:
            out = {"error": f"{f.filename}: {exc}", "sha256": f.sha256}
        done[0] += 1
        if not hit:
            log(f"[{done[0]}/{len(jobs)}] {canonicalize_name(w.key.split('-')[1])} {row.version} read "
                f"({time.monotonic() - started:.0f} s)")
        return out

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, jobs))


def parsed(got: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``read_all(..., parse=False)``'s answers with each analysis parsed (in place: the text goes as its
    objects come)."""
    for g in got:
        if isinstance(g.get("analysis"), str):
            try:
                g["analysis"] = json.loads(g["analysis"])
            except ValueError as exc:  # as read_all says of an analysis it cannot read
                del g["analysis"]
                g["error"] = f"analysis: {exc}"
    return got
