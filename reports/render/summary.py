"""``summary.md``: the GitHub step summary (``$GITHUB_STEP_SUMMARY``), shaped like GitHub's own.

A ✅/❌ headline with the gate's count, the per-check state counts, then every
failing cell expanded (one line per check, the failing checks with their
plain words) and every passing cell collapsed in one ``<details>``. GitHub
refuses a step summary over 1 MiB, so the text stops before ``BUDGET`` bytes
(UTF-8) with a note naming what was left out and where the full report is.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reports.render.base import Renderer
from reports.render.markdown import _esc, failing_items
from reports.render.view import (
    cell_failed,
    headline,
    plural,
    report_checks,
    short_labels,
    state_counts,
    status_word,
    verdict_line,
)

# GitHub's cap is 1 MiB per step summary; leave room for the closing note and for other steps' summaries.
CAP_BYTES = 1024 * 1024
BUDGET = 900_000


def _size(lines: list[str]) -> int:
    return sum(len(line.encode("utf-8")) + 1 for line in lines)


def _bold(state: str, failing: bool) -> str:
    return f"**{state}**" if failing else state


class SummaryRenderer(Renderer):
    filename: ClassVar[str | None] = "summary.md"

    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        cells = [e for e in report.get("cells") or [] if isinstance(e, dict)]
        checks = report_checks(report)
        labels = short_labels(checks)
        gate = report.get("gate") or {}
        failing = [e for e in cells if cell_failed(report, e)]
        stale = [e for e in cells if not cell_failed(report, e)
                 and any(status_word(report, e, c["id"]) in ("XPASS", "WARN") for c in checks)]
        shown_open = {id(e) for e in failing + stale}
        passing = [e for e in cells if id(e) not in shown_open]
        passes, words = headline(report)
        head = f"## {'✅' if passes else '❌'} skewmatrix: {words}"
        lines = [head, "",
                 f"Matrix `{report.get('matrix', '')}` · {plural(len(cells), 'cell')} × "
                 f"{plural(len(checks), 'check')} · failing states: {', '.join(gate.get('failing_states') or [])}.",
                 "", "| check | guard states |", "|---|---|"]
        for c in checks:
            counts = ", ".join(f"{s} {n}" for s, n in state_counts(report, c["id"])) or "none"
            lines.append(f"| `{c['id']}` ({_esc(labels[c['id']])}) | {_esc(counts)} |")
        lines.append("")

        def block(e: dict[str, Any], expanded: bool) -> list[str]:
            per_check = [_esc(verdict_line(e, c["id"], labels[c["id"]], mark=_bold)) for c in checks]
            if not expanded:
                return [f"- `{e.get('cell_id')}`: " + "; ".join(per_check)]
            mark = "❌" if cell_failed(report, e) else "⚠️"
            return [f"### {mark} `{e.get('cell_id')}`", "", *(f"- {x}" for x in per_check), "",
                    *failing_items(report, e), ""]

        left_out: list[str] = []
        for e in failing + stale:
            b = block(e, expanded=True)
            if left_out or _size(lines) + _size(b) > self.budget:
                left_out.append(str(e.get("cell_id")))
                continue
            lines += b
        if passing:
            lines += [f"<details><summary>✅ {plural(len(passing), 'passing cell')}</summary>", ""]
            shown = 0
            for e in passing:
                b = block(e, expanded=False)
                if _size(lines) + _size(b) > self.budget:
                    break
                lines += b
                shown += 1
            if shown < len(passing):
                lines.append(f"- … {len(passing) - shown} more passing cell(s) left out (step summary size cap)")
            lines += ["", "</details>", ""]
        if left_out:
            lines += [f"**{len(left_out)} failing cell(s) left out to keep this summary under GitHub's 1 MiB cap:** "
                      + ", ".join(f"`{c}`" for c in left_out[:50]) + (" …" if len(left_out) > 50 else ""), ""]
        lines.append("Full evidence: `report.md`, `report.html` and `junit.xml` in this run's artifacts.")
        return "\n".join(lines) + "\n"
