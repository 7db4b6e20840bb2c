"""``report.md``: the gate line, per-check state counts, the grid, the failing checks in plain words, the legend,
then per-cell details.

Each grid cell has one line per registered check (``label: zoo / guard
behaviour · train outcome``); failing guard states are bold so a reviewer's
eye lands on them. Every failing check of every cell gets its reason, its
user-visible symptom and the three sentences of ``reports.advice``; the
cell's details keep uv's full resolver explanation folded in ``<details>``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reports.advice import advice, fixed_since
from reports.render.base import Renderer, fmt_seconds, short_digest
from reports.render.details import check_details, train_table
from reports.render.findings import Finding, findings, summary_lines
from reports.render.view import (
    admissible_text,
    build_descriptions,
    grid_axes,
    grid_index,
    headline,
    plural,
    report_checks,
    residual_names,
    residual_note,
    run_title,
    short_labels,
    state_counts,
    state_of,
    status_word,
    training_label,
    training_of,
    verdict_line,
    verdict_of,
)


def _esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _bold_failing(state: str, failing: bool) -> str:
    return f"**{state}**" if failing else state


def cell_label(report: dict[str, Any], entry: dict[str, Any]) -> str:
    """A grid cell: one line per check, joined by ``<br>``."""
    checks = report_checks(report)
    labels = short_labels(checks)
    return "<br>".join(_esc(verdict_line(entry, c["id"], labels[c["id"]], mark=_bold_failing)) for c in checks) \
        or "-"


def fence(text: str) -> list[str]:
    """A code block that no backtick run inside ``text`` can close."""
    ticks = "`" * max(3, _longest_backticks(text) + 1)
    return [ticks, text.rstrip("\n"), ticks]


def _longest_backticks(text: str) -> int:
    best = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return best


def failing_items(report: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """The failing (and stale-expectation) checks of one cell, each with its plain words, as Markdown lines."""
    out: list[str] = []
    cid = entry.get("cell_id")
    for c in report_checks(report):
        v = verdict_of(entry, c["id"])
        word = status_word(report, entry, c["id"])
        if word == "XPASS":
            out += [f"- **XPASS** `{cid}` · `{c['id']}`: expected {_esc((entry.get('expect') or {}).get(c['id']))}, "
                    f"got {state_of(v, 'guard')}: the expectation is stale"]
        if word == "WARN":
            out.append(f"- **WARN** `{cid}` · `{c['id']}`: {state_of(v, 'guard')}, reach **latent** (passes the "
                       f"gate; strict mode fails it): {_esc(v.get('reach_reason') or '')}")
            continue
        if not v.get("gate_fail"):
            continue
        out.append(f"- **{word}** `{cid}` · `{c['id']}`: **{state_of(v, 'guard')}**"
                   + (f" (reach {v['reach']})" if v.get("reach") else "") + f": {_esc(v.get('guard_reason') or '')}")
        if v.get("symptom"):
            out.append(f"  - symptom: {_esc(v['symptom'])}")
        a = advice(entry, c, fixed=fixed_since(report, c["id"]))
        out += [f"  - {label}: {_esc(text)}" for label, text in a.lines()]
    return out


def finding_items(f: Finding) -> list[str]:
    """One finding as Markdown: its head (status, check, state, cells), its reason, then its details."""
    cells = ", ".join(f"`{c}`" for c in f.cells)
    where = cells if len(f.cells) == 1 else f"{len(f.cells)} cells: {cells}"
    out = [f"- **{f.word}** `{f.check}`: **{_esc(f.state)}** in {where}: {_esc(f.reason)}"]
    return out + [f"  - {label}: {_esc(text)}" for label, text in f.details]


class MarkdownRenderer(Renderer):
    filename: ClassVar[str | None] = "report.md"

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        cells = [e for e in report.get("cells") or [] if isinstance(e, dict)]
        checks = report_checks(report)
        labels = short_labels(checks)
        gate = report.get("gate") or {}
        failed = gate.get("failed_cells") or []
        lines = ["# skewmatrix report", ""]
        lines.append(f"Matrix `{report.get('matrix', '')}`, {plural(len(cells), 'cell')} × "
                     f"{plural(len(checks), 'check')}, generated {report.get('generated', '-')}.")
        passes, words = headline(report)
        lines += [f"**{'✅' if passes else '❌'} {words}** ({len(failed)} cell(s) in a failing state; failing "
                  f"states: {', '.join(gate.get('failing_states') or [])}"
                  + ("; strict: latent fails too" if gate.get("strict") else "") + ").", ""]
        found = findings(report)
        short = summary_lines(found)
        if short:  # what a person reads first: one line per finding, identical ones grouped
            lines += [f"- {_esc(x)}" for x in short] + [""]
        lines += ["| check | guard states |", "|---|---|"]
        for c in checks:
            counts = ", ".join(f"{s} {n}" for s, n in state_counts(report, c["id"])) or "none"
            lines.append(f"| `{c['id']}` ({_esc(labels[c['id']])}) | {_esc(counts)} |")
        lines += ["", *self._grid(report, cells), ""]
        grouped = [line for f in found for line in finding_items(f)]
        if grouped:
            lines += ["## Findings", "", "Each finding once, with the cells it covers.", "", *grouped, ""]
        lines += ["<details><summary>Legend</summary>", ""]
        for c in checks:
            lines += [f"**`{c['id']}`** ({_esc(labels[c['id']])}): {_esc(c.get('title') or '')}. "
                      f"{_esc(c.get('hazard') or '')}. Kernel `{c.get('kernel') or '-'}`.", ""]
            lines += [f"- zoo `{s}`: {_esc(m)}" for s, m in (c.get("zoo_meaning") or {}).items()]
            lines += [f"- guard `{s}`: {_esc(m)}" for s, m in (c.get("guard_meaning") or {}).items()]
            lines.append("")
        lines += [f"Gate fails on: {', '.join(gate.get('failing_states') or [])}.", "", "</details>", ""]
        lines += self._scan(report)
        lines.append("## Cells")
        for e in cells:
            lines += ["", *self._details(report, e)]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _grid(report: dict[str, Any], cells: list[dict[str, Any]]) -> list[str]:
        grid = report.get("grid") or {}
        zoos, rows = list(grid.get("zoo") or []), list(grid.get("unsloth") or [])
        zdesc, udesc = build_descriptions(cells)
        corner = " \\ ".join(grid_axes(report))
        out = [f"| {corner} | " + " | ".join(_esc(f"{z} ({zdesc.get(z, '-')})") for z in zoos) + " |",
               "|---|" + "---|" * len(zoos)]
        at = grid_index(report)
        for u in rows:
            row = [_esc(f"{u} ({udesc.get(u, '-')})")]
            for z in zoos:
                e = at.get((u, z))
                row.append(cell_label(report, e) if e else "—")
            out.append("| " + " | ".join(row) + " |")
        return out

    @staticmethod
    def _scan(report: dict[str, Any]) -> list[str]:
        scan = report.get("scan")
        if not isinstance(scan, dict) or not scan.get("comparisons"):
            return []
        out = ["## Static scan vs cells", ""]
        out.append(f"First fixed zoo release per the scan: {scan.get('first_fixed') or 'none found'}.")
        bad = [c for c in scan["comparisons"] if c.get("status") == "inconsistent"]
        if bad:
            out.append(f"**{len(bad)} cell(s) where the scan and the cell disagree: inconsistent.**")
        out += ["", "| cell | zoo | scan | cell | status |", "|---|---|---|---|---|"]
        for c in scan["comparisons"]:
            status = f"**{c.get('status')}**" if c.get("status") == "inconsistent" else c.get("status")
            out.append(f"| `{c.get('cell_id')}` | {c.get('zoo_version')} | {c.get('scan')} | {c.get('dynamic')} "
                       f"| {status} |")
        return [*out, ""]

    def _details(self, report: dict[str, Any], e: dict[str, Any]) -> list[str]:
        mark = "✗" if e.get("cell_id") in ((report.get("gate") or {}).get("failed_cells") or []) else "✓"
        out = [f"### {mark} `{e.get('cell_id')}`", ""]
        for role in ("unsloth", "zoo"):
            b = (e.get("builds") or {}).get(role) or {}
            out.append(f"- {role}: {_esc(b.get('describe') or '-')}, installed {b.get('installed_version') or '-'}, "
                       f"sha256 `{short_digest(b.get('digest'))}`")
        t = e.get("torch") or {}
        if t:
            out.append(f"- torch: {t.get('version')}" + (f" ({t['local']})" if t.get("local") else ""))
        out.append(f"- plain install admits the pair: {admissible_text(e)}")
        steps = ", ".join(f"{s.get('name')} {fmt_seconds(s.get('seconds'))}" for s in e.get("steps") or []
                          if isinstance(s, dict))
        out.append(f"- timings: {steps or '-'}; total {fmt_seconds(e.get('seconds'))}")
        adm = e.get("admissible") or {}
        if adm.get("message") and adm.get("value") is not True:
            out += ["", "<details><summary>uv's resolver explanation</summary>", "", *fence(str(adm["message"])),
                    "", "</details>"]
        err = e.get("error")
        if isinstance(err, dict):
            out += ["", f"Error ({err.get('kind')}): {_esc(str(err.get('message') or '')[:500])}"]
            if err.get("log_tail"):
                out += ["", "<details><summary>log tail</summary>", "", *fence(str(err["log_tail"])[-3000:]), "",
                        "</details>"]
        for c in report_checks(report):
            out += ["", *self._check(e, c)]
        return out

    @staticmethod
    def _check(e: dict[str, Any], c: dict[str, Any]) -> list[str]:
        cid = c["id"]
        v = verdict_of(e, cid)
        state = (f"{v['word']}" if v.get("word") else f"zoo {state_of(v, 'zoo')}, guard {state_of(v, 'guard')}")
        out = [f"#### `{cid}`: {state}" + (" (fails the gate)" if v.get("gate_fail") else "")
               + (" (a warning)" if v.get("gate_warn") else ""), ""]
        out.append(f"- guard: {_esc(v.get('guard_reason') or '-')}")
        out.append(f"- zoo: {_esc(v.get('zoo_reason') or '-')} (static: {v.get('static') or '-'}, "
                   f"runtime: {v.get('runtime') or '-'})")
        beh = v.get("behavior") or {}
        if beh.get("label"):
            out.append(f"- behaviour {beh['label']}: {beh.get('passed', 0)} pass, {beh.get('failed', 0)} fail, "
                       f"{beh.get('na', 0)} n/a" + (f" (failing: {', '.join(beh['failing'])})"
                                                    if beh.get("failing") else ""))
        t = training_of(e, cid)
        if t:
            out.append(f"- training: {training_label(t)}" + (f": {_esc(t['reason'])}" if t.get("reason") else ""))
        if v.get("symptom"):
            out.append(f"- symptom: {_esc(v['symptom'])}")
        note = residual_note(e, cid)
        if note:
            out.append(f"- {note}: {residual_names(e, cid)}")
        details = check_details(e, cid)
        out += [f"- {label}: {_esc(text)}" for label, text in details.items]
        for table in details.tables:
            out += ["", f"{_esc(table.title)}:", "", "| " + " | ".join(table.headers) + " |",
                    "|" + "---|" * len(table.headers)]
            out += ["| " + " | ".join(f"`{_esc(x)}`" if j in table.code else _esc(x) for j, x in enumerate(row))
                    + " |" for row in table.rows]
        t = train_table(e, cid)
        if t.na:
            out.append(f"- training run, per step: {_esc(t.na)}")
        elif t.runs:
            out += ["", "<details><summary>training run, per step</summary>", ""]
            for run, rows in t.runs:
                out += [_esc(run_title(run)), "", "| " + " | ".join(t.headers) + " |", "|" + "---|" * len(t.headers)]
                out += ["| " + " | ".join(_esc(x) for x in row) + " |" for row in rows]
                out.append("")
            out.append("</details>")
        return out
