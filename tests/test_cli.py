"""Bad input at the command line: a clean message and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BAD = 'schema = 1\n[[build]]\nname = "u"\npackage = "unslot"\nsource = "pypi"\nverison = "1"\n'


@pytest.mark.parametrize("argv", [["-m", "nox", "-s", "matrix"], ["-m", "nox", "--list"], ["-m", "matrix", "cells"],
                                  ["-m", "matrix", "report"]])
def test_bad_matrix_file_exits_2_with_every_problem(tmp_path: Path, argv: list[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    env = {**os.environ, "SKEWMATRIX_MATRIX": str(bad), "SKEWMATRIX_OUT": str(tmp_path / "out")}
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    assert "Traceback" not in text
    assert f"{bad}: 3 problem(s)" in text
    assert "unknown key 'verison' (did you mean 'version'?)" in text
    assert "package 'unslot' is not one of unsloth, unsloth_zoo" in text


def test_bad_shard_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "SKEWMATRIX_SHARD": "3/2"}
    env.pop("SKEWMATRIX_MATRIX", None)
    proc = subprocess.run([sys.executable, "-m", "nox", "--list"], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "shard '3/2': K must be between 1 and N" in proc.stderr
