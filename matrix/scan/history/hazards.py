"""The other checks' side of the history: each check's scan verdict per zoo release, and per unsloth release
whether it carries that check's guard, read through ``matrix.scan`` (its cache) for every registered check
with a scan target (a check without one is ``n/a`` with the registry's reason).

Per check the column keeps its own evidence: ``zoo`` (version -> the scan's static verdict), ``confirmed``
(the releases whose verdict a runtime run established, from the scan's ``confirmed_by``), ``timeline`` (the
scan's boundary: ``fixed_since``, ``last_vulnerable``, each with how it was established), ``declared_fix``
(the check's ``FIX``, against that boundary), ``meaning`` (its own words per verdict, ``INFO.zoo_meaning``),
and ``guard`` (unsloth version -> ``{"state", "evidence"}`` from the scan's unsloth side) or ``guard_na`` when
the check's scan target names no guard.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import Version

from probes import checks

TIMELINE_KEYS = ("fixed_since", "fixed_since_confirmed_by", "last_vulnerable", "last_vulnerable_confirmed_by")


def _range(versions: list[str]) -> str:
    return f">={min(versions, key=Version)},<={max(versions, key=Version)}"


def scan_columns(zoo_versions: list[str], unsloth_versions: list[str], offline: bool, cache: Path,
                 log: Callable[[str], None]) -> dict[str, Any]:
    """Per check id, its column (see the module docstring)."""
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
        guarded = checks.capability(name, "scan").guard is not None and bool(unsloth_versions)
        doc = scan.run(scan.ScanOptions(zoo=_range(zoo_versions), skip_unsloth=not guarded, offline=offline,
                                        unsloth=_range(unsloth_versions) if guarded else "", check=cid),
                       cache=cache, log=lambda m, cid=cid: log(f"scan {cid}: {m}"))  # progress of reads
        rows = [z for z in doc["zoo"] if z["version"] in zoo_versions]
        col: dict[str, Any] = {
            "zoo": {z["version"]: z["verdict"] for z in rows},
            "confirmed": {z["version"]: z["verdict"] for z in rows if z.get("confirmed_by") == "runtime"},
            "timeline": {k: doc["timeline"].get(k) for k in TIMELINE_KEYS},
            "declared_fix": doc.get("declared_fix"),
            "meaning": dict(checks.info(name).zoo_meaning)}  # the check's own words for each verdict
        if guarded:
            keep = set(unsloth_versions)
            col["guard"] = {u["version"]: {"state": u["guard"]["state"], "evidence": u["guard"]["evidence"][:1]}
                            for u in doc["unsloth"] if u["version"] in keep}
        else:
            col["guard_na"] = (f"n/a: the scan target of check {cid} names no guard (none exists for its kernel)"
                               if unsloth_versions else "n/a: no unsloth release in the window")
        out[cid] = col
        log(f"scan verdicts of {cid}: {len(col['zoo'])} zoo release(s)"
            + (f", guard in {len(col['guard'])} unsloth release(s)" if guarded else ""))
    return out
