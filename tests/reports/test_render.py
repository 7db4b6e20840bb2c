"""Renderers against a canonical two-cell report, with exact expected text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.model import ResultFileError, build_report, load_cell, load_cells
from reports.render import RENDERERS, write_all
from reports.render.terminal import TerminalRenderer
from tests.reports.cells import make_cell


@pytest.fixture
def report() -> dict:
    cells = [make_cell("u1__z1"), make_cell("u1__z2", static="fixed", runtime="fixed", finite=True)]
    return build_report(cells, matrix="matrix/test.toml")


def test_terminal_grid(report: dict) -> None:
    text = TerminalRenderer(colour=False).render(report)
    assert text.splitlines() == [
        "skewmatrix: matrix/test.toml (2 cells)",
        "",
        "unsloth \\ zoo  z1                    z2                ",
        "u1             vulnerable / missing  fixed / not-needed",
        "",
        "  u1__z1: missing: no guard replaced the forward; the all-masked loss through the public entry is nan",
        "gate: 1 of 2 cell(s) in a failing state (broken, error, missing)",
    ]


def test_terminal_colour_only_when_asked(report: dict) -> None:
    assert "\033[31;1mvulnerable / missing\033[0m" in TerminalRenderer(colour=True).render(report)
    assert "\033[" not in TerminalRenderer(colour=False).render(report)


def test_markdown_grid_and_details(report: dict) -> None:
    lines = RENDERERS["markdown"].render(report).splitlines()
    start = lines.index("| unsloth \\ zoo | z1 (pypi z1) | z2 (pypi z2) |")
    assert lines[start + 1] == "|---|---|---|"
    assert lines[start + 2] == ("| u1 (pypi 2026.10.9) | zoo vulnerable · guard **missing** "
                                "| zoo fixed · guard not-needed |")
    assert "Guard states: missing 1, not-needed 1; **1 cell(s) fail the gate**." in lines
    assert "### `u1__z1` — zoo vulnerable, guard missing" in lines
    assert "- plain install admits the pair: no (installed with overrides) [uv pip compile (no overrides)]: " \
           "unsatisfiable." in lines
    assert "- unsloth: pypi 2026.10.9, installed 2026.10.9, sha256 `aaaaaaaaaaaa`" in lines


def test_json_round_trips_and_validates(report: dict, tmp_path: Path) -> None:
    from reports.schema import validate_cell, validate_report

    written = write_all(report, tmp_path)
    assert sorted(p.name for p in written) == ["junit.xml", "report.html", "report.json", "report.md"]
    loaded = json.loads((tmp_path / "report.json").read_text())
    assert loaded["summary"]["missing"] == 1 and loaded["gate"]["failed_cells"] == ["u1__z1"]
    validate_report(loaded)
    validate_cell(make_cell())


def test_corrupt_cell_json_is_refused_by_name(tmp_path: Path) -> None:
    d = tmp_path / "cells" / "u1__z1"
    d.mkdir(parents=True)
    (d / "cell.json").write_text('{"schema": "skewmatrix.cell/1", "cell_id": "u1__z')
    with pytest.raises(ResultFileError) as err:
        load_cells(tmp_path)
    assert str(d / "cell.json") in str(err.value) and "unreadable" in str(err.value)


def test_other_schema_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "cell.json"
    p.write_text(json.dumps({"schema": "skewmatrix.cell/0"}))
    with pytest.raises(ResultFileError, match=r"schema 'skewmatrix\.cell/0'"):
        load_cell(p)
