"""Merging shard directories into one report (pipeline.collect / pipeline.report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix.cells import pipeline, runs
from matrix.cells.cell import write_json_atomic
from matrix.cells.collect import ResultFileError
from tests.matrices import GOOD as MATRIX
from tests.reports.cells import make_cell


@pytest.fixture
def matrix_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    m = tmp_path / "m.toml"
    m.write_text(MATRIX)
    monkeypatch.setenv("SKEWMATRIX_MATRIX", str(m))
    monkeypatch.delenv("SKEWMATRIX_SHARD", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def put(d: Path, cell: dict) -> None:
    write_json_atomic(d / "cells" / cell["cell_id"] / "cell.json", cell)


def cells() -> list[dict]:
    return [make_cell("u1__z1"), make_cell("u1__z2", static="fixed", runtime="fixed", finite=True)]


def strip(report: dict) -> dict:
    report = json.loads(json.dumps(report))
    report.pop("generated")
    return report


def test_merged_equals_unsharded(matrix_env: Path) -> None:
    whole, a, b = matrix_env / "whole", matrix_env / "a", matrix_env / "b"
    for c in cells():
        put(whole, c)
    c1, c2 = cells()
    put(a, c1)
    put(b, c2)
    unsharded = pipeline.report(runs.from_environ(out=whole), log=lambda _: None)
    merged = pipeline.report(runs.from_environ(out=matrix_env / "merged"), [a, b], log=lambda _: None)
    assert strip(merged) == strip(unsharded)
    assert (matrix_env / "merged" / "cells" / "u1__z2" / "cell.json").is_file()


def test_duplicate_cell_across_shards_is_refused(matrix_env: Path) -> None:
    a, b = matrix_env / "a", matrix_env / "b"
    for c in cells():
        put(a, c)
    put(b, cells()[0])
    with pytest.raises(pipeline.MergeError, match=r"u1__z1 has results in both .*a and .*b"):
        pipeline.report(runs.from_environ(out=matrix_env / "m"), [a, b], log=lambda _: None)


def test_missing_cell_is_refused_when_merging(matrix_env: Path) -> None:
    a, b = matrix_env / "a", matrix_env / "b"
    put(a, cells()[0])
    (b / "cells").mkdir(parents=True)
    with pytest.raises(pipeline.MergeError, match=r"1 cell\(s\) .* no result .*: u1__z2"):
        pipeline.report(runs.from_environ(out=matrix_env / "m"), [a, b], log=lambda _: None)


def test_schema_mismatch_is_refused_by_name(matrix_env: Path) -> None:
    a, b = matrix_env / "a", matrix_env / "b"
    c1, c2 = cells()
    put(a, c1)
    put(b, {**c2, "schema": "skewmatrix.cell/0"})
    with pytest.raises(ResultFileError, match=r"u1__z2/cell\.json: schema 'skewmatrix\.cell/0'"):
        pipeline.report(runs.from_environ(out=matrix_env / "m"), [a, b], log=lambda _: None)


def test_not_an_output_directory(matrix_env: Path) -> None:
    with pytest.raises(pipeline.MergeError, match="no cells/ directory"):
        pipeline.report(runs.from_environ(out=matrix_env / "m"), [matrix_env / "nothing", matrix_env / "x"],
                        log=lambda _: None)


def test_single_directory_shows_missing_cells_as_errors(matrix_env: Path) -> None:
    out = matrix_env / "out"
    put(out, cells()[0])
    rep = pipeline.report(runs.from_environ(out=out), log=lambda _: None)
    missing = next(c for c in rep["cells"] if c["cell_id"] == "u1__z2")
    assert missing["error"]["kind"] == "missing" and missing["verdicts"]
    assert {v["guard"] for v in missing["verdicts"].values()} == {"error"}


def test_shard_env_narrows_the_report(matrix_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = matrix_env / "out"
    put(out, cells()[0])
    monkeypatch.setenv("SKEWMATRIX_SHARD", "1/2")
    rep = pipeline.report(runs.from_environ(out=out), log=lambda _: None)
    assert [c["cell_id"] for c in rep["cells"]] == ["u1__z1"]


def test_step_summary_is_appended(matrix_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, summary = matrix_env / "out", matrix_env / "summary.md"
    summary.write_text("earlier step\n")
    for c in cells():
        put(out, c)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pipeline.report(runs.from_environ(out=out), log=lambda _: None)
    text = summary.read_text()
    # appended after the earlier step's summary, with a headline (the summary renderer's, capped at 1 MiB)
    assert text.startswith("earlier step\n## ") and "skewmatrix" in text.splitlines()[1]
