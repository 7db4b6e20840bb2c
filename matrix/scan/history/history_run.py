"""The history as one run: list both projects -> pick the window -> read each release once -> judge every
pair -> metadata (floors, plain-install picks, zoo caps) -> the other checks' scan verdicts -> one document.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from matrix.errors import SkewmatrixError
from matrix.index import IndexClient, redact
from matrix.scan.cache import ScanIndex
from matrix.scan.fetch import Fetcher
from matrix.scan.history import grid, metadata_caps, readers
from matrix.settings import scan_cache_dir
from probes import checks

SCHEMA = "skewmatrix.scan.history/1"


@dataclass(frozen=True)
class HistoryOptions:
    unsloth: str = ""
    zoo: str = ""
    everything: bool = False  # --all: every release, not the last 12 months
    workers: int = 6
    offline: bool = False
    scan: bool = True  # the other checks' scan verdicts per zoo release


def _spec(value: str, flag: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise SkewmatrixError(f"{flag} {value!r}: not a PEP 440 specifier set (e.g. '>=2026.1'): {exc}") from exc
    return value


def scan_columns(zoo_versions: list[str], offline: bool, cache: Path, log: Callable[[str], None]
                 ) -> dict[str, Any]:
    """Per check with a scan target, its scan verdict per zoo release (read through ``matrix.scan``'s cache)."""
    from matrix import scan

    out: dict[str, Any] = {}
    names = checks.with_capability("scan")
    for name in checks.REGISTRY:
        cid = checks.info(name).id
        if name not in names:
            out[cid] = {"na": checks.lacks(name, "scan")}
            continue
        if not zoo_versions:
            out[cid] = {"zoo": {}}
            continue
        low, high = min(zoo_versions, key=Version), max(zoo_versions, key=Version)
        doc = scan.run(scan.ScanOptions(zoo=f">={low},<={high}", skip_unsloth=True, offline=offline, check=cid),
                       cache=cache, log=lambda _m: None)
        out[cid] = {"zoo": {z["version"]: z["verdict"] for z in doc["zoo"] if z["version"] in zoo_versions}}
        log(f"scan verdicts of {cid}: {len(out[cid]['zoo'])} zoo release(s)")
    return out


def run(opts: HistoryOptions, cache: Path | None = None, index: ScanIndex | None = None,
        log: Callable[[str], None] = print, now: datetime | None = None) -> dict[str, Any]:
    """The history document (``history.json``)."""
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
    log(f"history: {len(uns)} {t.referrer} x {len(zoo)} {t.referred} release(s) = {len(uns) * len(zoo)} pair(s)")
    uw = readers.want(t.referrer, t.references, key)
    zw = readers.want(t.referred, t.definitions, key)
    got = readers.read_all([(z, zw) for z in zoo] + [(u, uw) for u in uns], fetcher, opts.workers, log)
    zrows = [{"version": z.version, "uploaded": z.uploaded, "sha256": g.get("sha256"),
              "table": g.get("analysis"), "error": g.get("error"),
              "caps": metadata_caps.zoo_caps(g.get("metadata"))} for z, g in zip(zoo, got, strict=False)]
    current = [str(r.release.version) for r in zoo_all if not r.release.yanked]
    urows = []
    for u, g in zip(uns, got[len(zoo):], strict=True):
        meta = metadata_caps.unsloth_side(g.get("metadata")) if "error" not in g else {
            "known": False, "plain": None, "floor": None}
        urows.append({"version": u.version, "uploaded": u.uploaded, "sha256": g.get("sha256"),
                      "refs": g.get("analysis"), "error": g.get("error"), **meta,
                      "plain_pick": metadata_caps.plain_pick(meta["plain"], current)})
    judged = grid.judge_all(t, urows, zrows)
    lines = [grid.release_line(u["version"], judged["pairs"]) for u in urows]
    scans = (scan_columns([z["version"] for z in zrows], opts.offline, cache, log) if opts.scan
             else {checks.info(n).id: {"na": "n/a: --no-scan"} for n in checks.REGISTRY})
    scans.pop(check_id, None)
    return {
        "schema": SCHEMA, "check": check_id,
        "generated": (now or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        "index": redact(index.url),
        "options": {"unsloth": opts.unsloth, "zoo": opts.zoo, "all": opts.everything},
        "newest_zoo": max(current, key=Version) if current else None,
        "unsloth": [{k: v for k, v in u.items() if k != "refs"} | {
            "references": len((u["refs"] or {}).get("refs", [])),
            "import_time_files": len((u["refs"] or {}).get("import_time_files", []))} for u in urows],
        "zoo": [{k: v for k, v in z.items() if k != "table"} | {
            "modules": len((z["table"] or {}).get("modules", {}))} for z in zrows],
        "pairs": judged["pairs"], "classes": judged["classes"], "lines": lines, "scan": scans,
        "runtime": ("static only: `--confirm` installs the boundary pairs and one pair per equivalence class "
                    "and imports unsloth on CPU; cells record `import unsloth` with its exception chain"),
        "warnings": list(index.warnings),
        "stats": {**fetcher.stats, "seconds": round(time.monotonic() - started, 2),
                  "classes": len(judged["classes"]), "pairs": len(judged["pairs"])},
    }
