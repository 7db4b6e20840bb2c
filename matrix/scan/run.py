"""The scan as one run: pick the check -> list releases -> read and analyse each -> confirm (optional) -> timeline
and floors.

Zoo and unsloth releases are read in one thread pool sharing one keep-alive
HTTP client; each analysis is cached by file sha256 and analyzer code
(``matrix.scan.cache``). While it reads, the scan prints one ``[k/N]`` line
per release it had to read (those served from the analysis cache are only
counted), then a closing line with the totals.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from matrix.index import IndexClient, Release, redact
from matrix.scan import confirm as confirm_mod
from matrix.scan import unsloth as unsloth_mod
from matrix.scan import zoo as zoo_mod
from matrix.scan.cache import ScanIndex, analysis_path, read_json, write_atomic
from matrix.scan.fetch import Fetcher
from matrix.scan.policy import admitted_floor, exposure, parse_spec, select, timeline
from matrix.scan.terms import AST_LOCK, SCHEMA, UNSLOTH, ZOO, Extract, FetchError, ScanError, Want
from matrix.scan.zoo import Scanned, scanned
from matrix.settings import scan_cache_dir
from probes import checks

MAX_WORKERS = 8
DEFAULT_CONFIRM_MAX = 4


@dataclass(frozen=True)
class ScanOptions:
    zoo: str = ""
    unsloth: str = ""
    include_yanked: bool = False
    workers: int = 6
    offline: bool = False
    skip_unsloth: bool = False
    skip_zoo: bool = False
    confirm: bool = False
    confirm_max: int = DEFAULT_CONFIRM_MAX
    check: str = ""  # the id of the check to scan for; empty: the first registered check with a scan target


def analyzer_key(s: Scanned | None = None) -> str:
    """Identifies the code that turns an extract into an analysis (and the check it reads for): cached
    analyses of other code are ignored."""
    s = s or scanned()
    h = hashlib.sha256(s.id.encode())
    for mod_file in (*zoo_mod.detector_files(s), unsloth_mod.__file__, __file__):
        h.update(Path(mod_file).read_bytes())
    return h.hexdigest()[:16]


def _base(r: Release) -> dict[str, Any]:
    f = r.pick()
    return {"version": str(r.version), "yanked": r.yanked, "yanked_reason": r.yanked_reason(),
            "all_sha256": sorted(x.sha256 for x in r.files if x.sha256),
            "file": None if f is None else {"filename": f.filename, "sha256": f.sha256, "size": f.size,
                                            "kind": f.kind, "integrity": None}}


@dataclass(frozen=True)
class _Kind:
    """How one project's releases are read, analysed and described in a progress line."""

    label: str
    want: Want
    analyze: Callable[[Extract], dict[str, Any]]
    unknown: Callable[[str], dict[str, Any]]
    outcome: Callable[[dict[str, Any]], str]


def kinds(s: Scanned) -> tuple[_Kind, _Kind]:
    """How zoo and unsloth releases are read and analysed for the scanned check."""
    zoo = _Kind("unsloth_zoo", zoo_mod.zoo_want(s), functools.partial(zoo_mod.classify_zoo, s=s),
                lambda why: {"verdict": "unknown", "reason": why, "evidence_line": None},
                lambda row: row["verdict"])
    uns = _Kind(
        "unsloth", unsloth_mod.unsloth_want(s), functools.partial(unsloth_mod.analyze_unsloth, s=s),
        lambda why: {"zoo_requirement": {"known": False, "reason": why, "requirements": [], "plain": None,
                                         "extras": {}},
                     "guard": {"state": "unknown", "kind": None, "evidence": [why]}},
        lambda row: f"guard {row['guard']['state']}, zoo {row['zoo_requirement'].get('plain') or '-'}")
    return zoo, uns


