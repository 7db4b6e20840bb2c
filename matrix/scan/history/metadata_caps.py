"""What the wheels' core metadata says about a pair: unsloth's zoo floor, whether a plain install admits the
pair, the zoo release a plain install picks today, and zoo's own caps on torch, transformers and TRL."""

from __future__ import annotations

from email.parser import HeaderParser
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from matrix.scan.unsloth import zoo_requirements

CAPPED = ("torch", "transformers", "trl")
UPPER = ("<", "<=", "==", "~=", "===")


def unsloth_side(metadata: str | None) -> dict[str, Any]:
    """``{"known", "plain": spec or None, "floor": version or None}`` (the floor: a ``>=``/``==`` lower bound)."""
    req = zoo_requirements(metadata)
    plain = req.get("plain")
    floor = None
    if plain:
        lows = [s.version for s in SpecifierSet(plain) if s.operator in (">=", "==", "~=", ">")]
        floor = max(lows, key=Version) if lows else None
    return {"known": req["known"], "plain": plain, "floor": floor}


def admits(plain: str | None, zoo_version: str) -> bool:
    """Does a plain ``pip install unsloth==X`` allow this zoo (no requirement: any zoo)?"""
    return plain is None or SpecifierSet(plain).contains(zoo_version, prereleases=True)


def plain_pick(plain: str | None, zoo_versions: list[str]) -> str | None:
    """The newest zoo release a plain install resolves to today (``zoo_versions``: every non-yanked one)."""
    ok = [v for v in zoo_versions if admits(plain, v)]
    return max(ok, key=Version) if ok else None


def zoo_caps(metadata: str | None) -> dict[str, str]:
    """zoo's requirements on torch, transformers and TRL in a plain install, those with an upper bound only."""
    if metadata is None:
        return {}
    env = {**default_environment(), "extra": ""}
    out: dict[str, str] = {}
    for line in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or []:
        if not line.strip().lower().startswith(CAPPED):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name not in CAPPED or (req.marker is not None and not req.marker.evaluate(env)):
            continue
        if any(s.operator in UPPER for s in req.specifier):
            out[name] = str(req.specifier)
    return out
