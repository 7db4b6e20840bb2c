"""``scan.md``: the scan document (``reports/scan.schema.json``) as Markdown. A pure function of the document.

Order: any inconsistency first and loud (the static and runtime detectors
disagree on a release), then the timeline with ``fixed_since`` (the release
to recommend) and how each boundary was established, the check's declared
upstream fix against it (loud at the top too when they differ), then one row per zoo
release and one per unsloth release.
"""

from __future__ import annotations

from typing import Any


def _esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _how(confirmed_by: str | None) -> str:
    return "confirmed at runtime" if confirmed_by == "runtime" else "static reading only"


def _timeline(t: dict[str, Any]) -> list[str]:
    lines = []
    if t.get("fixed_since"):
        lines.append(f"- **Recommend unsloth_zoo>={t['fixed_since']}**: no release from {t['fixed_since']} on is "
                     f"vulnerable or inconsistent ({_how(t.get('fixed_since_confirmed_by'))}).")
    else:
        lines.append("- **No release to recommend**: no fixed release after the last vulnerable one.")
    if t.get("first_fixed") and t["first_fixed"] != t.get("fixed_since"):
        lines.append(f"- First fixed release: {t['first_fixed']} (not recommended: a vulnerable or inconsistent "
                     "release follows it).")
    if t.get("last_vulnerable"):
        lines.append(f"- Last vulnerable release: {t['last_vulnerable']} "
                     f"({_how(t.get('last_vulnerable_confirmed_by'))}).")
    for r in t.get("regressions", []):
        lines.append(f"- **Regression: {r['version']} is vulnerable again after {r['after_fixed']} was fixed.**")
    if not t.get("regressions"):
        lines.append("- No regression (no vulnerable release after a fixed one).")
    if t.get("unknown_after_fixed_since"):
        lines.append(f"- Undecided after {t['fixed_since']}: {', '.join(t['unknown_after_fixed_since'])} "
                     "(static verdict unknown; `--confirm` runs them).")
    return lines


def _declared(fix: dict[str, Any] | None) -> list[str]:
    """The check's declared upstream fix against the timeline: one line, or a loud one when they differ."""
    if not fix:
        return ["- Declared fix: none (the check's folder declares no `FIX`)."]
    release = f"{fix['package']} {fix['release']}" if fix.get("release") else f"no {fix['package']} release"
    prs = f" ({', '.join(fix['prs'])}{', ' + fix['prs_state'] if fix.get('prs_state') else ''})" \
        if fix.get("prs") else ""
    if fix.get("agrees"):
        return [f"- Declared fix: {release}{prs}; agrees with this timeline."]
    return [f"- **Declared fix DISAGREES with the scan: {_esc(fix.get('disagreement'))}.** Correct `FIX` in the "
            "check's folder, or the detector."]


def _unsloth(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## unsloth releases", "",
             "| unsloth | admitted zoo (plain install) | floor | floor verdict | exposure | guard | evidence |",
             "|---|---|---|---|---|---|---|"]
    for u in rows:
        mark = " (yanked)" if u["yanked"] else ""
        req = u["zoo_requirement"]
        rng = req["plain"] if req["plain"] is not None else ("not required" if req["known"] else "unknown")
        if req["plain"] == "":
            rng = "any"
        if req.get("extras"):
            rng += " · extras: " + ", ".join(f"[{e}] {s or 'any'}" for e, s in req["extras"].items())
        floor = u["floor"] or {}
        ev = "; ".join(u["guard"]["evidence"])[:160]
        lines.append(f"| {u['version']}{mark} | {_esc(rng)} | {floor.get('version', '-')} | "
                     f"{floor.get('verdict', '-')} | {u['exposure']} | {u['guard']['state']} | {_esc(ev)} |")
    return lines


def render(doc: dict[str, Any]) -> str:
    """The whole ``scan.md``."""
    origin = ", ".join(f"{k}: {v}" for k, v in doc["index"]["origin"].items())
    lines = [f"# Static scan: unsloth_zoo ({doc.get('check', '?')}) x unsloth", "",
             f"Index: `{doc['index']['url']}` ({origin}). Generated {doc['generated']}.", ""]
    target = doc.get("target") or {}
    if target.get("file"):
        lines += [f"Kernel read in each zoo release: `{target['file']}` (`{target.get('function') or '-'}`); "
                        "absent where a release does not carry it.", ""]
    bad = [z for z in doc["zoo"] if z["verdict"] == "inconsistent"]
    if bad:
        lines += [f"> **INCONSISTENT: the static and runtime detectors disagree on {len(bad)} release(s): "
                  f"{', '.join(z['version'] for z in bad)}. Neither verdict is trusted; investigate the "
                  "detector before using this scan.**", ""]
    for w in doc["warnings"] + doc["errors"]:
        lines.append(f"> **warning:** {_esc(w)}")
    if doc["warnings"] or doc["errors"]:
        lines.append("")
    fix = doc.get("declared_fix")
    if fix and not fix.get("agrees"):
        lines += [f"> **DECLARED FIX DISAGREES: {_esc(fix.get('disagreement'))}.**", ""]
    lines += ["## unsloth_zoo timeline", "", *_timeline(doc["timeline"]), *_declared(fix)]
    lines += ["", "| zoo | verdict | confirmed by | file | reason |", "|---|---|---|---|---|"]
    for z in doc["zoo"]:
        mark = " (yanked)" if z["yanked"] else ""
        fname = z["file"]["filename"] if z["file"] else "-"
        verdict = f"**{z['verdict'].upper()}**" if z["verdict"] == "inconsistent" else z["verdict"]
        lines.append(f"| {z['version']}{mark} | {verdict} | {z.get('confirmed_by', 'static-only')} | {fname} | "
                     f"{_esc(z['reason'])} |")
    if doc["unsloth"]:
        lines += _unsloth(doc["unsloth"])
    lines.append("")
    return "\n".join(lines)
