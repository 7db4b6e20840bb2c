"""Running the real CLI (`python -m nox ...`) from integration tests.

Each run gets its own output directory and its own nox env directory, so
tests running in parallel (pytest-xdist) never share a cell env.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
    return subprocess.run(nox_argv(envdir, *args), cwd=ROOT, env=nox_env(out, matrix, **extra),
                          capture_output=True, text=True, timeout=timeout, check=False)


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-5000:]}\n--- stderr\n{proc.stderr[-5000:]}"


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
