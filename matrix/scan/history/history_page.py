"""The history document as Markdown and as an HTML heatmap (rows unsloth, columns zoo, one colour per verdict;
the newest zoo's column is what a plain install gets today). Pure functions of the document."""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

from packaging.version import Version

from matrix.scan.history import grid

COLOURS = {"compatible": "#2e7d32", "degraded": "#f9a825", "incompatible": "#c62828", "unknown": "#9e9e9e",
           "inconsistent": "#6a1b9a"}  # inconsistent: only after --confirm, static and runtime disagree
MARK = {"compatible": "✓", "degraded": "~", "incompatible": "✗", "unknown": "?", "inconsistent": "!"}
PLAIN = "what a plain install gets today"
WHERE = {"import": "import", "model-load": "model load"}
HAZARD_MARK = "corner mark: a hazard of another check (scan) and no guard present in that unsloth release"
RUNTIME_MARK = "outlined: confirmed at runtime (--confirm)"


def _grid(doc: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], dict[str, Any]]]:
    uns = sorted({p["unsloth"] for p in doc["pairs"]}, key=Version, reverse=True)
    zoo = sorted({p["zoo"] for p in doc["pairs"]}, key=Version)
    return uns, zoo, {(p["unsloth"], p["zoo"]): p for p in doc["pairs"]}