class _Progress:
    def __init__(self, total: int, log: Callable[[str], None]) -> None:
        self.total, self.log, self.done, self.cached = total, log, 0, 0
        self._lock = threading.Lock()

    def tick(self, kind: _Kind, row: dict[str, Any], seconds: float | None) -> None:
        with self._lock:
            self.done += 1
            if seconds is None:
                self.cached += 1
                return
            self.log(f"[{self.done}/{self.total}] {kind.label} {row['version']} → {kind.outcome(row)} "
                     f"({seconds:.1f} s)")


def _read_all(jobs: list[tuple[_Kind, Release]], fetcher: Fetcher, workers: int,
              progress: _Progress, key: str) -> list[dict[str, Any]]:
    """Release rows with the analysis of their file, in ``jobs`` order (``key``: see ``analyzer_key``)."""

    def one(job: tuple[_Kind, Release]) -> dict[str, Any]:
        kind, r = job
        t0 = time.monotonic()
        entry = _base(r)
        f = r.pick()
        if f is None:
            row = {**entry, **kind.unknown(f"no wheel or sdist listed for {r.version}")}
            progress.tick(kind, row, time.monotonic() - t0)
            return row
        path = analysis_path(fetcher.cache, key, f.sha256) if f.sha256 else None
        cached = read_json(path) if path is not None else None
        if isinstance(cached, dict) and "integrity" in cached:
            entry["file"]["integrity"] = cached.pop("integrity")
            fetcher.count("cache_hits")
            row = {**entry, **cached}
            progress.tick(kind, row, None)
            return row
        try:
            ex = fetcher.get(f, kind.want)
        except FetchError as exc:
            row = {**entry, **kind.unknown(str(exc))}
            progress.tick(kind, row, time.monotonic() - t0)
            return row
        with AST_LOCK:  # see AST_LOCK: the detectors parse source
            result = kind.analyze(ex)
        if path is not None:
            write_atomic(path, json.dumps({**result, "integrity": ex.integrity}))
        entry["file"]["integrity"] = ex.integrity
        row = {**entry, **result}
        progress.tick(kind, row, time.monotonic() - t0)
        return row

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_WORKERS, workers))) as pool:
        return list(pool.map(one, jobs))


def _finish_unsloth(u: dict[str, Any], zoo_all: list[dict[str, Any]], include_yanked: bool) -> dict[str, Any]:
    """Add the floors and exposures, which depend on the zoo verdicts of this run."""
    reqs, guard = u["zoo_requirement"], u["guard"]["state"]
    floor = admitted_floor(reqs["plain"], zoo_all, include_yanked) if reqs["plain"] is not None else None
    extra_floors = {e: admitted_floor(s, zoo_all, include_yanked) for e, s in reqs["extras"].items()}
    required = not reqs["known"] or reqs["plain"] is not None
    return {**u, "floor": floor, "extra_floors": extra_floors, "exposure": exposure(floor, guard, required),
            "extra_exposure": {e: exposure(f, guard) for e, f in extra_floors.items()}}


def declared_fix(s: Scanned, tl: dict[str, Any]) -> dict[str, Any] | None:
    """The check's declared upstream fix (``FIX``) against this scan's timeline boundary (``fixed_since``):
    ``agrees`` false, with the difference in words, when the declared first fixed release is another."""
    fix = checks.upstream_fix(s.name)
    if fix is None:
        return None
    differs = fix.against_scan(tl.get("fixed_since")) if fix.package == s.target.package else (
        f"the declared fix is in {fix.package}, not in {s.target.package}, which the scan reads")
    return {"package": fix.package, "release": fix.release, "prs": list(fix.prs), "prs_state": fix.prs_state,
            "title": fix.title, "scan_fixed_since": tl.get("fixed_since"), "agrees": not differs,
            "disagreement": differs}


