"""The terminal summary printed at the end of every run (colour only on a TTY)."""

from __future__ import annotations

import os
import sys
from typing import Any, ClassVar

from reports.model import cell_at
from reports.render.base import Renderer

COLOURS = {
    "activates": "32", "no-ops": "32", "not-needed": "32",
    "missing": "31;1", "broken": "31;1", "error": "35;1",
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

        zoos = report["grid"]["zoo"]
        rows = report["grid"]["unsloth"]
        labels: dict[tuple[str, str], tuple[str, str]] = {}
        for u in rows:
            for z in zoos:
                e = cell_at(report, u, z)
                if e is None:
                    labels[u, z] = ("", "-")
                    continue
                c = e["classification"]
                beh = c["behavior"]["label"]
                labels[u, z] = (c["guard"], f"{c['zoo']} / {c['guard']}" + (f" {beh}" if beh else ""))
        w0 = max([len("unsloth \\ zoo"), *(len(u) for u in rows)])
        widths = [max([len(z), *(len(labels[u, z][1]) for u in rows)]) for z in zoos]
        out = [f"skewmatrix: {report['matrix']} ({len(report['cells'])} cells)", ""]
        out.append("  ".join(["unsloth \\ zoo".ljust(w0), *(z.ljust(w) for z, w in zip(zoos, widths, strict=True))]))
        for u in rows:
            cells = [paint(labels[u, z][0], labels[u, z][1].ljust(w)) for z, w in zip(zoos, widths, strict=True)]
            out.append("  ".join([u.ljust(w0), *cells]))
        out.append("")
        for e in report["cells"]:
            c = e["classification"]
            if e.get("gate_fail"):
                out.append(paint(c["guard"], f"  {e['cell_id']}: {c['guard']}: {c['guard_reason']}"))
        for c in (report.get("scan") or {}).get("comparisons", []):
            if c["status"] == "inconsistent":
                out.append(paint("error", f"  INCONSISTENT {c['cell_id']}: {c['reason']}"))
        failed = report["gate"]["failed_cells"]
        out.append(f"gate: {len(failed)} of {len(report['cells'])} cell(s) in a failing state"
                   f" ({', '.join(report['gate']['failing_states'])})")
        return "\n".join(out) + "\n"
