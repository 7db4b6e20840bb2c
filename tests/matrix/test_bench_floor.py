"""The bench floor counts one `import unsloth` per mode a cell probes (matrix/cli/bench.py)."""

from __future__ import annotations

import json
from pathlib import Path

from matrix.cli.bench import cell_modes


def write(tmp_path: Path, cell: dict) -> Path:
    path = tmp_path / "cell.json"
    path.write_text(json.dumps(cell))
    return path


def test_a_cell_with_the_cpu_backend_process_has_two_modes(tmp_path: Path) -> None:
    cell = {"options": {"cpu_mode": "allow-cpu"}, "probes": {"cpu_backend": {"process": "cpu-backend"}}}
    assert cell_modes(write(tmp_path, cell)) == ["allow-cpu", "cpu-backend"]


def test_a_cell_without_it_has_one(tmp_path: Path) -> None:
    skipped = {"options": {"cpu_mode": "allow-cpu"}, "probes": {"cpu_backend": {"process": None, "reason": "n/a"}}}
    assert cell_modes(write(tmp_path, skipped)) == ["allow-cpu"]
    # in cpu-backend mode the unsloth process already is the backend: one import
    backend = {"options": {"cpu_mode": "cpu-backend"}, "probes": {"cpu_backend": {"process": "unsloth"}}}
    assert cell_modes(write(tmp_path, backend)) == ["cpu-backend"]
    assert cell_modes(tmp_path / "missing.json") == ["allow-cpu"]
