"""The history document as Markdown and as an HTML heatmap (rows unsloth, columns zoo, one colour per verdict;
the newest zoo's column is what a plain install gets today). Pure functions of the document."""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

from packaging.version import Version

COLOURS = {"compatible": "#2e7d32", "degraded": "#f9a825", "incompatible": "#c62828", "unknown": "#9e9e9e",
           "inconsistent": "#6a1b9a"}  # inconsistent: only after --confirm, static and runtime disagree
MARK = {"compatible": "✓", "degraded": "~", "incompatible": "✗", "unknown": "?", "inconsistent": "!"}
PLAIN = "what a plain install gets today"
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
    out += [f"Newest zoo release: {newest} ({PLAIN}).", "", "## Per unsloth release", ""]
    out += [f"- {line}" for line in doc["lines"]]
    out += ["", "## What a plain install pairs", "", "| unsloth | zoo floor | plain install picks | verdict there |",
            "|---|---|---|---|"]
    _, _, cell = _grid(doc)
    for u in doc["unsloth"]:
        pick = u.get("plain_pick")
        there = cell.get((u["version"], pick or ""), {}).get("verdict", "n/a (outside the window)")
        out.append(f"| {u['version']} | {u.get('floor') or '-'} | {pick or '-'} | {there} |")
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
            out.append(f"- {cid}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())))
    out += ["", f"Runtime: {doc['runtime']}", "", *confirmed_section(doc)]
    return "\n".join(out)


def runtime_text(p: dict[str, Any]) -> str:
    """A confirmed pair's runtime side in words (empty for a pair not confirmed)."""
    rt = p.get("runtime")
    if not rt:
        return ""
    why = "" if rt["outcome"] == "imports" else f": {rt['reason']}"
    return f"runtime {rt['outcome']}{why} (confirmed_by {p['confirmed_by']})"


def confirmed_section(doc: dict[str, Any]) -> list[str]:
    """The "confirmed at runtime" section: one row per confirmed pair, newest first (none without --confirm)."""
    done = [p for p in doc["pairs"] if p.get("runtime")]
    if "confirm" not in doc:
        return []
    out = ["## Confirmed at runtime", "", f"{doc['runtime']} (at most {doc['confirm']['max']}, newest first).", ""]
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


def heatmap(doc: dict[str, Any]) -> str:
    uns, zoo, cell = _grid(doc)
    newest = doc.get("newest_zoo")
    esc = html.escape
    head = "".join(
        f'<th class="z{" plain" if z == newest else ""}" title="{esc(PLAIN) if z == newest else ""}">'
        f'<span>{esc(z)}{" ★" if z == newest else ""}</span></th>' for z in zoo)
    rows = []
    for u in uns:
        tds = []
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
            style = f"background:{COLOURS[p['verdict']]}" + ("" if p.get("admitted") else ";opacity:.55")
            mark = ' class="rt"' if rt else ""
            tds.append(f'<td{mark} style="{style}" title="{esc(tip)}">{MARK[p["verdict"]]}</td>')
        rows.append(f"<tr><th>{esc(u)}</th>{''.join(tds)}</tr>")
    legend = " ".join(f'<span style="background:{c};padding:2px 6px;color:#fff">{MARK[v]} {v}</span>'
                      for v, c in COLOURS.items())
    lines = "".join(f"<li>{esc(line)}</li>" for line in doc["lines"])
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>skewmatrix history</title>
<style>body{{font-family:sans-serif}} table{{border-collapse:collapse;font-size:11px}}
td{{width:14px;height:14px;text-align:center;color:#fff;border:1px solid #fff}}
th.z{{height:90px;vertical-align:bottom}} th.z span{{writing-mode:vertical-rl;transform:rotate(180deg)}}
th.plain{{background:#1565c0;color:#fff}} td.rt{{outline:2px solid #000;outline-offset:-2px}}</style></head><body>
<h1>unsloth x unsloth_zoo: {len(uns)} x {len(zoo)} releases</h1>
<p>{legend} — faded: a plain install does not admit the pair; {RUNTIME_MARK}. ★ column (zoo {esc(str(newest))}):
{PLAIN}.</p>
<table><tr><th>unsloth \\ zoo</th>{head}</tr>{''.join(rows)}</table>
<h2>Per unsloth release</h2><ul>{lines}</ul></body></html>
"""
