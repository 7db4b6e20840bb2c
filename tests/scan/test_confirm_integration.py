"""``nox -s scan -- --confirm`` on the real zoo boundaries: the fused check's 2026.10.5 (last vulnerable) and
2026.10.6 (first fixed), and the GRPO check's 2026.9.7 and 2026.9.8.

Marked integration: it reads the index, downloads the two zoo wheels into a temporary cache, builds one
throwaway env per release with uv and runs the check's runtime detector in each. The runtime verdicts
must agree with the static ones, so both releases end ``confirmed_by: runtime`` and the exit code is 0.
The GRPO boundary, from the two rl_replacements.py sources: 2026.9.7's dapo/cispo/vespo branches divide the
summed token loss by the count the trainer hands in, so an all-masked batch with a count of 0 is 0 / 0
(NaN); 2026.9.8 floors every such division at a positive constant, so the same call is finite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_confirm_agrees_on_the_boundary(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "matrix", "scan", "--zoo", ">=2026.10.5,<=2026.10.6", "--no-unsloth", "--confirm",
         "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "scan.json").read_text())
    by = {z["version"]: z for z in doc["zoo"]}
    assert set(by) == {"2026.10.5", "2026.10.6"}
    for version, verdict in (("2026.10.5", "vulnerable"), ("2026.10.6", "fixed")):
        z = by[version]
        assert (z["static_verdict"], z["runtime"]["verdict"], z["verdict"], z["confirmed_by"]) == (
            verdict, verdict, verdict, "runtime"), z
    assert "loss nan" in by["2026.10.5"]["runtime"]["reason"]
    t = doc["timeline"]
    assert (t["last_vulnerable"], t["fixed_since"]) == ("2026.10.5", "2026.10.6")
    assert t["fixed_since_confirmed_by"] == t["last_vulnerable_confirmed_by"] == "runtime"
    assert "confirm [1/2] unsloth_zoo 2026.10.5 (boundary): static vulnerable, runtime vulnerable" in proc.stderr
    assert "(confirmed at runtime)" in (tmp_path / "out" / "scan.md").read_text()
    assert not list((tmp_path / "cache" / "confirm").iterdir())  # every throwaway env was deleted


def test_confirm_agrees_on_the_grpo_boundary(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "matrix", "scan", "--check", "grpo-normalizer-nan", "--zoo", ">=2026.9.7,<=2026.9.8",
         "--no-unsloth", "--confirm", "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "scan.json").read_text())
    by = {z["version"]: z for z in doc["zoo"]}
    for version, verdict in (("2026.9.7", "vulnerable"), ("2026.9.8", "fixed")):
        z = by[version]
        assert (z["static_verdict"], z["runtime"]["verdict"], z["confirmed_by"]) == (verdict, verdict, "runtime"), z
    assert "dapo (count 0)" in by["2026.9.7"]["runtime"]["reason"], by["2026.9.7"]["runtime"]["reason"]
    assert "not finite" in by["2026.9.7"]["runtime"]["reason"]
    t = doc["timeline"]
    assert (t["last_vulnerable"], t["fixed_since"]) == ("2026.9.7", "2026.9.8")
    assert t["fixed_since_confirmed_by"] == "runtime"
    assert not list((tmp_path / "cache" / "confirm").iterdir())
