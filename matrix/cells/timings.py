"""Where a cell's time went, read from its cell JSON: the harness's steps, the probe phases, each check's cost.

A cell's wall time is a sequence: materialise, install, record, probes, admissibility (the admissibility
question runs beside the install and the probes; its step counts only the wait after them). The probes are a
sequence too: ``import torch``, then the phase processes, which run at once when forked (``raw``,
``unsloth``, ``cpu-backend``, and the static detectors in the probes' own process meanwhile; in probe JSON
from before ``static_in_phases`` they ran first): their seconds overlap, and the cell waits for the longest.
So :func:`breakdown` gives both: ``wall``, parts that add up to the cell's seconds, and ``processes``,
what each phase process spent (``import unsloth``, waiting for the raw findings, its steps). A check's
``cost`` is the sum of its steps' seconds in the cell: what running that check adds, wherever it ran.
:func:`where_time_goes` sums each part over the cells, as a share of the cells' total, beside the floor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

HARNESS_STEPS = ("materialize", "admissibility", "install", "record")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def breakdown(cell: Mapping[str, Any]) -> dict[str, Any]:
    """One cell's times (seconds, rounded to 0.01) from its cell JSON."""
    steps = {s["name"]: _num(s.get("seconds")) for s in cell.get("steps") or () if isinstance(s, dict)}
    probes = cell.get("probes") or {}
    total = _num(cell.get("seconds"))
    wall: dict[str, float] = {name: steps.get(name, 0.0) for name in HARNESS_STEPS}
    # phases_s runs from `import torch` on; the static detectors ran before it, or inside it (static_in_phases)
    static, torch = _num(probes.get("static_s")), _num(probes.get("torch_import_s"))
    inside = {"static": 0.0 if probes.get("static_in_phases") else static, "torch import": torch,
              "phase processes": max(_num(probes.get("phases_s")) - torch, 0.0)}
    wall.update(inside)
    wall["probe start and end"] = max(steps.get("probes", 0.0) - sum(inside.values()), 0.0)
    wall["other"] = max(total - sum(wall.values()), 0.0)
    by_process: dict[str, float] = {}
    by_check: dict[str, dict[str, float]] = {}
    for cid, section in (cell.get("checks") or {}).items():
        for st in section.get("steps") or ():
            seconds = _num(st.get("seconds"))
            by_check.setdefault(cid, {})[st["name"]] = round(seconds, 2)
            process = st.get("process") or "unsloth"
            by_process[process] = by_process.get(process, 0.0) + seconds
    spent = {**({"static": static} if probes else {}), **(probes.get("process_s") or {})}
    processes: dict[str, dict[str, float]] = {}
    for name in sorted(set(spent) | set(by_process)):
        entry = {"wall": _num(spent.get(name)), "steps": by_process.get(name, 0.0)}
        if name == "unsloth":
            entry.update(import_unsloth=_num(probes.get("import_unsloth_s")),
                         waited_for_raw=_num(probes.get("waited_for_raw_s")))
        elif name == "cpu-backend":
            entry["import_unsloth"] = _num(probes.get("import_unsloth_cpu_backend_s"))
        processes[name] = {k: round(v, 2) for k, v in entry.items()}
    reuse = probes.get("raw_reuse") or {}
    return {
        "total": round(total, 2),
        "wall": {k: round(v, 2) for k, v in wall.items()},
        "processes": processes,
        "steps": by_check,
        "cost": {cid: round(sum(s.values()), 2) for cid, s in by_check.items()},
        "raw_reused_from": reuse.get("from_cell") if reuse.get("reused") else None,
        "raw_digest": reuse.get("digest"),
    }


def where_time_goes(rows: Mapping[str, Mapping[str, Any]], floors: Mapping[str, float]) -> dict[str, Any]:
    """Each wall part and each check's cost summed over the cells ``rows`` (:func:`breakdown` values), with
    its share of the cells' total; the phase processes' own parts (they overlap, so no share); the floor."""
    total = sum(r["total"] for r in rows.values())

    def summed(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for part in parts:
            for k, v in part.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def shared(sums: Mapping[str, float]) -> dict[str, dict[str, float]]:
        ordered = sorted(sums.items(), key=lambda kv: -kv[1])
        return {k: {"s": round(v, 2), "share": round(v / total, 3) if total else 0.0} for k, v in ordered}

    processes: dict[str, dict[str, float]] = {}
    for row in rows.values():
        for name, entry in row["processes"].items():
            into = processes.setdefault(name, {})
            for k, v in entry.items():
                into[k] = round(into.get(k, 0.0) + v, 2)
    floor = sum(floors.values())
    return {
        "cells": len(rows), "total_s": round(total, 2),
        "wall": shared(summed(r["wall"] for r in rows.values())),
        "check_cost": shared(summed(r["cost"] for r in rows.values())),
        "processes": processes,
        "raw_reused_cells": sorted(cid for cid, r in rows.items() if r["raw_reused_from"]),
        "floor_s": round(floor, 2), "floor_share": round(floor / total, 3) if total else 0.0,
    }


def render(rows: Mapping[str, Mapping[str, Any]], floors: Mapping[str, float], summary: Mapping[str, Any]) -> str:
    """The bench's tables: per cell, its parts, its phase processes and its checks' cost; then the summary."""
    lines = [f"{'cell':34} {'install':>7} {'static':>6} {'torch':>6} {'raw':>6} {'unsloth':>7} {'import':>6} "
             f"{'cpu-be':>6} {'probes':>6} {'total':>6} {'floor':>6}  raw from"]
    for cid, r in rows.items():
        w, p = r["wall"], r["processes"]
        probes = w["static"] + w["torch import"] + w["phase processes"] + w["probe start and end"]
        lines.append(
            f"{cid:34} {w['install']:7.1f} {w['static']:6.1f} {w['torch import']:6.1f} "
            f"{p.get('raw', {}).get('wall', 0.0):6.1f} {p.get('unsloth', {}).get('wall', 0.0):7.1f} "
            f"{p.get('unsloth', {}).get('import_unsloth', 0.0):6.1f} {p.get('cpu-backend', {}).get('wall', 0.0):6.1f} "
            f"{probes:6.1f} {r['total']:6.1f} {floors.get(cid, 0.0):6.1f}  {r['raw_reused_from'] or '-'}")
    checks = sorted({c for r in rows.values() for c in r["cost"]})
    lines += ["", "each check's added cost (sum of its steps' seconds in the cell):",
              f"{'cell':34} " + " ".join(f"{c[:22]:>22}" for c in checks)]
    for cid, r in rows.items():
        lines.append(f"{cid:34} " + " ".join(f"{r['cost'].get(c, 0.0):22.1f}" for c in checks))
    lines += ["", f"where the time goes ({summary['cells']} cells, {summary['total_s']:.1f} s in all):"]
    for name, v in summary["wall"].items():
        lines.append(f"  {name:24} {v['s']:8.1f} s  {v['share']:6.1%}")
    lines.append("  phase processes, summed (they overlap): " + "; ".join(
        f"{name} " + ", ".join(f"{k} {v:.1f}" for k, v in entry.items())
        for name, entry in summary["processes"].items()))
    lines.append("  checks' cost: " + "; ".join(f"{c} {v['s']:.1f} s ({v['share']:.1%})"
                                                for c, v in summary["check_cost"].items()))
    lines.append(f"  floor (import unsloth, summed): {summary['floor_s']:.1f} s, {summary['floor_share']:.1%} of the "
                 f"total; raw findings reused in {len(summary['raw_reused_cells'])} cell(s)")
    return "\n".join(lines)
