"""The scan's static verdicts against the cells' dynamic ones (``attach_scan`` in the pipeline).

A cell's zoo state for the scanned check (the scan document's ``check``) comes from its classification when
the report has one (``verdicts[check id].zoo``), else it is computed from the
cell's evidence with the check's own two-detector rule.
"""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from matrix.scan.zoo import scanned
from probes.checks.vocabulary import zoo_state


def _dynamic_zoo(cell: dict[str, Any], cid: str) -> str:
    verdict = (cell.get("verdicts") or {}).get(cid)
    if isinstance(verdict, dict) and verdict.get("zoo"):
        return str(verdict["zoo"])
    section = (cell.get("checks") or {}).get(cid)
    if not isinstance(section, dict):
        return "unknown"
    return zoo_state(section)[0].value


def compare_with_cells(scan: dict[str, Any], cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scan verdict vs dynamic verdict for every cell whose zoo build is a PyPI release the scan classified.

    ``status``: ``consistent``, ``inconsistent`` (the verdicts differ, or the cell's own detectors
    disagree), ``not-comparable`` (the cell could not decide: unknown), or ``different-build`` (the cell's
    digest is not the sha256 of any file of that release on the index).
    """
    cid = str(scan.get("check") or scanned().id)  # a scan of the default check before "check" was written
    by_version = {z["version"]: z for z in scan.get("zoo", [])}
    out = []
    for cell in cells:
        build = (cell.get("builds") or {}).get("zoo") or {}
        if build.get("source") != "pypi" or not build.get("version"):
            continue
        try:
            key = str(Version(str(build["version"])))
        except InvalidVersion:
            continue
        z = by_version.get(key)
        if z is None or z["verdict"] == "unknown":
            continue
        dyn = _dynamic_zoo(cell, cid)
        row = {"cell_id": cell.get("cell_id"), "zoo_version": key, "scan": z["verdict"], "dynamic": dyn,
               "scan_file": (z.get("file") or {}).get("filename"),
               "scan_confirmed_by": z.get("confirmed_by", "static-only")}
        digest = build.get("digest")
        scan_sha = (z.get("file") or {}).get("sha256")
        if digest and scan_sha and digest != scan_sha and digest not in (z.get("all_sha256") or []):
            row.update(status="different-build",
                       reason=f"cell digest {digest[:12]} is not the scanned file's sha256 {scan_sha[:12]}")
        elif dyn == "unknown":
            row.update(status="not-comparable", reason="the cell could not decide the zoo state")
        elif dyn == z["verdict"]:
            row.update(status="consistent", reason=f"both say {dyn}")
        else:
            row.update(status="inconsistent", reason=f"scan says {z['verdict']} ({z['reason']}); cell says {dyn}")
        out.append(row)
    return out
