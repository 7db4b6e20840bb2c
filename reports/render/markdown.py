"""``report.md``: the grid, the legend, then per-cell details.

Also what goes to ``$GITHUB_STEP_SUMMARY``. Cells read ``zoo state / guard
state`` with the behaviour count when the suite ran; failing guard states
are bold so a reviewer's eye lands on them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reports.classify import GUARD_MEANING, ZOO_MEANING, GuardState, ZooState
from reports.model import cell_at
from reports.render.base import Renderer, fmt_seconds, short_digest


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cell_label(entry: dict[str, Any]) -> str:
    c = entry["classification"]
    guard = c["guard"]
    guard_txt = f"**{guard}**" if entry.get("gate_fail") else guard
    beh = c["behavior"]["label"]
    return f"zoo {c['zoo']} · guard {guard_txt}" + (f" {beh}" if beh else "")


class MarkdownRenderer(Renderer):
    filename: ClassVar[str | None] = "report.md"

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        lines = ["# skewmatrix report", ""]
        lines.append(f"Matrix `{report['matrix']}`, {len(report['cells'])} cell(s), generated {report['generated']}.")
        summary = ", ".join(f"{k} {v}" for k, v in report["summary"].items() if v)
        failed = report["gate"]["failed_cells"]
        verdict = f"**{len(failed)} cell(s) fail the gate**" if failed else "all cells pass the gate"
        lines += [f"Guard states: {summary or 'none'}; {verdict}.", ""]
        zoos = report["grid"]["zoo"]
        by_name = {e["builds"]["zoo"]["name"]: e["builds"]["zoo"] for e in report["cells"]}
        ubuilds = {e["builds"]["unsloth"]["name"]: e["builds"]["unsloth"] for e in report["cells"]}
        header = "| unsloth \\ zoo | " + " | ".join(f"{z} ({by_name[z]['describe']})" for z in zoos) + " |"
        lines += [header, "|---|" + "---|" * len(zoos)]
        for u in report["grid"]["unsloth"]:
            row = [f"{u} ({ubuilds[u]['describe']})"]
            for z in zoos:
                e = cell_at(report, u, z)
                row.append(cell_label(e) if e else "—")
            lines.append("| " + " | ".join(_esc(x) for x in row) + " |")
        lines += ["", "<details><summary>Legend</summary>", ""]
        lines += [f"- zoo `{s.value}`: {ZOO_MEANING[s]}" for s in ZooState]
        lines += [f"- guard `{s.value}`: {GUARD_MEANING[s]}" for s in GuardState]
        lines += ["", f"Gate fails on: {', '.join(report['gate']['failing_states'])}.", "", "</details>", ""]
        lines += self._scan(report)
        lines.append("## Cells")
        for e in report["cells"]:
            lines += ["", *self._details(e)]
        return "\n".join(lines) + "\n"

    def _scan(self, report: dict[str, Any]) -> list[str]:
        scan = report.get("scan")
        if not scan:
            return []
        out = ["## Static scan vs cells", ""]
        out.append(f"First fixed zoo release per the scan: {scan.get('first_fixed') or 'none found'}.")
        bad = [c for c in scan["comparisons"] if c["status"] == "inconsistent"]
        if bad:
            out.append(f"**{len(bad)} cell(s) where the scan and the cell disagree: inconsistent.**")
        out += ["", "| cell | zoo | scan | cell | status |", "|---|---|---|---|---|"]
        for c in scan["comparisons"]:
            status = f"**{c['status']}**" if c["status"] == "inconsistent" else c["status"]
            out.append(f"| `{c['cell_id']}` | {c['zoo_version']} | {c['scan']} | {c['dynamic']} | {status} |")
        return [*out, ""]

    def _details(self, e: dict[str, Any]) -> list[str]:
        c = e["classification"]
        out = [f"### `{e['cell_id']}` — zoo {c['zoo']}, guard {c['guard']}", ""]
        out.append(f"- guard: {_esc(c['guard_reason'])}")
        out.append(f"- zoo: {_esc(c['zoo_reason'])} (static: {c['static']}, runtime: {c['runtime']})")
        for role in ("unsloth", "zoo"):
            b = e["builds"][role]
            out.append(f"- {role}: {b['describe']}, installed {b.get('installed_version') or '-'}, "
                       f"sha256 `{short_digest(b.get('digest'))}`")
        t = e.get("torch") or {}
        if t:
            out.append(f"- torch: {t.get('version')}" + (f" ({t['local']})" if t.get("local") else ""))
        adm = e.get("admissible") or {}
        if adm:
            value = {True: "yes", False: "no (installed with overrides)", None: "unknown"}[adm.get("value")]
            msg = ""
            if adm.get("message") and adm.get("value") is False:
                msg = f": {_esc(adm['message'].strip().splitlines()[-1].strip())}"
            out.append(f"- plain install admits the pair: {value} [{adm.get('method')}]{msg}")
        beh = c["behavior"]
        if beh["label"]:
            out.append(f"- behaviour: {beh['passed']} pass, {beh['failed']} fail, {beh['na']} n/a"
                       + (f" (failing: {', '.join(beh['failing'])})" if beh["failing"] else ""))
        steps = ", ".join(f"{s['name']} {fmt_seconds(s['seconds'])}" for s in e.get("steps", []))
        out.append(f"- timings: {steps}; total {fmt_seconds(e.get('seconds'))}")
        if e.get("error"):
            err = e["error"]
            out += [f"- error ({err['kind']}): {_esc(err['message'][:500])}"]
            if err.get("log_tail"):
                out += ["", "```", err["log_tail"][-3000:], "```"]
        return out
