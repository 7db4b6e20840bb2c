"""``nox -s bench``: measure the matrix against its floor.

The floor of a cell is what it cannot avoid: ``python -c "import unsloth"``
in that cell's env, once per mode the cell probes (``UNSLOTH_ALLOW_CPU=1``,
and zoo's CPU backend where the cell ran that process), best of 3 each,
measured in the same run. Everything above
the floors is harness overhead. Printed and written to
``reports/out/bench.json``:

* per cell: materialise, admissibility, install, the static detectors,
  ``import torch``, each probe process (raw, unsloth with its ``import
  unsloth``, CPU backend), each check's steps and its added cost, total; the
  floor; whether its raw findings were another cell's (``matrix.cells.timings``);
* where the time goes: each part summed over the cells, its share, the floor;
* R = wall time of the matrix with one job / sum of the cell floors;
* S = wall(1 job) / wall(2 jobs) (``nox -j 2``);
* the wall time of an unchanged rerun (every cell reused by its digest);
* a cold run: a fresh, empty uv cache, its wall time and the bytes received
  on this machine's network interfaces meanwhile (``--no-cold`` skips it).

Runs use their own output and env directories under ``reports/out/bench/``
and ``--force`` so that reuse does not flatter the timed runs. The timed runs
are ``nox -s matrix`` in a child process on purpose: what is measured is the
command a user runs, nox's session processes included. The floors run
through ``matrix.envs.envrun``, in the environment a cell's probes get. ``nox -s bench
-- scan`` runs the scan benchmark instead (``scan``, below): releases
classified, seconds cold and warm, peak RSS -> ``bench-scan.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from matrix import settings
from matrix.cells import timings
from matrix.cells.cell import write_json_atomic
from matrix.cells.runs import Run
from matrix.envs import envrun
from matrix.errors import SkewmatrixError, command_parser, parse
from matrix.scan.cache import ScanIndex, write_atomic
from matrix.scan.run import ScanOptions
from matrix.scan.run import run as run_scan
from matrix.spec import REPO_ROOT, nox_safe


def rx_bytes() -> int:
    """Bytes received on every non-loopback interface so far (Linux /proc/net/dev)."""
    total = 0
    try:
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    except OSError:
        return 0
    for line in lines:
        name, data = line.split(":", 1)
        if name.strip() != "lo":
            total += int(data.split()[0])
    return total


def nox_run(out: Path, envdir: Path, *args: str, env_extra: dict[str, str] | None = None,
            jobs: int = 1) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {k: v for k, v in os.environ.items() if k not in (settings.RUN_ID_ENV, settings.SHARD_ENV)}
    env[settings.OUT_ENV] = str(out)
    env.update(env_extra or {})
    envdir.mkdir(parents=True, exist_ok=True)  # parallel sessions must not race to create it
    argv = [sys.executable, "-m", "nox", "--envdir", str(envdir), "-j", str(jobs), *args]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


# How `import unsloth` is run in each mode a cell probes (probes/phases.py sets the same in its processes).
FLOOR_MODES = {"allow-cpu": {"UNSLOTH_ALLOW_CPU": "1"}, "cpu-backend": {}}


def cell_modes(cell_json: Path) -> list[str]:
    """The modes a cell imported unsloth in: its CPU mode, plus zoo's CPU backend where it ran a third process."""
    try:
        cell = json.loads(cell_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ["allow-cpu"]
    options, probes = cell.get("options") or {}, cell.get("probes") or {}
    modes = [options.get("cpu_mode") or "allow-cpu"]
    if (probes.get("cpu_backend") or {}).get("process") == "cpu-backend":
        modes.append("cpu-backend")
    return modes


def floor(env_dir: Path, modes: list[str] | None = None, repeats: int = 3) -> float:
    """A cell's floor: for each mode it probes, the best of ``repeats`` wall times of ``import unsloth`` in
    ``env_dir`` in that mode (a scratch directory each), summed."""
    python = env_dir / "bin" / "python"
    total = 0.0
    for mode in modes or ["allow-cpu"]:
        times = []
        with tempfile.TemporaryDirectory(prefix="skewmatrix-floor-") as tmp:
            for _ in range(repeats):
                # the environment a cell's processes get (matrix.envs.envrun: offline, no stray PYTHONPATH)
                start = time.perf_counter()
                ran = envrun.run_python(python, "import unsloth", cwd=Path(tmp), timeout=600, **FLOOR_MODES[mode])
                times.append(time.perf_counter() - start)
                if not ran.ok:
                    raise BenchError(f"bench: the floor of {env_dir} (import unsloth, {mode}) failed "
                                     f"(exit {ran.returncode}):\n{ran.tail()}")
        total += min(times)
    return total


def cell_breakdown(out: Path) -> dict[str, dict[str, Any]]:
    """Each cell's times (``matrix.cells.timings.breakdown``), by cell id."""
    rows = {}
    for path in sorted((out / "cells").glob("*/cell.json")):
        cell = json.loads(path.read_text())
        rows[cell["cell_id"]] = timings.breakdown(cell)
    return rows


class BenchError(SkewmatrixError):
    """A benchmark run failed: the figures would mean nothing."""


def check(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        aborted = [line for line in proc.stdout.splitlines() if "aborted" in line or "failed" in line]
        raise BenchError(f"bench: {what} failed (exit {proc.returncode}):\n" + "\n".join(aborted[:20])
                         + f"\n...\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")


def run(args: argparse.Namespace, run: Run) -> int:
    """``nox -s bench`` / ``skewmatrix bench`` with parsed arguments (``matrix.cli``: ``--no-cold``,
    ``--no-warmup``; ``bench scan ...`` goes to the scan's benchmark instead)."""
    base = run.out / "bench"
    shutil.rmtree(base, ignore_errors=True)
    envdir = base / "envs"
    matrix = run.matrix
    ids = [c.id for c in matrix.cells]
    figures: dict[str, Any] = {"matrix": str(matrix.path), "cells": len(ids), "cpus": os.cpu_count()}
    say = lambda msg: print(f"bench: {msg}", flush=True)  # noqa: E731

    if not args.no_warmup:
        say("warm-up run (fills the uv cache; not timed)")
        _, proc = nox_run(base / "warmup", envdir, "-s", "matrix", "--", "--force", "--exit-zero")
        check(proc, "warm-up run")
    say("timed run, 1 job")
    w1, proc = nox_run(base / "j1", envdir, "-s", "matrix", "--", "--force", "--exit-zero")
    check(proc, "1-job run")
    # Before the rerun: nox recreates a reused cell's env empty, and the floors need them full.
    say("floors: import unsloth in each cell env, per mode the cell probes, best of 3")
    floors = {cid: floor(envdir / f"cell-{nox_safe(cid)}", cell_modes(base / "j1" / "cells" / cid / "cell.json"))
              for cid in ids}
    say("unchanged rerun (every cell should be reused)")
    rerun, proc = nox_run(base / "j1", envdir, "-s", "matrix", "--", "--exit-zero")
    check(proc, "rerun")
    reused = (proc.stdout + proc.stderr).count("unchanged since the last run")  # nox logs to stderr
    say("timed run, 2 jobs")
    w2, proc = nox_run(base / "j2", base / "envs-j2", "-s", "matrix", "--", "--force", "--exit-zero", jobs=2)
    check(proc, "2-job run")
    breakdown = cell_breakdown(base / "j1")
    figures.update(
        wall_1_job_s=round(w1, 2), wall_2_jobs_s=round(w2, 2), rerun_unchanged_s=round(rerun, 2),
        rerun_reused_cells=reused, floors_s={k: round(v, 2) for k, v in floors.items()},
        sum_floors_s=round(sum(floors.values()), 2), R=round(w1 / sum(floors.values()), 3), S=round(w1 / w2, 3),
        per_cell=breakdown, where_time_goes=timings.where_time_goes(breakdown, floors),
        median_cell_s=round(statistics.median(r["total"] for r in breakdown.values()), 2) if breakdown else None,
    )
    # The training run's added seconds per cell (every check's `train` step), against the median cell: target <= 25 %.
    train = [sum(steps.get("train", 0.0) for steps in row["steps"].values()) for row in breakdown.values()]
    train = [v for v in train if v]
    if train and figures["median_cell_s"]:
        figures.update(train_s_median=round(statistics.median(train), 2),
                       train_share_of_median_cell=round(statistics.median(train) / figures["median_cell_s"], 3))
    if not args.no_cold:
        say("cold run: a fresh, empty uv cache")
        with tempfile.TemporaryDirectory(prefix="skewmatrix-cold-uv-") as cache:
            rx = rx_bytes()
            wc, proc = nox_run(base / "cold", base / "envs-cold", "-s", "matrix", "--", "--force", "--exit-zero",
                               env_extra={"UV_CACHE_DIR": cache, settings.WHEEL_CACHE_ENV: f"{cache}/wheels"})
            received = rx_bytes() - rx
            check(proc, "cold run")
        figures.update(cold_wall_s=round(wc, 2), cold_received_bytes=received)
        shutil.rmtree(base / "envs-cold", ignore_errors=True)
    shutil.rmtree(base / "envs-j2", ignore_errors=True)
    write_json_atomic(run.out / "bench.json", figures)

    print()
    print(timings.render({cid: breakdown[cid] for cid in ids if cid in breakdown}, floors,
                         figures["where_time_goes"]))
    print(f"\nwall, 1 job: {w1:.1f} s; 2 jobs: {w2:.1f} s; sum of floors: {sum(floors.values()):.1f} s")
    print(f"R = {figures['R']:.2f} (target <= 1.2); S = {figures['S']:.2f} (target >= 1.6)")
    print(f"unchanged rerun: {rerun:.1f} s, {reused} of {len(ids)} cells reused")
    if "train_s_median" in figures:
        print(f"training run: {figures['train_s_median']:.1f} s a cell (median), "
              f"{figures['train_share_of_median_cell']:.0%} of the median cell (target <= 25 %)")
    if "cold_wall_s" in figures:
        print(f"cold cache: {figures['cold_wall_s']:.1f} s, {figures['cold_received_bytes'] / 1e9:.2f} GB received")
    print(f"wrote {run.out / 'bench.json'}")
    return 0


# ---------------------------------------------------------------- nox -s bench -- scan


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def scan(argv: list[str], out: Path) -> int:
    """``nox -s bench -- scan``: the scan, cold then warm, in a throwaway cache."""
    p = command_parser("bench", prog="skewmatrix bench scan")
    p.add_argument("what", nargs="?", default="scan")
    p.add_argument("--zoo", default="")
    p.add_argument("--with-unsloth", action="store_true", help="also scan every unsloth release")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--out", type=Path, default=None)
    ns = parse(p, argv)
    if isinstance(ns, int):
        return ns
    opts = ScanOptions(zoo=ns.zoo, workers=ns.workers, skip_unsloth=not ns.with_unsloth)
    figures: dict[str, Any] = {"workers": ns.workers, "with_unsloth": ns.with_unsloth}
    with tempfile.TemporaryDirectory(prefix="skewmatrix-bench-") as tmp:
        for label in ("cold", "warm"):
            t0 = time.monotonic()
            doc = run_scan(opts, cache=Path(tmp), index=ScanIndex(cache=Path(tmp)), log=lambda s: None)
            figures[f"{label}_s"] = round(time.monotonic() - t0, 3)
            figures[f"{label}_stats"] = doc["stats"]
    figures.update(releases_listed=len(doc["zoo"]), zoo_classified=doc["stats"]["zoo_classified"],
                   unsloth_classified=doc["stats"]["unsloth_classified"], peak_rss_mib=round(_peak_rss_mib(), 1),
                   fixed_since=doc["timeline"]["fixed_since"], cpus=os.cpu_count())
    out = ns.out or out
    write_atomic(out / "bench-scan.json", json.dumps(figures, indent=1) + "\n")
    print(f"bench scan: {figures['zoo_classified']} zoo release(s) classified"
          + (f", {figures['unsloth_classified']} unsloth" if ns.with_unsloth else "")
          + f"; cold {figures['cold_s']} s, warm {figures['warm_s']} s; peak RSS {figures['peak_rss_mib']} MiB")
    print(f"wrote {out / 'bench-scan.json'}")
    return 0
