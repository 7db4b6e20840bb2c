"""The run is a value: built once by the command line, the matrix parsed once, no ``os.environ`` writes."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from matrix import cli, settings, spec
from matrix.cells import pipeline, runs
from matrix.cells.cell import write_json_atomic
from tests.matrices import GOOD
from tests.reports.cells import make_cell

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The matrix file of the environment is GOOD (cells u1__z1, u1__z2); every ``spec.load`` is recorded."""
    m = tmp_path / "m.toml"
    m.write_text(GOOD, encoding="utf-8")
    for name in ("SKEWMATRIX_SHARD", "SKEWMATRIX_STRICT", "SKEWMATRIX_OUT", "SKEWMATRIX_RUN_ID",
                 "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(settings.MATRIX_ENV, str(m))
    loads: list[Path] = []
    real = spec.load

    def load(path: Any = None, **kw: Any) -> spec.Matrix:
        loads.append(Path(path))
        return real(path, **kw)

    monkeypatch.setattr(spec, "load", load)
    return loads


def fake_cells(monkeypatch: pytest.MonkeyPatch, seen: list[runs.Run]) -> None:
    """``run_one`` writes a made-up cell result instead of building an env (records the run it was given)."""
    def run_one(run: runs.Run, cell_id: str, env_dir: Path, **kw: Any) -> dict[str, Any]:
        seen.append(run)
        record = make_cell(cell_id, static="fixed", runtime="fixed", finite=True)
        write_json_atomic(run.out / "cells" / cell_id / "cell.json", record)
        return record

    monkeypatch.setattr(pipeline, "run_one", run_one)


def test_a_matrix_run_parses_the_matrix_file_once(counted: list[Path], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[runs.Run] = []
    fake_cells(monkeypatch, seen)
    before = dict(os.environ)
    out = tmp_path / "out"
    cli.main(["matrix", "-o", str(out), "--strict", "--exit-zero"])
    # two cells, the report and the gate: one parse, and both cells got the same run with -o and --strict
    assert counted == [tmp_path / "m.toml"]
    assert len(seen) == 2 and seen[0] is seen[1] and seen[0].out == out.resolve() and seen[0].strict
    assert (out / "report.json").is_file()
    assert dict(os.environ) == before  # -o and --strict travel in the run, not in the environment


def test_report_and_cells_parse_once_each(counted: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    write_json_atomic(out / "cells" / "u1__z1" / "cell.json", make_cell("u1__z1"))
    cli.main(["report", "-o", str(out), "--exit-zero"])
    assert len(counted) == 1
    cli.main(["cells"])
    assert len(counted) == 2 and capsys.readouterr().out.splitlines()[-2:] == ["u1__z1", "u1__z2"]


def test_the_run_reads_the_environment_once_and_keeps_its_parse(counted: list[Path], tmp_path: Path) -> None:
    run = runs.from_environ({"SKEWMATRIX_MATRIX": str(tmp_path / "m.toml"), "SKEWMATRIX_SHARD": "2/2",
                             "SKEWMATRIX_STRICT": "1", "SKEWMATRIX_RUN_ID": "r1", "SKEWMATRIX_OUT": str(tmp_path)})
    assert (run.shard, run.strict, run.run_id, run.out) == ((2, 2), True, "r1", tmp_path.resolve())
    assert counted == []  # nothing parsed until asked
    assert [c.id for c in run.cells] == ["u1__z2"]
    other = run.with_args(SimpleNamespace(output=tmp_path / "o", strict=False))  # type: ignore[arg-type]
    assert other.out == (tmp_path / "o").resolve() and other.matrix is run.matrix and len(counted) == 1


def environ_writes(path: Path) -> list[str]:
    """``os.environ[...] = ...``, ``os.environ.update/setdefault/pop/clear``, ``os.putenv`` in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = None
        if isinstance(node, ast.Assign | ast.AugAssign):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Subscript):
                    target = t.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("update", "setdefault", "pop", "clear", "__setitem__"):
                target = node.func.value
            elif node.func.attr == "putenv":
                out.append(f"{path.name}:{node.lineno}: os.putenv")
        if target is not None and ast.unparse(target) == "os.environ":
            out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:60]}")
    return out


def test_the_harness_writes_no_environment_entry_of_its_own() -> None:
    found = [w for p in sorted((ROOT / "matrix").rglob("*.py")) if "backports" not in p.parts
             for w in environ_writes(p)]
    assert found == []


def test_the_noxfile_writes_only_its_documented_hand_off_to_nox_session_processes() -> None:
    writes = environ_writes(ROOT / "noxfile.py")
    text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert len(writes) == 3 and all("_hand_off_to_session_processes" in text for _ in writes)
    assert "The only os.environ writes of the harness, and why" in text


def test_environ_writes_are_seen(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nos.environ['A'] = '1'\nos.environ.setdefault('B', '2')\nx = {}\nx['C'] = 3\n",
                   encoding="utf-8")
    assert [w.split(":")[1] for w in environ_writes(bad)] == ["2", "3"]
