"""Every pair of the window judged, grouped into equivalence classes, and one line per unsloth release.

A class is the same unsloth reference list (lines aside) x the same zoo symbol table: its verdict is
computed once; a pair that is not ``compatible`` is judged again with its own reference list so that its
evidence carries its own file:line. Each zoo table is prepared once (the reader memoises a path's answer),
so the whole grid costs one lookup per distinct reference path and zoo release.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from packaging.version import Version

from matrix.scan.history.metadata_caps import admits
from probes.checks.capabilities import PairTarget

EVIDENCE_NAMES = 8  # missing names kept per pair in the JSON
EVIDENCE_PLACES = 3  # unsloth places kept per missing name


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def refs_class(refs: dict[str, Any]) -> str:
    """The class of a reference list: what it references, how, and where it is guarded (lines aside)."""
    seen = sorted({(r["path"], r["kind"], r["modules"], r["file"], r["function"] is None, tuple(r["swallowed"]),
                    r["branch"] is None, r["import_time"]) for r in refs["refs"]})
    return _digest([seen, sorted(refs.get("unparsed", []))])


def table_class(table: dict[str, Any]) -> str:
    return _digest(table)


def breaks_at(pair: dict[str, Any]) -> str | None:
    """Where an incompatible pair breaks: the judgment's ``breaks_at`` (``import`` or ``model-load``), None for
    any other verdict. A pair judged before the judgment had the key broke at import (that was what
    ``incompatible`` meant), so one without it reads ``import``."""
    if pair.get("verdict") != "incompatible":
        return None
    return pair.get("breaks_at") or "import"


def breaking(pair: dict[str, Any]) -> list[dict[str, Any]]:
    """The missing names that break the pair where it breaks (all of them when none matches)."""
    where = breaks_at(pair)
    missing = pair.get("missing", [])
    return [m for m in missing if m.get("breaks") == where] or missing


def trimmed(result: dict[str, Any]) -> dict[str, Any]:
    """A pair's evidence cut to a size a 10,000-pair JSON can carry (the counts stay whole)."""
    return {"verdict": result["verdict"], "breaks_at": result.get("breaks_at"), "missing_count": len(result["missing"]),
            "unknown_count": len(result["unknown"]),
            "missing": [{**m, "where": m["where"][:EVIDENCE_PLACES]} for m in result["missing"][:EVIDENCE_NAMES]],
            "unknown": [{**u, "where": u["where"][:1]} for u in result["unknown"][:3]]}


def _interned(entries: list[dict[str, Any]], seen: dict[str, Any]) -> list[dict[str, Any]]:
    return [seen.setdefault(json.dumps(e, sort_keys=True), e) for e in entries]


class RowStore(Protocol):
    """Where a whole row of judged pairs (one unsloth release against the window) is kept between runs."""

    def get(self, unsloth: dict[str, Any]) -> list[dict[str, Any]] | None: ...

    def put(self, unsloth: dict[str, Any], pairs: list[dict[str, Any]]) -> None: ...


def judge_all(t: PairTarget, uns: list[dict[str, Any]], zoo: list[dict[str, Any]],
              rows: RowStore | None = None) -> dict[str, Any]:
    """``{"pairs": [...], "classes": [...]}`` for rows ``{"version", "refs"|None, "plain", ...}`` and
    ``{"version", "table"|None, ...}`` (a row without its analysis gives ``unknown`` with the read error).
    ``rows``: a store of whole rows (a warm run judges nothing; see ``history_run.RowCache``)."""
    prepared: dict[str, Any] = {}
    zcls = {z["version"]: table_class(z["table"]) for z in zoo if z.get("table") is not None}
    by_class: dict[tuple[str, str], dict[str, Any]] = {}
    seen: dict[str, Any] = {}  # one object per distinct evidence entry: ``--all``'s 50,000 pairs repeat a few thousand
    pairs = []
    for u in uns:
        cached = rows.get(u) if rows is not None else None
        if cached is not None:
            for p in cached:
                for k in ("missing", "unknown"):
                    if k in p:
                        p[k] = _interned(p[k], seen)
            pairs += cached
            continue
        row = []
        ucls = refs_class(u["refs"]) if u.get("refs") is not None else ""
        for z in zoo:
            base = {"unsloth": u["version"], "zoo": z["version"], "admitted": admits(u.get("plain"), z["version"])}
            if u.get("refs") is None or z.get("table") is None:
                why = u.get("error") or z.get("error") or "not read"
                row.append({**base, "verdict": "unknown", "reason": why, "class": None})
                continue
            if z["version"] not in prepared:
                prepared[z["version"]] = t.prepare(z["table"])
            key = (ucls, zcls[z["version"]])
            result = by_class.get(key)
            if result is None:
                result = by_class[key] = t.judge(u["refs"], prepared[z["version"]])
            elif result["verdict"] != "compatible":
                result = t.judge(u["refs"], prepared[z["version"]])  # its own lines
            tr = trimmed(result)
            tr["missing"], tr["unknown"] = _interned(tr["missing"], seen), _interned(tr["unknown"], seen)
            row.append({**base, **tr, "class": seen.setdefault(f"{key[0]}x{key[1]}", f"{key[0]}x{key[1]}")})
        if rows is not None and u.get("refs") is not None:
            rows.put(u, row)
        pairs += row
    return {"pairs": pairs, "classes": classes_of(pairs)}


def classes_of(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each class with its verdict (its first pair's), its size and its first pair."""
    out: dict[str, dict[str, Any]] = {}
    for p in pairs:
        c = p.get("class")
        if c is None:
            continue
        if c not in out:
            out[c] = {"id": c, "verdict": p["verdict"], "pairs": 0, "example": [p["unsloth"], p["zoo"]]}
        out[c]["pairs"] += 1
    return list(out.values())


def _segments(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for p in rows:
        if out and out[-1][0] == p["verdict"]:
            out[-1][1].append(p)
        else:
            out.append((p["verdict"], [p]))
    return out


def _span(ps: list[dict[str, Any]]) -> str:
    return ps[0]["zoo"] if len(ps) == 1 else f"{ps[0]['zoo']} … {ps[-1]['zoo']}"


def release_line(version: str, pairs: list[dict[str, Any]]) -> str:
    """"works with zoo A … B; from C: missing `name` (feature)" for one unsloth release, zoo ascending."""
    rows = sorted((p for p in pairs if p["unsloth"] == version), key=lambda p: Version(p["zoo"]))
    works = [_span(ps) for v, ps in _segments(rows) if v == "compatible"]
    parts = [f"works with zoo {', '.join(works)}" if works else "works with no zoo release in the window"]
    for verdict, ps in _segments(rows):
        if verdict == "compatible":
            continue
        first = ps[0]
        named = [f"`{m['name'].rsplit('.', 1)[-1]}` ({', '.join(m['features'][:2])})"
                 for m in first.get("missing", [])[:2]]
        what = ", ".join(named) if named else (first.get("reason") or "; ".join(
            u["name"] for u in first.get("unknown", [])[:2]) or "-")
        more = first.get("missing_count", 0) - len(named)
        tail = f" and {more} more" if more > 0 else ""
        label = f"zoo {_span(ps)}" if len(ps) > 1 else f"zoo {ps[0]['zoo']}"
        parts.append(f"{label}: {verdict}" + (f", missing {what}{tail}" if named else f" ({what})"))
    return f"unsloth {version}: " + "; ".join(parts)
