"""``report.html``: one self-contained page (inline CSS and JS, nothing fetched), read top down.

First screen: the gate verdict (what the exit code says), then the grid
(rows: unsloth builds, columns: zoo builds) with one coloured square per
registered check in each cell, coloured by that check's guard state, and
the legend of the colours next to it. Then the failures, one short line
each (cell, check, state, reach) that opens (``<details>``) into its plain
words (``reports.advice``: reach, install, fix, next step) and a link to the
cell's evidence. Then the guard-state counts per check, the scan against
the cells when one lay in the output directory, and the evidence of every
cell, each collapsed in its own ``<details>`` (``reports.render.html_cell``):
the page stays small however many cells fail, and says every piece of
evidence once. The small inline script opens the cell named by the URL
fragment (``#cell-<id>`` from a grid square or a failure, or ``#open=<id>``).

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

# The legend's colours, in reading order: (class, words, passes the gate?) -- the guard states, then a warning.
LEGEND = (("activates", "activates: a guard fixes it"), ("no-ops", "no-ops: a guard stays idle"),
          ("not-needed", "not-needed: nothing to fix"), ("missing", "missing: nothing fixes it"),
          ("broken", "broken: a guard fails its suite"), ("error", "error: no verdict"))


WARN_CLASS = ' class="warn"'


def _mark(v: dict[str, Any]) -> str:
    """The glyph in a grid square, so the colour is never the only sign: ✗ fails the gate, ! warns, ✓ passes."""
    return "✗" if v.get("gate_fail") else ("!" if v.get("gate_warn") else "✓")


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
            '<div class="layout" id="overview">',
            self._grid(report, cells),
            self._legend(report),
            "</div>",
            self._failures(report, cells),
            self._summary(report),
            self._scan(report),
            f'<h2 id="cells">Evidence per cell ({len(cells)}; click to open)</h2>',
            *(cell_details(report, e) for e in cells),
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
        return "\n".join(p for p in parts if p) + "\n"

    def _header(self, report: dict[str, Any], cells: list[dict[str, Any]]) -> str:
        passes, words = headline(report)
        return (f'<header class="top"><div class="verdict {"v-pass" if passes else "v-fail"}" id="verdict">'
                f'{esc(words)}</div><div><h1>skewmatrix report</h1><p class="meta">matrix '
                f'<code>{esc(report.get("matrix"))}</code> · {len(cells)} cell(s) × {len(report_checks(report))} '
                f'check(s) · generated {esc(report.get("generated"))}</p></div></header>')

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
                squares = []
                for c in checks:
                    v = verdict_of(e, c["id"])
                    guard = state_of(v, "guard")
                    # each square carries its check's short label, so no legend is needed to read the grid
                    colour = "g-warn" if v.get("gate_warn") else guard_class(guard)
                    squares.append(
                        f'<span class="sqrow"><span class="sq {colour}" '
                        f'data-check="{esc(c["id"])}" data-guard="{esc(guard)}" '
                        f'title="{esc(verdict_line(e, c["id"], labels[c["id"]]))}">{_mark(v)}</span>'
                        f'<small class="sql">{esc(labels[c["id"]])}</small></span>')
                cid = str(e.get("cell_id"))
                tds.append(f'<td class="gcell {"fail" if fail else "pass"}" data-cell="{esc(cid)}" '
                           f'data-gate="{"fail" if fail else "pass"}"><a href="{esc(anchor(cid))}" '
                           f'aria-label="{esc(cid)}">{"".join(squares) or "-"}</a></td>')
            body.append(f'<tr><th scope="row">{esc(u)}<small>{esc(udesc.get(u))}</small></th>{"".join(tds)}</tr>')
        corner = esc(" ↓ · ".join(grid_axes(report)))
        return (f'<table class="grid" id="grid"><thead><tr><th class="corner">{corner} →</th>{head}</tr>'
                f'</thead><tbody>{"".join(body)}</tbody></table>')

    def _legend(self, report: dict[str, Any]) -> str:
        failing = set((report.get("gate") or {}).get("failing_states") or [])
        checks = report_checks(report)
        labels = short_labels(checks)
        order = " ".join(f'<span class="sq g-unknown">{i}</span> <code>{esc(labels[c["id"]])}</code>'
                         for i, c in enumerate(checks, 1))
        rows = [f'<li data-state="{esc(s)}"><span class="sq {guard_class(s)}">{"✗" if s in failing else "✓"}'
                f'</span> {esc(words)}{" · <b>fails the gate</b>" if s in failing else ""}</li>' for s, words in LEGEND]
        rows.append('<li data-state="warn"><span class="sq g-warn">!</span> missing, reach latent: a warning '
                    "(passes the gate; strict mode fails it)</li>")
        meanings = []
        for c in checks:
            states = "".join(f'<tr data-state="{esc(s)}"><td><span class="chip {guard_class(s)}">{esc(s)}</span></td>'
                             f'<td>{"fails gate" if s in failing else "passes"}</td><td>{esc(m)}</td></tr>'
                             for s, m in (c.get("guard_meaning") or {}).items())
            zoo = "; ".join(f"<b>{esc(s)}</b>: {esc(m)}" for s, m in (c.get("zoo_meaning") or {}).items())
            meanings.append(f'<details class="lcheck" data-check="{esc(c["id"])}"><summary><code>{esc(c["id"])}'
                            f'</code> ({esc(labels[c["id"]])}): {esc(c.get("title"))}</summary><p>'
                            f'{esc(c.get("hazard"))}. Kernel <code>{esc(c.get("kernel"))}</code>.</p><table><tbody>'
                            f"{states}</tbody></table><p>Zoo state (static and runtime detectors must agree): {zoo}."
                            "</p></details>")
        return (f'<div class="legend" id="legend"><p>One labelled square per check in each cell, in this order: '
                f'{order}. Hover a square for its verdict; click it for the cell\'s evidence.</p><ul class="states">'
                f'{"".join(rows)}</ul>{"".join(meanings)}</div>')

    def _failures(self, report: dict[str, Any], cells: list[dict[str, Any]]) -> str:
        """One short line per failing (cell, check), an XPASS or a warning, each opening into its plain words."""
        labels = short_labels(report_checks(report))
        items = []
        for e in cells:
            cid = str(e.get("cell_id"))
            for c in report_checks(report):
                v = verdict_of(e, c["id"])
                word = status_word(report, e, c["id"])
                if word == "PASS":
                    continue
                guard = state_of(v, "guard")
                shown = str(v.get("word") or guard)  # the check's own word where it has one
                head = (f'<code>{esc(cid)}</code> · <code>{esc(labels[c["id"]])}</code> '
                        f'<span class="chip {"g-warn" if word == "WARN" else guard_class(guard)}">{esc(shown)}</span>'
                        + (f" reach <b>{esc(v.get('reach'))}</b>" if v.get("reach") else "")
                        + {"XFAIL": " <b>XFAIL (expected)</b>", "XPASS": ' <b class="bad">XPASS</b>',
                           "WARN": " <b>WARN</b> (passes the gate)"}.get(word, ""))
                if word == "XPASS":
                    body = (f"<p>expected {esc((e.get('expect') or {}).get(c['id']))}, got {esc(guard)}: the "
                            "expectation is stale.</p>")
                else:
                    # The guard's reason and the detectors are the cell's evidence (one click on): said there once.
                    symptom = f'<p class="symptom">symptom: {esc(v["symptom"])}</p>' if v.get("symptom") else ""
                    body = f"{symptom}{advice_html(report, e, c)}"
                items.append(f'<li data-cell="{esc(cid)}" data-check="{esc(c["id"])}" data-word="{word}"'
                             f'{WARN_CLASS if word == "WARN" else ""}><details><summary>{head}</summary>{body}'
                             f'<p><a href="{esc(anchor(cid))}">evidence of {esc(cid)}</a></p></details></li>')
        if not items:
            return ""
        return f'<h2>Failures and warnings ({len(items)})</h2><ul class="failing" id="failing">{"".join(items)}</ul>'

    def _summary(self, report: dict[str, Any]) -> str:
        gate = report.get("gate") or {}
        per_check = []
        for c in report_checks(report):
            chips = " ".join(f'<span class="chip {guard_class(k)}">{esc(k)} {esc(v)}</span>'
                             for k, v in state_counts(report, c["id"]))
            per_check.append(f'<li data-check="{esc(c["id"])}"><code>{esc(c["id"])}</code>: {chips or "none"}</li>')
        return (f'<div class="summary" id="summary">Guard states per check:<ul class="counts">{"".join(per_check)}'
                f'</ul>Failing states: {esc(", ".join(gate.get("failing_states") or []))}.</div>')

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
