"""Release policy: which releases count, the zoo timeline, floors, exposure, and what to recommend.

Yanked releases are listed but never candidates (unless asked). The
timeline's ``fixed_since`` is the first fixed release after the last release
that is vulnerable or inconsistent: no release from it on is known to be
vulnerable, so it is the only boundary a recommendation may point at
(``first_fixed`` can sit before a regression). ``recommended_zoo`` is that
boundary with how it was established (``runtime`` or ``static-only``), for
the gate, ``pinned`` and every report.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from matrix.index import Release
from matrix.scan.terms import ScanError

# Verdicts that forbid recommending any release at or before them.
UNSAFE = frozenset({"vulnerable", "inconsistent"})


def parse_spec(value: str, flag: str) -> SpecifierSet:
    try:
        return SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise ScanError(f"{flag} {value!r}: not a valid version specifier set (e.g. '>=2026.9,<2026.11'): "
                        f"{exc}") from exc


def select(releases: list[Release], spec: SpecifierSet) -> list[Release]:
    """Releases the spec selects. Yanked ones stay listed (marked); ``timeline`` and floors skip them."""
    return [r for r in releases if not spec or spec.contains(r.version, prereleases=True)]


@functools.lru_cache(maxsize=4096)
def _version(text: str) -> Version:
    return Version(text)


def considered(zoo: list[dict[str, Any]], include_yanked: bool) -> list[dict[str, Any]]:
    return sorted((z for z in zoo if include_yanked or not z["yanked"]), key=lambda z: _version(z["version"]))


def timeline(zoo: list[dict[str, Any]], include_yanked: bool) -> dict[str, Any]:
    """First fixed release, ``fixed_since`` (see the module docstring), regressions and the boundaries."""
    rows = considered(zoo, include_yanked)
    first_fixed = None
    last_fixed: str | None = None
    regressions = []
    for z in rows:
        if z["verdict"] == "fixed":
            first_fixed = first_fixed or z["version"]
            last_fixed = z["version"]
        elif z["verdict"] == "vulnerable" and last_fixed is not None:
            regressions.append({"version": z["version"], "after_fixed": last_fixed})
            last_fixed = None
    unsafe = [i for i, z in enumerate(rows) if z["verdict"] in UNSAFE]
    after = rows[unsafe[-1] + 1:] if unsafe else rows
    since = next((z for z in after if z["verdict"] == "fixed"), None)
    vulnerable = [z for z in rows if z["verdict"] == "vulnerable"]
    unknown_after = [z["version"] for z in after if since is not None and z["verdict"] == "unknown"
                     and _version(z["version"]) > _version(since["version"])]
    return {"first_fixed": first_fixed, "fixed_since": since["version"] if since else None,
            "fixed_since_confirmed_by": since.get("confirmed_by", "static-only") if since else None,
            "last_vulnerable": vulnerable[-1]["version"] if vulnerable else None,
            "last_vulnerable_confirmed_by": vulnerable[-1].get("confirmed_by", "static-only") if vulnerable else None,
            "unknown_after_fixed_since": unknown_after, "regressions": regressions}


def boundaries(zoo: list[dict[str, Any]], include_yanked: bool) -> list[str]:
    """Both sides of every change between vulnerable and fixed (ignoring absent/unknown in between), ascending."""
    rows = [z for z in considered(zoo, include_yanked) if z["verdict"] in ("vulnerable", "fixed")]
    out: list[str] = []
    for a, b in itertools.pairwise(rows):
        if a["verdict"] != b["verdict"]:
            out += [v for v in (a["version"], b["version"]) if v not in out]
    return out


@dataclass(frozen=True)
class Recommendation:
    """The zoo release to recommend: ``fixed_since``, and how its verdict was established."""

    version: str
    confirmed_by: str  # runtime | static-only

    def requirement(self) -> str:
        return f"unsloth_zoo>={self.version}"

    def words(self) -> str:
        how = ("confirmed by running the kernel" if self.confirmed_by == "runtime"
               else "static reading only; `nox -s scan -- --confirm` runs it")
        return f"{self.requirement()} (no vulnerable release from it on, per the scan; {how})"


def recommended_zoo(doc: dict[str, Any] | None) -> Recommendation | None:
    """``fixed_since`` of a scan document, or None when the scan found no release safe to recommend."""
    t = (doc or {}).get("timeline") if isinstance(doc, dict) else None
    if not isinstance(t, dict) or not isinstance(t.get("fixed_since"), str):
        return None
    return Recommendation(t["fixed_since"], str(t.get("fixed_since_confirmed_by") or "static-only"))


def admitted_floor(spec: str, zoo: list[dict[str, Any]], include_yanked: bool) -> dict[str, Any] | None:
    """Lowest zoo release the specifier admits (yanked ones only when asked), with its verdict."""
    by_version = {_version(z["version"]): z for z in zoo if include_yanked or not z["yanked"]}
    # filter() follows PEP 440: pre-releases only when named or when nothing else matches.
    admitted = [by_version[v] for v in sorted(SpecifierSet(spec).filter(by_version))]
    if not admitted:
        return None
    floor = admitted[0]
    return {"version": floor["version"], "verdict": floor["verdict"],
            "admits_vulnerable": [z["version"] for z in admitted if z["verdict"] in UNSAFE]}


def exposure(floor: dict[str, Any] | None, guard: str, required: bool = True) -> str:
    """``exposed`` / ``guarded`` / ``safe`` / ``not-required`` / ``unknown`` for one admitted floor and guard state."""
    if not required:
        return "not-required"
    if floor is None:
        return "unknown"
    if floor["verdict"] in ("fixed", "absent"):
        return "safe"
    if floor["verdict"] != "vulnerable":
        return "unknown"
    # n/a: the check names no guard, none exists for its kernel, so nothing can shield a vulnerable floor
    return {"present": "guarded", "absent": "exposed", "n/a": "exposed"}.get(guard, "unknown")
