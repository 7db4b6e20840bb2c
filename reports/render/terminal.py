"""The terminal summary printed at the end of every run (colour only on a TTY, ``NO_COLOR`` honoured).

Read bottom up, as a terminal is: it ends on the gate's headline, and the harness then prints one short line
per finding (``reports.gate.Outcome.lines``, identical findings grouped) and the exit code: the summary a
person reads first. Above the headline the grid (one row per unsloth build, one column per zoo build, one
short line per check in the check's own words: state, reach, a failing training run), and above that every
finding in full, once, with the cells it covers (``reports.render.findings``), its reason, the user-visible
symptom and the plain words of ``reports.advice``; then the scan's disagreements.
"""

from __future__ import annotations

import os
import sys
from typing import Any, ClassVar

from reports.render.base import Renderer
from reports.render.findings import Finding, compact_line, findings
from reports.render.view import grid_axes, grid_index, headline, plural, report_checks, short_labels, verdict_of

COLOURS = {
    "activates": "32", "no-ops": "32", "not-needed": "32",
    "missing": "31;1", "broken": "31;1", "error": "35;1", "warn": "33;1",
}
WORD_COLOURS = {"FAIL": "missing", "XPASS": "missing", "XFAIL": "warn", "WARN": "warn", "PASS": "not-needed"}


class TerminalRenderer(Renderer):
    filename: ClassVar[str | None] = None

    def __init__(self, colour: bool | None = None) -> None:
        self.colour = colour

    def _use_colour(self) -> bool:
        if self.colour is not None:
            return self.colour
        return sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        colour = self._use_colour()

        def paint(state: str, text: str) -> str:
            return f"\033[{COLOURS.get(state, '0')}m{text}\033[0m" if colour else text

        checks = report_checks(report)
        labels = short_labels(checks)
        cells = [e for e in report.get("cells") or [] if isinstance(e, dict)]
        grid = report.get("grid") or {}
        zoos, rows = list(grid.get("zoo") or []), list(grid.get("unsloth") or [])
        # (unsloth, zoo) -> one (guard state, text) per check
        lines: dict[tuple[str, str], list[tuple[str, str]]] = {}
        at = grid_index(report)
        for u in rows:
            for z in zoos:
                e = at.get((u, z))
                if e is None:
                    lines[u, z] = [("", "-")]
                    continue
                lines[u, z] = [(_colour_of(verdict_of(e, c["id"])), compact_line(e, c["id"], labels[c["id"]]))
                               for c in checks] or [("", "-")]
        corner = " \\ ".join(grid_axes(report))
        w0 = max([len(corner), *(len(u) for u in rows)])
        widths = [max([len(z), *(len(t) for u in rows for _, t in lines[u, z])]) for z in zoos]
        found = findings(report)
        out = [f"skewmatrix: {report.get('matrix', '')} ({plural(len(cells), 'cell')} × "
               f"{plural(len(checks), 'check')})", ""]
        if found:
            out += ["Findings in full (each once, with the cells it covers):", ""]
            for f in found:
                out += [*self._finding(f, paint), ""]
        for c in (report.get("scan") or {}).get("comparisons", []):
            if c.get("status") == "inconsistent":
                out.append(paint("error", f"INCONSISTENT {c.get('cell_id')}: {c.get('reason')}"))
        out.append("  ".join([corner.ljust(w0), *(z.ljust(w) for z, w in zip(zoos, widths, strict=True))]).rstrip())
        for u in rows:
            height = max([1, *(len(lines[u, z]) for z in zoos)])
            for i in range(height):
                parts = [(u if i == 0 else "").ljust(w0)]
                for z, w in zip(zoos, widths, strict=True):
                    st, text = lines[u, z][i] if i < len(lines[u, z]) else ("", "")
                    parts.append(paint(st, text.ljust(w)) if st else text.ljust(w))
                out.append("  ".join(parts).rstrip())
        out.append("")
        passes, words = headline(report)
        out.append(paint("not-needed" if passes else "missing", words))
        return "\n".join(out) + "\n"

    @staticmethod
    def _finding(f: Finding, paint: Any) -> list[str]:
        """A finding in full: its head, its reason, then its details, each on a line of its own."""
        out = [paint(WORD_COLOURS.get(f.word, ""), f.head()), f"    {f.reason}"]
        return out + [f"    {label}: {text}" for label, text in f.details]


def _colour_of(v: dict[str, Any]) -> str:
    """The colour key of a grid line: failing and warning states stand out, passing ones are green."""
    if v.get("gate_warn"):
        return "warn"
    return str(v.get("guard") or "")
