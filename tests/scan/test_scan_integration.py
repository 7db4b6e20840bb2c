"""The wide scan on real downloads from the configured index, and one real cell at the first fixed release.

Marked integration: it reads the index and downloads a handful of zoo wheels (into a
temporary cache, so the download path is exercised), then builds ONE cell
(unsloth 2026.10.9 x the first fixed zoo release) with nox and checks that the
dynamic verdict agrees with the scan's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from matrix import scan

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
SPEC = ">=2026.9.3,<=2026.10.9"


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict]:
    tmp = tmp_path_factory.mktemp("scan")
    proc = subprocess.run(
        [sys.executable, "-m", "matrix", "scan",
         "--zoo", SPEC, "--unsloth", "==2026.10.9", "--out", str(tmp / "out"), "--cache", str(tmp / "cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    doc = json.loads((tmp / "out" / "scan.json").read_text()) if proc.returncode == 0 else {}
    return proc, doc


def test_scan_runs_and_states_the_timeline(scanned) -> None:
    proc, doc = scanned
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first fixed:" in proc.stdout
    by = {z["version"]: z for z in doc["zoo"]}
    assert by["2026.9.3"]["verdict"] == "vulnerable"
    assert by["2026.10.9"]["verdict"] == "fixed"
    assert by["2026.10.9"]["file"]["integrity"] == "sha256"
    first = Version(doc["timeline"]["first_fixed"])
    assert Version("2026.9.3") < first <= Version("2026.10.9")
    assert all(z["verdict"] == "vulnerable" for z in doc["zoo"] if Version(z["version"]) < first)
    assert doc["timeline"]["regressions"] == []
    assert doc["timeline"]["fixed_since"] == doc["timeline"]["first_fixed"]  # no regression on the index today
    assert all(z["confirmed_by"] == "static-only" for z in doc["zoo"])  # no --confirm here
    assert "] unsloth_zoo 2026.9.3 → vulnerable (" in proc.stderr  # the [k/N] progress lines


def test_scan_reads_unsloth_metadata(scanned) -> None:
    _, doc = scanned
    (u,) = doc["unsloth"]
    assert u["zoo_requirement"]["plain"] == ">=2026.10.9"
    assert u["floor"]["version"] == "2026.10.9" and u["exposure"] == "safe"
    assert u["guard"]["state"] == "absent"  # PyPI's 2026.10.9 carries no guard (the check's README, The evidence)


def test_first_fixed_agrees_with_a_real_cell(scanned, tmp_path: Path) -> None:
    _, doc = scanned
    first = doc["timeline"]["first_fixed"]
    out = tmp_path / "out"
    matrix = tmp_path / "first-fixed.toml"
    matrix.write_text(f"""schema = 1
[options]
python = "3.11"
device = "cpu"
[[build]]
name = "u2026.10.9"
package = "unsloth"
source = "pypi"
version = "2026.10.9"
[[build]]
name = "z{first}"
package = "unsloth_zoo"
source = "pypi"
version = "{first}"
""")
    cell_id = f"u2026.10.9__z{first}"
    env = {**os.environ, "SKEWMATRIX_OUT": str(out), "SKEWMATRIX_MATRIX": str(matrix)}
    proc = subprocess.run([sys.executable, "-m", "nox", "-s", f"cell({cell_id})"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    cell = json.loads((out / "cells" / cell_id / "cell.json").read_text())
    (row,) = scan.compare_with_cells(doc, [cell])
    assert row["scan"] == "fixed"
    assert row["status"] == "consistent", row
