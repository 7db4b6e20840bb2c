"""The GitHub workflow and its list-to-matrix step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrix.cli.ci import GITHUB_MAX_JOBS, CiMatrixError, from_text, job_matrix

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "skewmatrix.yml"


def test_real_nox_list_becomes_a_job_matrix() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("SKEWMATRIX_MATRIX", "SKEWMATRIX_SHARD")}
    listing = subprocess.run([sys.executable, "-m", "nox", "--list", "--json"], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True).stdout
    line = from_text(listing)
    assert line.startswith("matrix=")
    matrix = json.loads(line.removeprefix("matrix="))
    cells = [e["cell"] for e in matrix["include"]]
    ids = subprocess.run([sys.executable, "-m", "matrix", "cells"], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert cells == ids
    assert all(e["session"] == f"cell({e['cell']})" for e in matrix["include"])


def test_non_cell_sessions_are_left_out_and_limits_hold() -> None:
    sessions = [{"session": "matrix"}, {"session": "tests"}, {"session": "cell(a__b)"}]
    assert job_matrix(sessions) == {"include": [{"session": "cell(a__b)", "cell": "a__b"}]}
    with pytest.raises(CiMatrixError, match="no cell"):
        job_matrix([{"session": "tests"}])
    many = [{"session": f"cell(u__z{i})"} for i in range(GITHUB_MAX_JOBS + 1)]
    with pytest.raises(CiMatrixError, match="SKEWMATRIX_SHARD"):
        job_matrix(many)
    with pytest.raises(CiMatrixError, match="not JSON"):
        from_text("nox > Running")
