"""The report: every cell JSON of a run, classified, in one versioned document.

``load_cells`` reads ``<out>/cells/*/cell.json`` and refuses (by name) any
file that is truncated, corrupt or of another schema: a result is never
silently dropped. ``build_report`` classifies each cell and lays out the
grid (rows: unsloth builds, columns: zoo builds, in matrix order). The
report's schema is ``reports/report.schema.json``.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from matrix.errors import SkewmatrixError
from reports.classify import FAILING_BY_DEFAULT, GuardState, classify

REPORT_SCHEMA = "skewmatrix.report/1"
CELL_SCHEMA = "skewmatrix.cell/1"


class ResultFileError(SkewmatrixError):
    """A cell result file cannot be trusted."""


def load_cell(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResultFileError(f"{path}: unreadable cell result ({exc}); rerun that cell") from exc
    if not isinstance(data, dict) or data.get("schema") != CELL_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultFileError(f"{path}: schema {got!r} is not {CELL_SCHEMA!r}; rerun that cell")
    for key in ("cell_id", "builds", "steps"):
        if key not in data:
            raise ResultFileError(f"{path}: cell result lacks {key!r}; rerun that cell")
    # Accept only what every renderer can show: a result that would crash a
    # renderer later is refused now, by name.
    try:
        report = build_report([data], matrix=str(path))
        from reports.render import RENDERERS

        for renderer in RENDERERS.values():
            renderer.render(report)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise ResultFileError(f"{path}: malformed cell result ({type(exc).__name__}: {exc}); rerun that cell") from exc
    return data


def load_cells(out_dir: Path, only: list[str] | None = None) -> list[dict[str, Any]]:
    cells = []
    for path in sorted((out_dir / "cells").glob("*/cell.json")):
        if only is not None and path.parent.name not in only:
            continue
        cells.append(load_cell(path))
    return cells


def build_report(cells: list[dict[str, Any]], *, matrix: str, order: list[str] | None = None,
                 failing: frozenset[GuardState] = FAILING_BY_DEFAULT) -> dict[str, Any]:
    if order is not None:
        rank = {cid: i for i, cid in enumerate(order)}
        cells = sorted(cells, key=lambda c: rank.get(c["cell_id"], len(rank)))
    rows: list[str] = []
    cols: list[str] = []
    entries = []
    for cell in cells:
        cls = classify(cell)
        u, z = cell["builds"]["unsloth"]["name"], cell["builds"]["zoo"]["name"]
        if u not in rows:
            rows.append(u)
        if z not in cols:
            cols.append(z)
        entries.append({**cell, "classification": cls.to_dict(), "gate_fail": cls.guard in failing})
    summary: dict[str, int] = {s.value: 0 for s in GuardState}
    for e in entries:
        summary[e["classification"]["guard"]] += 1
    return {
        "schema": REPORT_SCHEMA,
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "matrix": matrix,
        "grid": {"unsloth": rows, "zoo": cols},
        "summary": summary,
        "gate": {"failing_states": sorted(s.value for s in failing),
                 "failed_cells": [e["cell_id"] for e in entries if e["gate_fail"]]},
        "cells": entries,
    }


def cell_at(report: dict[str, Any], unsloth: str, zoo: str) -> dict[str, Any] | None:
    for e in report["cells"]:
        if e["builds"]["unsloth"]["name"] == unsloth and e["builds"]["zoo"]["name"] == zoo:
            return e
    return None
