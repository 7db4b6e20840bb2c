"""Running the real CLI (`python -m nox ...`) from integration tests.

Each run gets its own output directory and its own nox env directory, so
tests running in parallel (pytest-xdist) never share a cell env.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
UNSLOTH = "2026.10.9"


def nox_env(out: Path, matrix: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SKEWMATRIX_MATRIX", "SKEWMATRIX_SHARD", "SKEWMATRIX_OUT", "SKEWMATRIX_RUN_ID",
                        "GITHUB_STEP_SUMMARY")}
    env["SKEWMATRIX_OUT"] = str(out)
    if matrix is not None:
        env["SKEWMATRIX_MATRIX"] = str(matrix)
    env.update(extra)
    return env


def nox_argv(envdir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "nox", "--envdir", str(envdir), *args]


def run_nox(envdir: Path, *args: str, out: Path, matrix: Path | None = None, timeout: float = 3600,
            **extra: str) -> subprocess.CompletedProcess[str]:
    """Run nox; its whole output is also kept beside ``envdir`` (``<envdir>.nox.log``) for a post-mortem."""
    proc = subprocess.run(nox_argv(envdir, *args), cwd=ROOT, env=nox_env(out, matrix, **extra),
                          capture_output=True, text=True, timeout=timeout, check=False)
    log = envdir.with_name(envdir.name + ".nox.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"$ nox {' '.join(args)}\nexit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n"
                   f"{proc.stderr}", encoding="utf-8")
    return proc


WORDS = re.compile(r"error|failed|traceback|exception|abort", re.IGNORECASE)


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    """The exit code, the end of each stream, and every line of the whole output that says it failed (a cell
    that broke early in a long run is far from the end)."""
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if WORDS.search(line)]
    return (f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-5000:]}\n--- stderr\n{proc.stderr[-5000:]}"
            f"\n--- lines that say error/failed ({len(said)})\n" + "\n".join(said[:60]))


def run_backport_matrix(tmp: Path, backport: Path, text: str, name: str) -> dict[str, Any]:
    """``nox -s matrix`` on a matrix file ``text`` whose builds name ``backport`` (copied beside it, as
    ``backport = "<its folder name>"``); the process and the report's cells by id."""
    shutil.copytree(backport, tmp / backport.name)
    matrix = tmp / f"{name}.toml"
    matrix.write_text(text, encoding="utf-8")
    out = tmp / "out"
    proc = run_nox(tmp / "nox", "-s", "matrix", out=out, matrix=matrix)
    report_path = out / "report.json"
    assert report_path.is_file(), explain(proc)
    report = json.loads(report_path.read_text())
    return {"proc": proc, "cells": {c["cell_id"]: c for c in report["cells"]}}


def sampled(config: Any, names: Iterable[str], repeats: Iterable[str]) -> list[str]:
    """``names`` (sorted) with ``pytest --all-cells``; else without ``repeats``: the cells CI leaves out because
    each repeats a state and a failing test that another cell of the module already reaches."""
    left_out = set() if config.getoption("--all-cells") else set(repeats)
    return sorted(set(names) - left_out)
