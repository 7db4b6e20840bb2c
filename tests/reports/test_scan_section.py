"""The static scan, when present, is compared with the cells and shown; disagreement is loud."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix import pipeline
from matrix.cell import write_json_atomic
from reports.render import RENDERERS
from reports.render.terminal import TerminalRenderer
from reports.schema import validate_report
from tests.matrices import GOOD as MATRIX
from tests.reports.cells import make_cell


def scan_doc(verdict_new: str) -> dict:
    def zoo(version: str, verdict: str, sha: str) -> dict:
        return {"version": version, "yanked": False, "verdict": verdict, "reason": f"static {verdict}",
                "file": {"filename": f"unsloth_zoo-{version}-py3-none-any.whl", "sha256": sha}, "all_sha256": [sha]}

    return {"schema": "skewmatrix.scan/1", "generated": "2026-12-02T00:00:00+00:00",
            "timeline": {"first_fixed": "2026.10.6"},
            "zoo": [zoo("2026.9.3", "vulnerable", "b" * 64), zoo("2026.10.9", verdict_new, "b" * 64)]}


@pytest.fixture
def out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "m.toml").write_text(MATRIX)
    monkeypatch.setenv("SKEWMATRIX_MATRIX", str(tmp_path / "m.toml"))
    monkeypatch.delenv("SKEWMATRIX_SHARD", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out = tmp_path / "out"
    for cell in (make_cell("u1__z1"), make_cell("u1__z2", static="fixed", runtime="fixed", finite=True)):
        cell["builds"]["zoo"]["version"] = {"z1": "2026.9.3", "z2": "2026.10.9"}[cell["builds"]["zoo"]["name"]]
        write_json_atomic(out / "cells" / cell["cell_id"] / "cell.json", cell)
    return out


def test_agreeing_scan_is_consistent(out: Path) -> None:
    (out / "scan.json").write_text(json.dumps(scan_doc("fixed")))
    rep = pipeline.report(out=out, log=lambda _: None)
    validate_report(rep)
    assert [(c["cell_id"], c["status"]) for c in rep["scan"]["comparisons"]] == [
        ("u1__z1", "consistent"), ("u1__z2", "consistent")]
    assert "First fixed zoo release per the scan: 2026.10.6." in RENDERERS["markdown"].render(rep)


def test_disagreeing_scan_is_inconsistent_and_loud(out: Path) -> None:
    (out / "scan.json").write_text(json.dumps(scan_doc("vulnerable")))
    rep = pipeline.report(out=out, log=lambda _: None)
    bad = [c for c in rep["scan"]["comparisons"] if c["status"] == "inconsistent"]
    assert [c["cell_id"] for c in bad] == ["u1__z2"]
    assert "INCONSISTENT u1__z2: scan says vulnerable" in TerminalRenderer(colour=False).render(rep)
    assert "**1 cell(s) where the scan and the cell disagree: inconsistent.**" in RENDERERS["markdown"].render(rep)
    html = RENDERERS["html"].render(rep)
    assert '<section id="scan">' in html and '<tr class="row-fail"><td><code>u1__z2</code>' in html


def test_no_scan_no_section(out: Path) -> None:
    rep = pipeline.report(out=out, log=lambda _: None)
    assert "scan" not in rep and '<section id="scan">' not in RENDERERS["html"].render(rep)
