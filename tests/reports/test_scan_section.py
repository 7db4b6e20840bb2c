"""The static scan's section of a report, when present, is shown in every format; disagreement is loud.

Render-only: the comparisons are written by hand in the shape ``matrix.scan.compare_with_cells``
gives them (that function is tested in ``tests/scan``).
"""

from __future__ import annotations

from reports.render import RENDERERS
from reports.render.terminal import TerminalRenderer
from reports.schema import validate_report
from tests.reports.cells import LOSS, make_report, reachable_cell, unreachable_cell


def comparison(cell_id: str, version: str, scan: str, dynamic: str) -> dict:
    same = scan == dynamic
    return {"cell_id": cell_id, "zoo_version": version, "scan": scan, "dynamic": dynamic,
            "scan_file": f"unsloth_zoo-{version}-py3-none-any.whl", "scan_confirmed_by": "static-only",
            "status": "consistent" if same else "inconsistent",
            "reason": f"both say {dynamic}" if same else f"scan says {scan} (static {scan}); cell says {dynamic}"}


def scanned_report(new_verdict: str) -> dict:
    return make_report([unreachable_cell(), reachable_cell()], scan={
        "generated": "2026-12-02T00:00:00+00:00", "first_fixed": "2026.10.6", "check": LOSS["id"],
        "timeline": {"fixed_since": "2026.10.6"},
        "comparisons": [comparison("u1__z1", "2026.9.3", "vulnerable", "vulnerable"),
                        comparison("u1__z2", "2026.10.9", new_verdict, "fixed")]})


def test_agreeing_scan_is_consistent() -> None:
    rep = scanned_report("fixed")
    validate_report(rep)
    md = RENDERERS["markdown"].render(rep)
    assert "First fixed zoo release per the scan: 2026.10.6." in md
    assert "| `u1__z2` | 2026.10.9 | fixed | fixed | consistent |" in md.splitlines()
    assert "INCONSISTENT" not in TerminalRenderer(colour=False).render(rep)
    # the declared release is named, and the scan (of the toy loss only) agrees with it: nothing more is said;
    # the other check's line says its own declared state, with no word from a scan of another check
    assert "Upgrade toy_zoo to a release that guards the zero divisor. toy_zoo>=2026.10.6 carries the fix." in md
    assert "scan disagrees" not in md
    assert "No toy_zoo release carries a fix yet: toy/toy-zoo#7 is open, not released." in md


def test_disagreeing_scan_is_inconsistent_and_loud() -> None:
    rep = scanned_report("vulnerable")
    assert "INCONSISTENT u1__z2: scan says vulnerable (static vulnerable); cell says fixed" in \
        TerminalRenderer(colour=False).render(rep).splitlines()
    md = RENDERERS["markdown"].render(rep)
    assert "**1 cell(s) where the scan and the cell disagree: inconsistent.**" in md
    assert "| `u1__z2` | 2026.10.9 | vulnerable | fixed | **inconsistent** |" in md.splitlines()
    html = RENDERERS["html"].render(rep)
    assert '<section id="scan">' in html and '<tr class="row-fail"><td><code>u1__z2</code>' in html


def test_no_scan_no_section() -> None:
    rep = make_report([unreachable_cell()])
    assert '<section id="scan">' not in RENDERERS["html"].render(rep)
    assert "Static scan" not in RENDERERS["markdown"].render(rep)
