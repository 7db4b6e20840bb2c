"""The history as one run: list both projects -> pick the window -> read each release once (while uv resolves
what a plain install of each unsloth release gets) -> judge every pair, and each plain-install pair outside the
window -> metadata (floors, zoo caps) -> the other checks' scan verdicts and guards -> the atlas -> one document.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from matrix.errors import SkewmatrixError
from matrix.index import IndexClient, redact
from matrix.scan.cache import ScanIndex, read_json, write_atomic
from matrix.scan.fetch import Fetcher
from matrix.scan.history import atlas, grid, hazards, metadata_caps, plain_install, readers
from matrix.scan.terms import Want
from matrix.settings import scan_cache_dir
from probes import checks
from probes.checks.capabilities import PairTarget

SCHEMA = "skewmatrix.scan.history/1"


@dataclass(frozen=True)
class HistoryOptions:
    unsloth: str = ""
    zoo: str = ""
    everything: bool = False  # --all: every release, not the last 12 months
    workers: int = 6
    offline: bool = False
    scan: bool = True  # the other checks' scan verdicts per zoo release
    resolve: bool = True  # the plain-install answer from uv (False: floor-only, ``--floor-only``)
    plain_pairs: bool = True  # judge each plain-install pair outside the zoo window (reads those zoo releases)


def _spec(value: str, flag: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise SkewmatrixError(f"{flag} {value!r}: not a PEP 440 specifier set (e.g. '>=2026.1'): {exc}") from exc
    return value


class RowCache:
    """Whole judged rows between runs (``<scan cache>/history-grid/``): one file per unsloth release, keyed by the
    reader's code, the release's file and the zoo window (each release's version and file digest), so a warm run
    judges nothing and any change of reader, release or window judges again."""

    def __init__(self, cache: Path, reader_key: str, zoo: list[dict[str, Any]]) -> None:
        self.folder = cache / "history-grid"
        self.base = json.dumps([reader_key, [(z["version"], z.get("sha256")) for z in zoo]])

    def _path(self, u: dict[str, Any]) -> Path | None:
        if not u.get("sha256"):
            return None
        key = hashlib.sha256(f"{self.base}|{u['version']}|{u['sha256']}|{u.get('plain')}".encode()).hexdigest()
        return self.folder / f"{key[:24]}.json"

    def get(self, u: dict[str, Any]) -> list[dict[str, Any]] | None:
        path = self._path(u)
        got = read_json(path) if path is not None else None
        return got if isinstance(got, list) else None

    def put(self, u: dict[str, Any], pairs: list[dict[str, Any]]) -> None:
        path = self._path(u)
        if path is not None:
            write_atomic(path, json.dumps(pairs))


def since_zoo(uns: list[readers.Listed], zoo_all: list[readers.Listed]) -> tuple[list[readers.Listed], str | None]:
    """``--all`` on the unsloth side: the releases uploaded since zoo's first (older ones cannot refer to zoo)."""
    times = [readers.uploaded_at(r) for r in zoo_all]
    first = min((t for t in times if t is not None), default=None)
    if first is None:
        return uns, None
    kept = [r for r in uns if (readers.uploaded_at(r) or first) >= first]
    return kept, first.isoformat(timespec="seconds")


def index_state(index: ScanIndex, zoo_all: list[readers.Listed], referred: str) -> dict[str, str | None]:
    """The newest release of each project whose new release moves a plain install (``plain_install.MOVERS``)."""
    from matrix.scan.terms import ScanError

    out: dict[str, str | None] = {}
    for project in plain_install.MOVERS:
        try:
            rows = zoo_all if project == referred else [readers.Listed(r, None) for r in index.releases(project)[0]]
        except ScanError:
            rows = []
        live = [r.version for r in rows if not r.release.yanked]
        out[project] = max(live, key=Version) if live else None
    return out


def plain_pairs(t: PairTarget, urows: list[dict[str, Any]], window: set[str], zoo_all: list[readers.Listed],
                want: Want, fetcher: Fetcher, workers: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The plain-install pair of each unsloth release whose pick lies outside the zoo window, judged alone."""
    need = sorted({u["plain_install"]["zoo"] for u in urows if u["plain_install"].get("zoo")} - window, key=Version)
    rows = [r for r in zoo_all if r.version in need and r.release.pick() is not None]
    got = dict(zip([r.version for r in rows], readers.read_all([(r, want) for r in rows], fetcher, workers, log),
                   strict=True))
    out = []
    for u in urows:
        z = u["plain_install"].get("zoo")
        if z not in got:
            continue
        base = {"unsloth": u["version"], "zoo": z, "admitted": metadata_caps.admits(u.get("plain"), z),
                "class": None, "plain_only": True}
        table, refs = got[z].get("analysis"), u["refs"]
        if table is None or refs is None:
            out.append({**base, "verdict": "unknown", "reason": got[z].get("error") or u.get("error") or "not read"})
        else:
            out.append({**base, **grid.trimmed(t.judge(refs, t.prepare(table)))})
    return out


def run(opts: HistoryOptions, cache: Path | None = None, index: ScanIndex | None = None,
        log: Callable[[str], None] = print, now: datetime | None = None,
        resolver: plain_install.Resolver | None = None) -> dict[str, Any]:
    """The history document (``history.json``); ``resolver`` replaces uv for the plain install (tests). The
    readers' worker processes are stopped when it returns or fails."""
    try:
        return _run(opts, cache, index, log, now, resolver)
    finally:
        readers.close_pool()


def _run(opts: HistoryOptions, cache: Path | None, index: ScanIndex | None, log: Callable[[str], None],
         now: datetime | None, resolver: plain_install.Resolver | None) -> dict[str, Any]:
    started = time.monotonic()
    check_id, t = readers.pair_target()
    cache = cache or scan_cache_dir()
    index = index or ScanIndex(IndexClient(), cache=cache, offline=opts.offline)
    fetcher = Fetcher(cache, index.client.http)
    key = readers.reader_key(t)
    uns_all = readers.listed(index, t.referrer)
    zoo_all = readers.listed(index, t.referred)
    uns = readers.window(uns_all, _spec(opts.unsloth, "--unsloth"), opts.everything, now)
    zoo = readers.window(zoo_all, _spec(opts.zoo, "--zoo"), opts.everything, now)
    since = None
    if opts.everything and not opts.unsloth:
        uns, since = since_zoo(uns, zoo_all)
    log(f"history: {len(uns)} {t.referrer} x {len(zoo)} {t.referred} release(s) = {len(uns) * len(zoo)} pair(s)")
    state = index_state(index, zoo_all, t.referred) if opts.resolve else {}  # --floor-only: no index read for it
    if opts.resolve and resolver is None and not opts.offline:
        resolver = plain_install.resolve_with_uv(t.referrer, t.referred)
    uw = readers.want(t.referrer, t.references, key)
    zw = readers.want(t.referred, t.definitions, key)
    phases: dict[str, float] = {}

    def phase(name: str) -> None:  # when each phase ended, in seconds from the start (the bench prints them)
        phases[name] = round(time.monotonic() - started, 1)

    with ThreadPoolExecutor(max_workers=1) as background:  # uv resolves while the wheels are read
        resolving = background.submit(
            plain_install.resolve_all, [u.version for u in uns], project=t.referrer, state=state, cache=cache,
            resolver=resolver if opts.resolve else None, offline=opts.offline, log=log, now=now)
        got = readers.read_all([(z, zw) for z in zoo] + [(u, uw) for u in uns], fetcher, opts.workers, log,
                               parse=False)
        phase("read")
        answers = resolving.result()
        phase("resolve")
    readers.close_pool()  # (plain_pairs below starts another for the few releases it reads)
    got = readers.parsed(got)  # now that uv and the workers are gone (see read_all)
    zrows = [{"version": z.version, "uploaded": z.uploaded, "sha256": g.get("sha256"),
              "table": g.get("analysis"), "error": g.get("error"),
              "caps": metadata_caps.zoo_caps(g.get("metadata"))} for z, g in zip(zoo, got, strict=False)]
    current = [str(r.release.version) for r in zoo_all if not r.release.yanked]
    urows = []
    for u, g in zip(uns, got[len(zoo):], strict=True):
        meta = metadata_caps.unsloth_side(g.get("metadata")) if "error" not in g else {
            "known": False, "plain": None, "floor": None}
        pick = metadata_caps.plain_pick(meta["plain"], current)
        answer = answers[u.version]
        if answer["resolved_by"] == "floor-only":
            answer = {**answer, "zoo": pick}
        urows.append({"version": u.version, "uploaded": u.uploaded, "sha256": g.get("sha256"),
                      "refs": g.get("analysis"), "error": g.get("error"), **meta,
                      "plain_pick": pick, "plain_install": answer})
    judged = grid.judge_all(t, urows, zrows, RowCache(cache, key, zrows))
    phase("judge")
    extra = (plain_pairs(t, urows, {z["version"] for z in zrows}, zoo_all, zw, fetcher, opts.workers, log)
             if opts.plain_pairs else [])
    readers.close_pool()  # the reading is over: the workers' memory goes back before the scan columns
    phase("plain_pairs")
    lines = [grid.release_line(u["version"], judged["pairs"]) for u in urows]
    scans = (hazards.scan_columns([z["version"] for z in zrows], [u["version"] for u in urows], opts.offline,
                                  cache, log) if opts.scan
             else {checks.info(n).id: {"na": "n/a: --no-scan"} for n in checks.REGISTRY})
    phase("scan_columns")
    scans.pop(check_id, None)
    doc = {
        "schema": SCHEMA, "check": check_id,
        "generated": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "index": redact(index.url),
        "options": {"unsloth": opts.unsloth, "zoo": opts.zoo, "all": opts.everything, "unsloth_since": since},
        "newest_zoo": max(current, key=Version) if current else None,
        "plain_install": {"python": plain_install.PYTHON, "platform": plain_install.PLATFORM, "index_state": state,
                          "cache": f"per release, keyed by the index state above; stale after "
                                   f"{plain_install.TTL.days} days"},
        "unsloth": [{k: v for k, v in u.items() if k != "refs"} | {
            "references": len((u["refs"] or {}).get("refs", [])),
            "import_time_files": len((u["refs"] or {}).get("import_time_files", []))} for u in urows],
        "zoo": [{k: v for k, v in z.items() if k != "table"} | {
            "modules": len((z["table"] or {}).get("modules", {}))} for z in zrows],
        "pairs": judged["pairs"], "plain_pairs": extra, "classes": judged["classes"], "lines": lines,
        "scan": scans,
        "runtime": ("static only: `--confirm` installs the boundary pairs and one pair per equivalence class "
                    "and imports unsloth on CPU; cells record `import unsloth` with its exception chain"),
        "warnings": list(index.warnings),
        "stats": {**fetcher.stats, "seconds": round(time.monotonic() - started, 2), "phases_s": phases,
                  "classes": len(judged["classes"]), "pairs": len(judged["pairs"])},
    }
    return atlas.attach(doc)
