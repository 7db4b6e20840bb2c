"""The terminal summary printed at the end of every run (colour only on a TTY, ``NO_COLOR`` honoured).

The grid has one row per unsloth build and one column per zoo build; each
cell shows one line per registered check (``label: zoo / guard behaviour ·
train outcome``). Below it, every failing check of every cell with its
reason, the user-visible symptom and the plain words of ``reports.advice``;
then the passing checks with residual failures, the scan's disagreements and
the gate line.
"""

from __future__ import annotations

import os
import sys
from typing import Any, ClassVar

from reports.advice import advice, fixed_since
from reports.render.base import Renderer
from reports.render.view import (
    grid_axes,
    grid_index,
    headline,
    plural,
    report_checks,
    residual_names,
    residual_note,
    residual_of,
    short_labels,
    state_of,
    status_word,
    verdict_line,
    verdict_of,
)

COLOURS = {
    "activates": "32", "no-ops": "32", "not-needed": "32",
    "missing": "31;1", "broken": "31;1", "error": "35;1", "warn": "33;1",
}


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
                lines[u, z] = [(state_of(verdict_of(e, c["id"]), "guard"),
                                verdict_line(e, c["id"], labels[c["id"]])) for c in checks] or [("", "-")]
        corner = " \\ ".join(grid_axes(report))
        w0 = max([len(corner), *(len(u) for u in rows)])
        widths = [max([len(z), *(len(t) for u in rows for _, t in lines[u, z])]) for z in zoos]
        out = [f"skewmatrix: {report.get('matrix', '')} ({plural(len(cells), 'cell')} × "
               f"{plural(len(checks), 'check')})", ""]
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
        out += self._findings(report, cells, checks, paint)
        for c in (report.get("scan") or {}).get("comparisons", []):
            if c.get("status") == "inconsistent":
                out.append(paint("error", f"  INCONSISTENT {c.get('cell_id')}: {c.get('reason')}"))
        passes, words = headline(report)
        out.append(paint("not-needed" if passes else "missing", words))
        return "\n".join(out) + "\n"

    @staticmethod
    def _findings(report: dict[str, Any], cells: list[dict[str, Any]], checks: list[dict[str, Any]],
                  paint: Any) -> list[str]:
        out = []
        for e in cells:
            cid = e.get("cell_id")
            for c in checks:
                v = verdict_of(e, c["id"])
                word = status_word(report, e, c["id"])
                if v.get("gate_fail"):
                    guard = state_of(v, "guard")
                    out.append(paint(guard, f"{word} {cid} · {c['id']}: {guard}: {v.get('guard_reason') or ''}"))
                    if v.get("symptom"):
                        out.append(f"    symptom: {v['symptom']}")
                    a = advice(e, c, fixed=fixed_since(report, c["id"]))
                    out += [f"    {label}: {text}" for label, text in a.lines()]
                elif word == "WARN":
                    out.append(paint("warn", f"WARN {cid} · {c['id']}: {state_of(v, 'guard')}, reach latent: "
                                             f"{v.get('reach_reason') or ''}"))
                elif word == "XPASS":
                    out.append(paint("missing", f"XPASS {cid} · {c['id']}: expected {e['expect'][c['id']]}, got "
                                                f"{state_of(v, 'guard')}: the expectation is stale"))
                elif residual_of(e, c["id"]):
                    out.append(f"PASS {cid} · {c['id']}: {residual_note(e, c['id'])} "
                               f"({residual_names(e, c['id'])})")
        return out