def run(opts: ScanOptions, cache: Path | None = None, index: ScanIndex | None = None,
        fetcher: Fetcher | None = None, log: Callable[[str], None] = print,
        runner: Callable[[str, Path], confirm_mod.RuntimeVerdict] | None = None) -> dict[str, Any]:
    """The whole scan as data (the ``scan.json`` document). ``runner`` replaces the runtime check (tests)."""
    zoo_spec = parse_spec(opts.zoo, "--zoo")
    uns_spec = parse_spec(opts.unsloth, "--unsloth")
    if opts.confirm_max < 0:
        raise ScanError(f"--confirm-max {opts.confirm_max}: must be 0 or more")
    s = scanned(opts.check)
    if opts.confirm and s.target.runtime is None and runner is None:
        raise ScanError(f"--confirm: n/a for check {s.id}: its scan target names no runtime detector")
    zoo_kind, uns_kind = kinds(s)
    cache = cache or scan_cache_dir()
    index = index or ScanIndex(IndexClient(), cache=cache, offline=opts.offline)
    fetcher = fetcher or Fetcher(cache, index.client.http)
    started = time.monotonic()
    requests_before = index.client.http.requests
    origins: dict[str, str] = {}
    errors: list[str] = []

    zoo_releases, origins[ZOO] = index.releases(ZOO)
    zoo_sel = select(zoo_releases, zoo_spec)
    uns_sel: list[Release] = []
    if not opts.skip_unsloth:
        try:
            uns_releases, origins[UNSLOTH] = index.releases(UNSLOTH)
        except ScanError as exc:
            errors.append(str(exc))
            uns_releases = []
        uns_sel = select(uns_releases, uns_spec)
    # The unsloth floors need every zoo verdict, so all zoo releases are read; --zoo selects the table.
    zoo_need = zoo_releases if not opts.skip_unsloth else zoo_sel
    jobs = [(zoo_kind, r) for r in zoo_need] + [(uns_kind, r) for r in uns_sel]
    progress = _Progress(len(jobs), log)
    rows = _read_all(jobs, fetcher, opts.workers, progress, analyzer_key(s))
    log(f"[{len(jobs)}/{len(jobs)}] read {len(jobs)} release(s): {len(jobs) - progress.cached} read now, "
        f"{progress.cached} from the cache, in {time.monotonic() - started:.1f} s")
    zoo_all = [{**z, "confirmed_by": "static-only"} for z in rows[:len(zoo_need)]]
    keep = {str(r.version) for r in zoo_sel}
    if opts.confirm:
        selected = confirm_mod.confirm([z for z in zoo_all if z["version"] in keep], include_yanked=opts.include_yanked,
                                       max_unknown=opts.confirm_max, workdir=cache / "confirm", log=log,
                                       runner=runner or functools.partial(confirm_mod.run_runtime,
                                                                          runtime=s.target.runtime))
        merged = {z["version"]: z for z in selected}
        zoo_all = [merged.get(z["version"], z) for z in zoo_all]
    zoo = [z for z in zoo_all if z["version"] in keep]
    unsloth = [_finish_unsloth(u, zoo_all, opts.include_yanked) for u in rows[len(zoo_need):]]
    tl = timeline(zoo, opts.include_yanked)

    return {
        "schema": SCHEMA,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "check": s.id,
        "index": {"url": redact(index.url), "origin": origins},
        "target": {"file": s.target.file, "function": s.target.function},
        "options": {"zoo": opts.zoo, "unsloth": opts.unsloth, "include_yanked": opts.include_yanked,
                    "confirm": opts.confirm, "confirm_max": opts.confirm_max},
        "zoo": zoo,
        "timeline": tl,
        "declared_fix": declared_fix(s, tl),
        "unsloth": unsloth,
        "warnings": list(index.warnings),
        "errors": errors,
        "stats": {**fetcher.stats, "requests": index.client.http.requests - requests_before,
                  "seconds": round(time.monotonic() - started, 3),
                  "zoo_classified": sum(1 for z in zoo_all if z["verdict"] != "unknown"),
                  "unsloth_classified": len(unsloth),
                  "confirmed": sum(1 for z in zoo if z["confirmed_by"] == "runtime")},
    }
