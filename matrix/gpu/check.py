"""``skewmatrix gpu-check``: every case of a check's GPU measurement on an existing CUDA Python.

Run there, offline: ``python3 -m matrix gpu-check --wheelhouse
build/gpu-wheelhouse --out out-gpu``. Per case (``matrix.gpu.cells``), one
cell JSON per compile mode under ``OUT/cells/<id>/``; then
``OUT/gpu-summary.md``, the check's own table (for ``reports/gpu/README.md``),
and ``OUT/gpu-run.json``. Without a CUDA device (or with ``--dry-run``) it is
a dry run: the wheels are installed and ``import unsloth`` runs in each case
(that proves the wheelhouse complete for this interpreter), every
measurement is ``n/a: no CUDA device``. Exit 0 when every cell was written;
a check that cannot run at all (wheelhouse missing or wrong, no interpreter,
an unknown case) raises ``GpuCheckError``, which ``matrix.cli.guarded`` turns
into 2.
"""

from __future__ import annotations

import concurrent.futures
import platform
import sys
import time
from pathlib import Path
from typing import Any

from matrix.cells.cell import write_json_atomic
from matrix.errors import command_parser, parse
from matrix.gpu import GpuCheckError, chosen
from matrix.gpu.cells import run_case
from matrix.gpu.interpreter import inspect_python
from matrix.gpu.wheelhouse import DEFAULT_OUT, load_wheelhouse


def main(argv: list[str], log: Any = print) -> int:
    ap = command_parser("gpu-check", prog="skewmatrix gpu-check", description=__doc__.splitlines()[0])
    ap.add_argument("--check", default="", metavar="ID", help="the check whose GPU measurement runs (default: the "
                    "first registered check that declares one)")
    ap.add_argument("--wheelhouse", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--out", type=Path, required=True, help="output folder (cells/<id>/cell.json, gpu-summary.md)")
    ap.add_argument("--python", type=Path, default=Path(sys.executable),
                    help="the CUDA Python to run in (default: this one); nothing is installed into it")
    ap.add_argument("--scratch", type=Path, default=None, help="where the cases' wheels go (default OUT/scratch)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: every case)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU work even where CUDA is available")
    ap.add_argument("--probe-timeout", type=int, default=200, help="seconds per probe process (raw, unsloth)")
    ap.add_argument("--measure-timeout", type=float, default=300.0, help="seconds for a case's measurement")
    args = parse(ap, argv)
    if isinstance(args, int):
        return args
    started = time.perf_counter()
    check, m = chosen(args.check)
    try:
        cases = [m.case(n.strip()) for n in args.cases.split(",") if n.strip()] or list(m.cases)
    except KeyError as exc:
        raise GpuCheckError(f"--cases {args.cases!r}: {exc.args[0]}") from None
    interp = inspect_python(args.python)
    doc = load_wheelhouse(args.wheelhouse)
    dry = args.dry_run or not interp.cuda
    log(f"gpu check ({check}): Python {interp.version} at {interp.python}, torch {interp.torch}, "
        f"{interp.device_name or 'no CUDA device'}{' -- DRY RUN' if dry else ''}; "
        f"{len(cases)} case(s) x compile {'/'.join(m.compile_modes)}")
    args.out.mkdir(parents=True, exist_ok=True)
    scratch = args.scratch or args.out / "scratch"
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = [pool.submit(run_case, m, c, interp, doc, args.wheelhouse, args.out, scratch, dry,
                               args.probe_timeout, args.measure_timeout, log) for c in cases]
        cells = [cell for f in futures for cell in f.result()]
    table = m.summary(cells)
    meta = {"check": check, "host": platform.node(), "device_name": interp.device_name, "python": interp.version,
            "torch": interp.torch, "dry_run": dry, "seconds": round(time.perf_counter() - started, 1),
            "cells": [c["cell_id"] for c in cells]}
    (args.out / "gpu-summary.md").write_text(
        f"GPU check on {interp.device_name or 'a host without CUDA (dry run)'}, torch {interp.torch}, "
        f"Python {interp.version}; {meta['seconds']} s.\n\n{table}", encoding="utf-8")
    write_json_atomic(args.out / "gpu-run.json", meta)
    log(table)
    for c in cells:
        err = c.get("error")
        log(f"{c['cell_id']}: {'error: ' + err['message'].splitlines()[0] if err else 'probed'}")
    log(f"gpu check: {len(cells)} cell(s) in {args.out / 'cells'} ({meta['seconds']} s)")
    return 0
