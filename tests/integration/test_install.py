"""The README's one install command for the commands without nox, run from a fresh venv.

``python -m pip install .`` (here ``uv pip install``, the same resolution) in a copy of the clone installs the
harness with its dependencies; then ``skewmatrix`` and ``python -m matrix`` answer from any directory, the
embedded default matrix included. Without it, ``python -m matrix`` in a bare interpreter fails on its first
missing dependency, which is why the README names the command.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import ROOT

pytestmark = pytest.mark.integration


def copy_of_clone(dst: Path) -> Path:
    """The tracked files of this checkout (what a clone has), so that building writes nothing into it."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


def test_the_readme_install_command_gives_both_entry_points(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`python -m pip install .`" in readme  # the command this test runs, as the README gives it
    clone = copy_of_clone(tmp_path / "clone")
    venv = tmp_path / "venv"
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
    py = venv / "bin" / "python"
    bare = subprocess.run([str(py), "-m", "matrix", "cells"], cwd=clone, capture_output=True, text=True, check=False)
    assert bare.returncode != 0 and "ModuleNotFoundError" in bare.stderr  # why the README names the install step
    subprocess.run([*uv, "pip", "install", "-q", "-p", str(py), "."], cwd=clone, check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cells = subprocess.run([str(venv / "bin" / "skewmatrix"), "cells"], cwd=elsewhere, capture_output=True, check=False,
                           text=True)
    assert cells.returncode == 0, cells.stderr
    assert "u2026.10.9-guard__z2026.10.9" in cells.stdout.split()  # the embedded default matrix's cells
    helped = subprocess.run([str(py), "-m", "matrix", "--help"], cwd=elsewhere, capture_output=True, text=True,
                            check=False)
    assert helped.returncode == 0 and "history" in helped.stdout
    bad = subprocess.run([str(py), "-m", "matrix", "no-such-command"], cwd=elsewhere, capture_output=True, check=False,
                         text=True)
    assert bad.returncode == 2
