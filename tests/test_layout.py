"""Structural rules of the repository."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_probes_import_nothing_from_the_harness() -> None:
    offenders = {str(p.relative_to(ROOT)): sorted(imported_modules(p) & {"matrix", "reports", "nox", "packaging"})
                 for p in (ROOT / "probes").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_harness_starts_nothing_heavy() -> None:
    code = ("import sys, matrix.spec, matrix.pipeline, matrix.cell, reports.model, reports.render;"
            "bad = [m for m in ('torch', 'unsloth', 'unsloth_zoo', 'nox') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
