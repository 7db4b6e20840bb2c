"""The report: every cell result of a run, classified per check, in one versioned document.

Pure: cell dicts in, one report dict out (schema ``reports/report.schema.json``).
For each cell and each registered check (``probes.checks``), that check's own
``verdict.classify`` gives its states; nothing here names a hazard. Reading
result files is the harness's job (``matrix.cells.collect``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from probes import checks
from probes.checks.vocabulary import FAILING_BY_DEFAULT, GUARD_STATES, REACHES, GuardState, Reach, Verdict, ZooState

REPORT_SCHEMA = "skewmatrix.report/2"
CELL_SCHEMA = "skewmatrix.cell/2"


def _error_verdict(reason: str) -> Verdict:
    return Verdict(ZooState.UNKNOWN, "not probed", "unknown", "unknown", GuardState.ERROR, reason,
                   reach=Reach.UNKNOWN, reach_reason="the cell was not probed, so no training run either")


def verdicts(cell: dict[str, Any], failing: frozenset[str] = FAILING_BY_DEFAULT,
             strict: bool = False) -> dict[str, dict[str, Any]]:
    """The verdict of every check the cell runs (those whose subject has the cell's axes: the keys of its
    ``builds``), as dicts (see ``Verdict.to_dict``)."""
    out = {}
    error = cell.get("error")
    for name in cell_checks(cell):
        info = checks.info(name)
        section = (cell.get("checks") or {}).get(info.id)
        if error:
            message = str(error.get("message") or "").splitlines()
            v = _error_verdict(f"{error.get('kind')}: {(message[0] if message else '')[:300]}")
        elif section is None:
            v = _error_verdict("this check did not run in the cell (older probes, or --check excluded it)")
        else:
            v = checks.verdict_module(name).classify(section, cell)
        out[info.id] = v.to_dict(failing, strict)
    return out


def cell_checks(cell: dict[str, Any]) -> list[str]:
    """The registered folders of the checks a cell runs: those whose subject has the cell's axes."""
    roles = list(cell.get("builds") or {})
    return checks.for_axes(roles) or list(checks.REGISTRY)


def _builds(cell: dict[str, Any]) -> list[dict[str, Any]]:
    return [b if isinstance(b, dict) else {} for b in (cell.get("builds") or {}).values()]


def _stack_name(cell: dict[str, Any]) -> str | None:
    return (cell.get("stack") or {}).get("name") if isinstance(cell.get("stack"), dict) else None


def row_of(cell: dict[str, Any]) -> str:
    """The grid row of a cell: its build on the first axis (unsloth, in an unsloth x unsloth_zoo matrix)."""
    first = _builds(cell)[:1]
    return str(first[0].get("name")) if first else "-"


def column_of(cell: dict[str, Any]) -> str:
    """The grid column of a cell: its builds on the other axes (the zoo build), and its trainer stack where
    the matrix names one; a one-axis matrix's columns are its stacks."""
    rest = " × ".join(str(b.get("name")) for b in _builds(cell)[1:])
    stack = _stack_name(cell)
    if stack:
        return f"{rest} @ {stack}" if rest else stack
    return rest or "-"


def axes_of(cell: dict[str, Any]) -> tuple[str, str]:
    """What the grid's rows and columns are, in words: ``("unsloth", "zoo")``, ``("nanochat", "stack")``."""
    roles = list(cell.get("builds") or {})
    cols = roles[1:] + (["stack"] if _stack_name(cell) else [])
    return (roles[0] if roles else "-"), (" × ".join(cols) or "-")


def check_table() -> list[dict[str, Any]]:
    """The registered checks, in registry order, as the report lists them, each with its declared upstream fix
    (``upstream_fix``: release and pull requests, None when the check declares none)."""
    out = []
    for name in checks.REGISTRY:
        fix = checks.upstream_fix(name)
        declared = None if fix is None else {**asdict(fix), "prs": list(fix.prs)}  # JSON's arrays are lists
        out.append({**asdict(checks.info(name)), "upstream_fix": declared})
    return out


def build_report(cells: list[dict[str, Any]], *, matrix: str, order: list[str] | None = None,
                 failing: frozenset[str] = FAILING_BY_DEFAULT, strict: bool = False) -> dict[str, Any]:
    """The report of ``cells``. ``strict``: ``missing`` fails the gate even where its reach is ``latent``."""
    if order is not None:
        rank = {cid: i for i, cid in enumerate(order)}
        cells = sorted(cells, key=lambda c: rank.get(c["cell_id"], len(rank)))
    failing = frozenset(str(getattr(s, "value", s)) for s in failing)
    table = check_table()
    rows: list[str] = []
    cols: list[str] = []
    entries = []
    for cell in cells:
        u, z = row_of(cell), column_of(cell)
        if u not in rows:
            rows.append(u)
        if z not in cols:
            cols.append(z)
        v = verdicts(cell, failing, strict)
        entries.append({**cell, "verdicts": v, "gate_fail": any(x["gate_fail"] for x in v.values())})
    seen = {cid for e in entries for cid in e["verdicts"]}
    table = [c for c in table if c["id"] in seen] or table  # the checks these cells ran, in registry order
    summary = {c["id"]: dict.fromkeys(GUARD_STATES, 0) for c in table}
    reach = {c["id"]: dict.fromkeys(REACHES, 0) for c in table}
    for e in entries:
        for cid, v in e["verdicts"].items():
            summary[cid][v["guard"]] += 1
            if v.get("reach"):
                reach[cid][v["reach"]] += 1
    return {
        "schema": REPORT_SCHEMA,
        "generated": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "matrix": matrix,
        "checks": table,
        # "unsloth" holds the rows and "zoo" the columns whatever the axes are (schema 2); "axes" names them.
        "grid": {"unsloth": rows, "zoo": cols, "axes": list(axes_of(cells[0])) if cells else ["unsloth", "zoo"]},
        "summary": summary,
        "reach_summary": reach,
        "gate": {"failing_states": sorted(failing), "strict": strict,
                 "failed_cells": [e["cell_id"] for e in entries if e["gate_fail"]],
                 "warned_cells": [e["cell_id"] for e in entries
                                  if any(x.get("gate_warn") for x in e["verdicts"].values())]},
        "cells": entries,
    }
