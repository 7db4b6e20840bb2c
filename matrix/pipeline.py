"""The run, as one readable pipeline.

load matrix -> expand cells -> (per cell) build env -> probe -> cell JSON
-> collect -> classify -> render -> gate.

The nox sessions in ``noxfile.py`` and ``python -m matrix`` are thin calls
into this module. Output goes to ``reports/out/`` unless ``SKEWMATRIX_OUT``
names another directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrix import spec
from matrix.cell import CELL_SCHEMA, run_cell
from matrix.errors import SkewmatrixError
from matrix.spec import REPO_ROOT, Matrix

OUT_ENV = "SKEWMATRIX_OUT"


def out_dir() -> Path:
    value = os.environ.get(OUT_ENV, "").strip()
    return Path(value).resolve() if value else REPO_ROOT / "reports" / "out"


def load_matrix(check_index: bool = False) -> Matrix:
    return spec.load(spec.matrix_path_from_env(), check_index=check_index)


def cell_ids_or_exit() -> list[str]:
    """For the noxfile: the cell ids, or a clean message and exit 2 on a bad matrix."""
    try:
        return [c.id for c in load_matrix(check_index=False).cells]
    except SkewmatrixError as exc:
        print(f"skewmatrix: {exc}", file=sys.stderr)
        raise SystemExit(exc.return_code) from None


def run_one(cell_id: str, env_dir: Path, *, create_env: bool = False, log: Callable[[str], Any] = print) -> dict:
    matrix = load_matrix(check_index=True)
    cell = matrix.cell(cell_id)
    out = out_dir()
    log(f"[{cell_id}] {cell.unsloth.describe()} x {cell.zoo.describe()} -> {out / 'cells' / cell_id}")
    return run_cell(cell, matrix, out, env_dir, create_env=create_env, progress=log)


def missing_cell(cell: spec.Cell, matrix: Matrix) -> dict[str, Any]:
    """A placeholder for a declared cell that left no result: shown as an error, never dropped."""
    return {
        "schema": CELL_SCHEMA, "cell_id": cell.id, "matrix": str(matrix.path),
        "builds": {role: {"name": b.name, "package": b.package, "source": b.source.KIND,
                          "describe": b.describe(), "version": b.source.version_hint()}
                   for role, b in (("unsloth", cell.unsloth), ("zoo", cell.zoo))},
        "options": dict(cell.options.__dict__), "steps": [], "installed": [], "admissible": None,
        "torch": None, "probes": None,
        "error": {"kind": "missing", "message": "the cell left no result (it did not run, or it was interrupted)",
                  "log_tail": ""},
    }


def report(out: Path | None = None, *, log: Callable[[str], Any] = print) -> dict[str, Any]:
    """Collect the declared matrix's cell results, classify, render every format."""
    from reports.model import build_report, load_cells
    from reports.render import RENDERERS, write_all

    matrix = load_matrix(check_index=False)
    out = out or out_dir()
    ids = [c.id for c in matrix.cells]
    found = {c["cell_id"]: c for c in load_cells(out, only=ids)}
    cells = [found.get(c.id) or missing_cell(c, matrix) for c in matrix.cells]
    rel = os.path.relpath(matrix.path, REPO_ROOT) if matrix.path.is_absolute() else str(matrix.path)
    rep = build_report(cells, matrix=rel, order=ids)
    out.mkdir(parents=True, exist_ok=True)
    written = write_all(rep, out)
    log(RENDERERS["terminal"].render(rep))
    for p in written:
        log(f"wrote {p}")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(RENDERERS["markdown"].render(rep)[: 1000 * 1000])
    return rep
