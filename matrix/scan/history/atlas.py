"""The atlas: one line per unsloth release, every source of the history merged along the zoo axis.

Per pair it joins the pair reader's verdict (names and calls: works, degraded, breaks at import or at model
load), each other check's scan verdict for that zoo release (its hazard, in the words of the check's own
``INFO.zoo_meaning``, which the scan column carries as ``meaning``, and whether the scan's runtime run
confirmed it), and whether this unsloth release carries that check's guard (the scan's unsloth side).
Consecutive zoo releases with the same verdict, the same place of breaking and the same hazards (none for a
pair that breaks) form one span; the line lists the spans newest first, the newest span that works
with no known hazard as the one to pin:

    unsloth X: pin zoo A … B (works, no known hazard); zoo C … D works but <hazard> (<check>; no guard in X);
    zoo E … F breaks at import (`name`); a plain install gets zoo B today

Generic: it iterates the document's scan columns (the registry's checks with a scan target) and names none.
The sources keep their own evidence in ``history.json`` (``pairs``, ``scan``); ``atlas`` holds the spans.
"""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from matrix.scan.history.grid import breaking, breaks_at

HARMLESS = ("fixed", "absent")  # scan verdicts that are no hazard
BREAKS = {"import": "breaks at import", "model-load": "breaks at model load"}


def guard_words(state: str, unsloth: str) -> str:
    words = {"present": f"guard present in {unsloth}", "absent": f"no guard in {unsloth}",
             "unknown": f"guard unknown in {unsloth}", "n/a": "no guard exists"}
    return words.get(state, f"guard not read for {unsloth}")


def hazards_at(scan: dict[str, Any], unsloth: str, zoo: str) -> tuple[tuple[str, str, str], ...]:
    """``(check id, scan verdict, guard state)`` of each check whose scan verdict for ``zoo`` is a hazard."""
    out = []
    for cid, col in scan.items():
        verdict = col.get("zoo", {}).get(zoo)
        if verdict is None or verdict in HARMLESS:
            continue
        guard = "n/a" if "guard_na" in col else col.get("guard", {}).get(unsloth, {}).get("state", "unread")
        out.append((cid, verdict, guard))
    return tuple(out)




def spans(unsloth: str, pairs: list[dict[str, Any]], scan: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of one unsloth release (``pairs``: its own pairs), zoo ascending (see the module docstring)."""
    rows = sorted(pairs, key=lambda p: Version(p["zoo"]))
    out: list[dict[str, Any]] = []
    for p in rows:
        # a pair that breaks never reaches a hazard: its spans merge whatever the scan says
        hz = () if p["verdict"] == "incompatible" else hazards_at(scan, unsloth, p["zoo"])
        state = (p["verdict"], breaks_at(p), hz)
        if out and out[-1]["state"] == state:
            out[-1]["to"], out[-1]["last"] = p["zoo"], p
            continue
        out.append({"state": state, "from": p["zoo"], "to": p["zoo"], "last": p})
    return [{"from": s["from"], "to": s["to"], "verdict": s["state"][0], "breaks_at": s["state"][1],
             "hazards": [{"check": c, "verdict": v, "guard": g, "meaning": scan[c].get("meaning", {}).get(v),
                          "confirmed": [z for z in scan[c].get("confirmed", {}) if _within(z, s["from"], s["to"])]}
                         for c, v, g in s["state"][2]],
             "names": [m["name"] for m in breaking(s["last"])[:2]],
             "features": [f for m in breaking(s["last"])[:2] for f in m.get("features", [])[:1]],
             "reason": s["last"].get("reason")} for s in out]


def _within(z: str, low: str, high: str) -> bool:
    return Version(low) <= Version(z) <= Version(high)


def _zoo(s: dict[str, Any]) -> str:
    return f"zoo {s['from']}" if s["from"] == s["to"] else f"zoo {s['from']} … {s['to']}"


def _hazard_text(h: dict[str, Any], unsloth: str) -> str:
    how = f", runtime-confirmed at zoo {', '.join(h['confirmed'][:2])}" if h["confirmed"] else ""
    return f"{h.get('meaning') or h['verdict']} ({h['check']}{how}; {guard_words(h['guard'], unsloth)})"


def span_text(s: dict[str, Any], unsloth: str) -> str:
    names = ", ".join(f"`{n.rsplit('.', 1)[-1]}`" for n in s["names"])
    if s["verdict"] == "incompatible":
        return f"{_zoo(s)} {BREAKS.get(s['breaks_at'] or '', 'breaks')} ({names or '-'})"
    if s["verdict"] in ("unknown", "inconsistent"):
        return f"{_zoo(s)} {s['verdict']} ({s['reason'] or names or '-'})"
    head = f"{_zoo(s)} works" if s["verdict"] == "compatible" else (
        f"{_zoo(s)} works degraded (missing {names}: {', '.join(dict.fromkeys(s['features'])) or '-'})")
    if not s["hazards"]:
        return f"{head}, no known hazard"
    return f"{head} but " + "; and ".join(_hazard_text(h, unsloth) for h in s["hazards"])


def line(unsloth: str, spans_: list[dict[str, Any]], plain: dict[str, Any] | None = None) -> str:
    """The atlas line of one unsloth release from its spans (ascending), newest span first."""
    pin = next((s for s in reversed(spans_) if s["verdict"] == "compatible" and not s["hazards"]), None)
    parts = []
    for s in reversed(spans_):
        parts.append(f"pin {_zoo(s)} (works, no known hazard)" if s is pin else span_text(s, unsloth))
    if pin is None:
        parts.insert(0, "no zoo release of the window works with no known hazard")
    if plain and plain.get("zoo"):
        parts.append(f"a plain install gets zoo {plain['zoo']} today ({plain.get('resolved_by')})")
    elif plain and plain.get("na"):
        parts.append(f"a plain install: {plain['na']}")
    return f"unsloth {unsloth}: " + "; ".join(parts)


def attach(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``atlas``: per unsloth release its spans and its line (recomputed after ``--confirm``)."""
    scan = {cid: col for cid, col in doc.get("scan", {}).items() if "zoo" in col}
    by: dict[str, list[dict[str, Any]]] = {}
    for p in doc["pairs"]:
        by.setdefault(p["unsloth"], []).append(p)
    out = []
    for u in doc["unsloth"]:
        ss = spans(u["version"], by.get(u["version"], []), scan)
        out.append({"unsloth": u["version"], "line": line(u["version"], ss, u.get("plain_install")), "spans": ss})
    return {**doc, "atlas": out}
