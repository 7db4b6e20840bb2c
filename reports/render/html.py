"""``report.html``: one self-contained page (inline CSS and JS, nothing fetched).

Top of the page: the gate verdict, each check's guard-state counts and the
failing checks with their plain words (``reports.advice``), then the grid
(rows: unsloth builds, columns: zoo builds) with one line per registered
check in each cell, coloured by that check's guard state, and a legend per
check. Below, one ``<details>`` per cell with its evidence, check by check:
zoo state by each detector, the steps, the behaviour tests, the training run
with its per-step table; then builds, admissibility (uv's full message),
installed distributions with digests, timings and log tails. Failing cells
are open from the start, so the page works without JavaScript; the small
inline script only opens the cell named by the URL fragment (``#cell-<id>``
from a grid link, or ``#open=<id>``).

Every string from the report is escaped: cell results carry text from
untrusted builds (log tails, reasons, uv messages). A Content-Security-Policy
allows no network and only the one inline script, by its hash.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, ClassVar

from reports.render.base import Renderer
from reports.render.html_base import CSS, SCRIPT, advice_html, anchor, esc, guard_class, table
from reports.render.html_cell import cell_details
from reports.render.view import (
    build_descriptions,
    cell_failed,
    grid_axes,
    grid_index,
    headline,
    report_checks,
    short_labels,
    state_counts,
    state_of,
    status_word,
    verdict_line,
    verdict_of,
)

__all__ = ["SCRIPT", "HtmlRenderer"]


class HtmlRenderer(Renderer):
    filename: ClassVar[str | None] = "report.html"

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        cells = [e for e in report.get("cells") or [] if isinstance(e, dict)]
        passes, words = headline(report)
        title = f"skewmatrix: {words} {report.get('matrix', '')}"
        script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
        csp = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; "
               "img-src data:; base-uri 'none'; form-action 'none'")
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">',
            '<meta name="viewport" content="width=device-width,initial-scale=1">',
            f"<title>{esc(title)}</title><style>{CSS}</style></head>",
            f'<body data-gate="{"pass" if passes else "fail"}">',
            self._header(report, cells),
            '<div class="layout">',
            self._grid(report, cells),
            self._legend(report),
            "</div>",
            self._scan(report),
            f'<h2 id="cells">Cells ({len(cells)})</h2>',
            *(cell_details(report, e) for e in cells),
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
        return "\n".join(parts) + "\n"

    def _scan(self, report: dict[str, Any]) -> str:
        """The static scan (when one sat in the output directory) against each cell's dynamic verdict."""
        scan = report.get("scan")
        if not isinstance(scan, dict) or not scan.get("comparisons"):
            return ""
        rows = []
        for c in scan.get("comparisons") or []:
            bad = c.get("status") == "inconsistent"
            rows.append(f'<tr class="{"row-fail" if bad else ""}"><td><code>{esc(c.get("cell_id"))}</code></td>'
                        f'<td>{esc(c.get("zoo_version"))}</td><td>{esc(c.get("scan"))}</td>'
                        f'<td>{esc(c.get("dynamic"))}</td><td>{"<b>" if bad else ""}{esc(c.get("status"))}'
                        f'{"</b>" if bad else ""}</td><td>{esc(c.get("reason"))}</td></tr>')
        return (f'<section id="scan"><h2>Static scan vs cells</h2><p>First fixed zoo release per the scan: '
                f'<b>{esc(scan.get("first_fixed") or "none found")}</b>.</p>'
                + table(["cell", "zoo", "scan", "cell", "status", "reason"], rows) + "</section>")

    def _header(self, report: dict[str, Any], cells: list[dict[str, Any]]) -> str:
        gate = report.get("gate") or {}
        passes, words = headline(report)
        verdict = f'<div class="verdict {"v-pass" if passes else "v-fail"}" id="verdict">{esc(words)}</div>'
        checks = report_checks(report)
        per_check = []
        for c in checks:
            chips = " ".join(f'<span class="chip {guard_class(k)}">{esc(k)} {esc(v)}</span>'
                             for k, v in state_counts(report, c["id"]))
            per_check.append(f'<li data-check="{esc(c["id"])}"><code>{esc(c["id"])}</code>: {chips or "none"}</li>')
        out = [
            '<header class="top">', verdict,
            f'<div><h1>skewmatrix report</h1><p class="meta">matrix <code>{esc(report.get("matrix"))}</code> · '
            f'{len(cells)} cell(s) × {len(checks)} check(s) · generated {esc(report.get("generated"))}</p></div>',
            "</header>",
            f'<div class="summary" id="summary">Guard states per check:<ul class="counts">{"".join(per_check)}</ul>'
            f'Failing states: {esc(", ".join(gate.get("failing_states") or []))}.</div>',
        ]
        items = []
        for e in cells:
            cid = str(e.get("cell_id"))
            for c in checks:
                v = verdict_of(e, c["id"])
                word = status_word(report, e, c["id"])
                if word == "XPASS":
                    items.append(f'<li data-cell="{esc(cid)}" data-check="{esc(c["id"])}"><a href="{esc(anchor(cid))}">'
                                 f'<code>{esc(cid)}</code></a> · <code>{esc(c["id"])}</code> <b class="bad">XPASS</b>: '
                                 f'expected {esc((e.get("expect") or {}).get(c["id"]))}, got {esc(v.get("guard"))}: '
                                 "the expectation is stale</li>")
                if word == "WARN":
                    items.append(f'<li data-cell="{esc(cid)}" data-check="{esc(c["id"])}" class="warn">'
                                 f'<a href="{esc(anchor(cid))}"><code>{esc(cid)}</code></a> · <code>{esc(c["id"])}'
                                 f'</code> <b>WARN</b> {esc(v.get("guard"))}, reach latent (passes the gate; strict '
                                 f'mode fails it): {esc(v.get("reach_reason"))}</li>')
                if not v.get("gate_fail"):
                    continue
                guard = state_of(v, "guard")
                symptom = f'<div class="symptom">symptom: {esc(v["symptom"])}</div>' if v.get("symptom") else ""
                items.append(f'<li data-cell="{esc(cid)}" data-check="{esc(c["id"])}"><a href="{esc(anchor(cid))}">'
                             f'<code>{esc(cid)}</code></a> · <code>{esc(c["id"])}</code> '
                             f'<span class="chip {guard_class(guard)}">{esc(guard)}</span>'
                             + (f" reach <b>{esc(v.get('reach'))}</b>" if v.get("reach") else "")
                             + (" <b>XFAIL (expected)</b>" if word == "XFAIL" else "")
                             + f" {esc(v.get('guard_reason'))}{symptom}{advice_html(report, e, c)}</li>")
        if items:
            out.append(f'<ul class="failing" id="failing">{"".join(items)}</ul>')
        return "\n".join(out)

    def _grid(self, report: dict[str, Any], cells: list[dict[str, Any]]) -> str:
        grid = report.get("grid") or {}
        zoos, rows = list(grid.get("zoo") or []), list(grid.get("unsloth") or [])
        zdesc, udesc = build_descriptions(cells)
        checks = report_checks(report)
        labels = short_labels(checks)
        head = "".join(f'<th scope="col">{esc(z)}<small>{esc(zdesc.get(z))}</small></th>' for z in zoos)
        body = []
        at = grid_index(report)
        for u in rows:
            tds = []
            for z in zoos:
                e = at.get((u, z))
                if e is None:
                    tds.append('<td class="gcell empty" title="not in the matrix">—</td>')
                    continue
                fail = cell_failed(report, e)
                lines = []
                for c in checks:
                    v = verdict_of(e, c["id"])
                    guard = state_of(v, "guard")
                    mark = "✗" if v.get("gate_fail") else "✓"
                    lines.append(
                        f'<span class="gl {"g-warn" if v.get("gate_warn") else guard_class(guard)}" '
                        f'data-check="{esc(c["id"])}" data-guard="{esc(guard)}" '
                        f'title="{esc(c["id"])}: {esc(guard)}: {esc(v.get("guard_reason"))}">'
                        f'{mark} {esc(verdict_line(e, c["id"], labels[c["id"]]))}</span>')
                tds.append(
                    f'<td class="gcell {"fail" if fail else "pass"}" data-cell="{esc(e.get("cell_id"))}" '
                    f'data-gate="{"fail" if fail else "pass"}">'
                    f'<a href="{esc(anchor(str(e.get("cell_id"))))}">{"".join(lines) or "-"}</a></td>')
            body.append(f'<tr><th scope="row">{esc(u)}<small>{esc(udesc.get(u))}</small></th>{"".join(tds)}</tr>')
        corner = esc(" ↓ · ".join(grid_axes(report)))
        return (f'<table class="grid" id="grid"><thead><tr><th class="corner">{corner} →</th>{head}</tr>'
                f'</thead><tbody>{"".join(body)}</tbody></table>')

    def _legend(self, report: dict[str, Any]) -> str:
        failing = set((report.get("gate") or {}).get("failing_states") or [])
        labels = short_labels(report_checks(report))
        out = ['<div class="legend" id="legend">']
        for c in report_checks(report):
            rows = []
            for s, meaning in (c.get("guard_meaning") or {}).items():
                gate = '<b class="bad">fails gate</b>' if s in failing else "passes"
                rows.append(f'<tr data-state="{esc(s)}"><td><span class="chip {guard_class(s)}">{esc(s)}</span></td>'
                            f"<td>{gate}</td><td>{esc(meaning)}</td></tr>")
            zoo = "; ".join(f"<b>{esc(s)}</b>: {esc(m)}" for s, m in (c.get("zoo_meaning") or {}).items())
            out.append(f'<div class="lcheck" data-check="{esc(c["id"])}"><h3><code>{esc(c["id"])}</code> '
                       f'({esc(labels[c["id"]])}): {esc(c.get("title"))}</h3><p>{esc(c.get("hazard"))}. Kernel '
                       f'<code>{esc(c.get("kernel"))}</code>.</p><table><tbody>{"".join(rows)}</tbody></table>'
                       f"<p>Zoo state (static and runtime detectors must agree): {zoo}.</p></div>")
        out.append("<p>Click a grid cell for its evidence; failing cells are expanded below.</p></div>")
        return "".join(out)