def markdown(doc: dict[str, Any]) -> str:
    counts = Counter(p["verdict"] for p in doc["pairs"])
    newest = doc.get("newest_zoo")
    out = [f"# History: {len(doc['unsloth'])} unsloth x {len(doc['zoo'])} zoo releases ({doc['check']})", "",
           "Verdicts: " + ", ".join(f"{v} {counts.get(v, 0)}" for v in COLOURS if v != "inconsistent" or counts[v])
           + f"; {doc['stats']['classes']} equivalence classes; {doc['stats']['seconds']} s.", ""]
    out += [f"Newest zoo release: {newest}.", "", *plain_section(doc), "## Atlas: one line per unsloth release", "",
            "Per pair: the names and calls verdict, each other check's hazard from the scan (its own words), and "
            "whether the unsloth release carries that check's guard; spans newest first.", ""]
    out += [f"- {a['line']}" for a in doc["atlas"]] if doc.get("atlas") else [f"- {line}" for line in doc["lines"]]
    out += ["", "## zoo caps on torch, transformers, TRL", ""]
    capped = [z for z in doc["zoo"] if z.get("caps")]
    out += [f"- zoo {z['version']}: " + ", ".join(f"{k} {v}" for k, v in sorted(z["caps"].items())) for z in capped]
    if not capped:
        out.append("- none in the window")
    out += ["", "## Other checks' scan verdicts per zoo release", ""]
    for cid, col in doc["scan"].items():
        if "na" in col:
            out.append(f"- {cid}: {col['na']}")
        else:
            c = Counter(col["zoo"].values())
            out.append(f"- {cid}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())) + _scan_tail(col))
    out += ["", f"Runtime: {doc['runtime']}", "", *confirmed_section(doc)]
    return "\n".join(out)


def _scan_tail(col: dict[str, Any]) -> str:
    """The boundary and the guards of one scan column, in words (empty for a column without them)."""
    t = col.get("timeline") or {}
    out = f"; fixed since zoo {t['fixed_since']} ({t.get('fixed_since_confirmed_by')})" if t.get("fixed_since") else ""
    if col.get("guard"):
        states = Counter(g["state"] for g in col["guard"].values())
        out += "; guard in unsloth: " + ", ".join(f"{k} {n}" for k, n in sorted(states.items()))
    elif col.get("guard_na"):
        out += f"; guard {col['guard_na']}"
    return out


def plain_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per unsloth release (newest first): the zoo a plain install gets today and that pair's verdict."""
    cell = {(p["unsloth"], p["zoo"]): p for p in [*doc["pairs"], *doc.get("plain_pairs", [])]}
    out = []
    for u in sorted(doc["unsloth"], key=lambda u: Version(u["version"]), reverse=True):
        plain = u.get("plain_install") or {"zoo": u.get("plain_pick"), "resolved_by": "floor-only"}
        p = cell.get((u["version"], plain.get("zoo") or ""))
        verdict = p["verdict"] if p else ("n/a" if not plain.get("zoo") else "unknown")
        out.append({"unsloth": u["version"], "floor": u.get("floor"), "floor_pick": u.get("plain_pick"),
                    "zoo": plain.get("zoo"), "resolved_by": plain.get("resolved_by"), "with": plain.get("with") or {},
                    "verdict": verdict, "breaks_at": grid.breaks_at(p) if p else None,
                    "names": [m["name"] for m in grid.breaking(p)[:2]] if p and verdict != "compatible" else [],
                    "why": plain.get("na") or plain.get("reason") or (None if p else "pair not judged")})
    return out


def runs(versions: list[str], order: list[str]) -> str:
    """``versions`` as spans of consecutive releases of ``order`` (ascending): "A … B (n), C"."""
    pos = {v: i for i, v in enumerate(order)}
    spans: list[list[str]] = []
    for v in sorted(versions, key=lambda v: pos[v]):
        if spans and pos[spans[-1][-1]] + 1 == pos[v]:
            spans[-1].append(v)
        else:
            spans.append([v])
    return ", ".join(s[0] if len(s) == 1 else f"{s[0]} … {s[-1]} ({len(s)})" for s in spans)


def headline(doc: dict[str, Any]) -> str:
    """How many releases a plain ``pip install unsloth==X`` breaks today, at import and at model load, and which."""
    rows = plain_rows(doc)
    order = sorted((r["unsloth"] for r in rows), key=Version)
    at = {w: [r["unsloth"] for r in rows if r["breaks_at"] == w] for w in ("import", "model-load")}
    other = Counter(r["verdict"] for r in rows if r["breaks_at"] is None)
    text = (f"A plain `pip install unsloth==X` breaks {sum(map(len, at.values()))} of {len(rows)} unsloth releases "
            f"today: {len(at['import'])} at import, {len(at['model-load'])} at model load")
    text += "".join(f"; at {w.replace('-', ' ')}: {runs(vs, order)}" for w, vs in at.items() if vs)
    return text + ". Others: " + (", ".join(f"{v} {n}" for v, n in sorted(other.items())) or "none") + "."


def plain_section(doc: dict[str, Any]) -> list[str]:
    """The first table: per unsloth release, what a plain install gets today and that pair's verdict."""
    pi = doc.get("plain_install", {})
    out = ["## What a plain install gets today", "", headline(doc), "",
           f"Resolved by `uv pip compile` of `unsloth==X` (Python {pi.get('python', '?')}, "
           f"{pi.get('platform', '?')}; cache {pi.get('cache', '-')}); `floor-only`: the newest zoo the floor "
           "admits, TRL and transformers caps ignored (the offline fallback).", "",
           "| unsloth | zoo floor | plain install gets | resolved by | with | verdict | breaks at | what breaks |",
           "|---|---|---|---|---|---|---|---|"]
    for r in plain_rows(doc):
        with_ = ", ".join(f"{k} {v}" for k, v in r["with"].items() if v) or "-"
        what = ", ".join(f"`{n}`" for n in r["names"]) or (r["why"] or "").replace("|", "\\|")[:160] or "-"
        out.append(f"| {r['unsloth']} | {r['floor'] or '-'} | {r['zoo'] or '-'} | {r['resolved_by'] or '-'} | "
                   f"{with_} | {r['verdict']} | {WHERE.get(r['breaks_at'] or '', '-')} | {what} |")
    return [*out, ""]


def runtime_text(p: dict[str, Any]) -> str:
    """A confirmed pair's runtime side in words (empty for a pair not confirmed)."""
    rt = p.get("runtime")
    if not rt:
        return ""
    why = "" if rt["outcome"] == "imports" else f": {rt['reason']}"
    return f"runtime {rt['outcome']}{why} (confirmed_by {p['confirmed_by']})"


def counted_line(doc: dict[str, Any]) -> str:
    """``Counted: N equivalence classes: ...``: the ``confirm`` block's tally in one line (empty without one)."""
    c = doc.get("confirm") or {}
    if "tally" not in c:
        return ""
    static = {cat.removeprefix("static-only: "): n for cat, n in c["tally"].items() if cat.startswith("static-only: ")}
    confirmed = [f"{n} {cat}" for cat, n in c["tally"].items() if cat in ("confirmed real", "confirmed stubbed",
                                                                          "inconsistent")]
    parts = [*confirmed, *([f"{sum(static.values())} static-only ("
                           + "; ".join(f"{why}: {n}" for why, n in static.items()) + ")"] if static else []),
             *([f"{c['tally']['not picked']} not picked"] if c["tally"].get("not picked") else [])]
    spread = f", --confirm-spread {c['spread']}" if c.get("spread") else ""
    return f"Counted: {c['counted']} equivalence classes{spread}: " + ", ".join(parts) + "."


def confirmed_section(doc: dict[str, Any]) -> list[str]:
    """The "confirmed at runtime" section: one row per confirmed pair, newest first (none without --confirm)."""
    done = [p for p in doc["pairs"] if p.get("runtime")]
    if "confirm" not in doc:
        return []
    out = ["## Confirmed at runtime", "", f"{doc['runtime']} (at most {doc['confirm']['max']}, newest first).", ""]
    out += [counted_line(doc), ""] if counted_line(doc) else []
    if doc["confirm"].get("na"):
        out += [doc["confirm"]["na"], ""]
    if not done:
        return [*out, "No pair picked (no change of verdict and no class in the window).", ""]
    out += ["| unsloth | zoo | picked as | static | runtime | confirmed by | reason |", "|---|---|---|---|---|---|---|"]
    for p in sorted(done, key=lambda p: (Version(p["unsloth"]), Version(p["zoo"])), reverse=True):
        rt = p["runtime"]
        reason = rt["reason"].replace("|", "\\|").replace("\n", " ")[:200]
        out.append(f"| {p['unsloth']} | {p['zoo']} | {p['confirm_why']} | {p['static_verdict']} | {rt['outcome']} | "
                   f"{p['confirmed_by']} | {reason} |")
    return [*out, ""]


def _hazards(doc: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    """The checks whose hazard (scan) sits on a cell with no guard present in its unsloth release (from the atlas)."""
    out: dict[tuple[str, str], list[str]] = {}
    zoo = sorted({p["zoo"] for p in doc["pairs"]}, key=Version)
    for a in doc.get("atlas", []):
        for span in a["spans"]:
            bad = [h["check"] for h in span["hazards"] if h["guard"] != "present"]
            for z in zoo if bad else []:
                if Version(span["from"]) <= Version(z) <= Version(span["to"]):
                    out[(a["unsloth"], z)] = bad
    return out


def _plain_td(r: dict[str, Any]) -> str:
    tip = (f"unsloth {r['unsloth']}: a plain install gets zoo {r['zoo'] or '-'} ({r['resolved_by']}): {r['verdict']}"
           + (f", breaks at {WHERE[r['breaks_at']]}" if r["breaks_at"] in WHERE else "")
           + (f"; {', '.join(r['names'])}" if r["names"] else "") + (f"; {r['why']}" if r["why"] else ""))
    colour = COLOURS.get(r["verdict"], "#9e9e9e")
    return (f'<td class="pi" style="background:{colour}" title="{html.escape(tip)}">'
            f'{html.escape(r["zoo"] or "n/a")}</td>')


def heatmap(doc: dict[str, Any]) -> str:
    uns, zoo, cell = _grid(doc)
    newest = doc.get("newest_zoo")
    esc = html.escape
    hazard = _hazards(doc)
    plain = {r["unsloth"]: r for r in plain_rows(doc)}
    head = '<th class="z pi"><span>plain install today</span></th>' + "".join(
        f'<th class="z{" newest" if z == newest else ""}" title="{"the newest zoo release" if z == newest else ""}">'
        f'<span>{esc(z)}{" ★" if z == newest else ""}</span></th>' for z in zoo)
    rows = []
    for u in uns:
        tds = [_plain_td(plain[u])] if u in plain else ["<td></td>"]
        for z in zoo:
            p = cell.get((u, z))
            if p is None:
                tds.append("<td></td>")
                continue
            names = ", ".join(m["name"] for m in p.get("missing", [])[:4]) or p.get("reason", "")
            tip = f"unsloth {u} x zoo {z}: {p['verdict']}" + (f"; missing {names}" if names else "") + (
                "" if p.get("admitted") else "; not admitted by a plain install")
            rt = runtime_text(p)
            tip += f"; static {p['static_verdict']}, {rt}" if rt else ""
            hz = hazard.get((u, z), [])
            tip += f"; hazard, no guard: {', '.join(hz)}" if hz else ""
            style = f"background:{COLOURS[p['verdict']]}" + ("" if p.get("admitted") else ";opacity:.55")
            mark = (' class="rt"' if rt else "") + (f' data-hazard="{esc(",".join(hz))}"' if hz else "")
            tds.append(f'<td{mark} style="{style}" title="{esc(tip)}">{MARK[p["verdict"]]}</td>')
        rows.append(f"<tr><th>{esc(u)}</th>{''.join(tds)}</tr>")
    legend = " ".join(f'<span style="background:{c};padding:2px 6px;color:#fff">{MARK[v]} {v}</span>'
                      for v, c in COLOURS.items())
    lines = "".join(f"<li>{esc(a['line'])}</li>" for a in doc["atlas"]) if doc.get("atlas") else "".join(
        f"<li>{esc(line)}</li>" for line in doc["lines"])
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>skewmatrix history</title>
<style>body{{font-family:sans-serif}} table{{border-collapse:collapse;font-size:11px}}
td{{width:14px;height:14px;text-align:center;color:#fff;border:1px solid #fff}}
td.pi{{width:auto;padding:0 4px;border-right:3px solid #1565c0}}
th.z{{height:90px;vertical-align:bottom}} th.z span{{writing-mode:vertical-rl;transform:rotate(180deg)}}
th.newest{{background:#424242;color:#fff}} th.pi{{background:#1565c0;color:#fff}}
td.rt{{outline:2px solid #000;outline-offset:-2px}}
td[data-hazard]{{background-image:linear-gradient(225deg,#000 0 30%,transparent 30%)}}</style></head><body>
<h1>unsloth x unsloth_zoo: {len(uns)} x {len(zoo)} releases</h1>
<p>{esc(headline(doc))}</p>{f"<p>{esc(counted_line(doc))}</p>" if counted_line(doc) else ""}
<p>{legend} — faded: a plain install does not admit the pair; {RUNTIME_MARK}; {HAZARD_MARK}. First column:
{PLAIN} (the zoo release uv resolves, coloured by that pair's verdict). ★ column: the newest zoo release
({esc(str(newest))}).</p>
<table><tr><th>unsloth \\ zoo</th>{head}</tr>{''.join(rows)}</table>
<h2>Atlas: one line per unsloth release</h2><ul>{lines}</ul></body></html>
"""
