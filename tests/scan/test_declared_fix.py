"""The scan checks each check's declared upstream fix (``FIX``) against its timeline, and says so when they differ.

The fake index of ``test_scan_cpu`` carries a CPU kernel that a zoo release fixes (2026.11.0), while the check
declares that no zoo release fixes it yet: the scan must say they disagree, in ``scan.json`` and loudly in
``scan.md``. Then the same document with a timeline that matches the declaration: no word of disagreement.
"""

from __future__ import annotations

from pathlib import Path

from matrix import scan
from matrix.scan.run import declared_fix
from matrix.scan.zoo import scanned
from reports.render.scan_markdown import render
from tests.scan.fakes import FakeHost
from tests.scan.test_scan_cpu import CPU, host, run

__all__ = ["host"]  # the fixture, shared with test_scan_cpu


def test_a_fixed_release_the_check_does_not_declare_is_a_disagreement(host: FakeHost, tmp_path: Path) -> None:
    doc = run(host, tmp_path, check=CPU, skip_unsloth=True)
    assert doc["declared_fix"] == {
        "package": "unsloth_zoo", "release": None, "prs": [], "prs_state": "", "title": "",
        "scan_fixed_since": "2026.11.0", "agrees": False,
        "disagreement": "the check declares no release as the first unsloth_zoo release carrying the fix, but the "
                        "scan's timeline says 2026.11.0"}
    md = scan.write(doc, tmp_path / "out")[1].read_text()
    assert ("> **DECLARED FIX DISAGREES: the check declares no release as the first unsloth_zoo release carrying "
            "the fix, but the scan's timeline says 2026.11.0.**") in md.splitlines()
    assert "- **Declared fix DISAGREES with the scan:" in md
    assert "  declared fix: no release: DISAGREES: the check declares no release" in scan.summary(doc)


def test_a_timeline_at_the_declared_release_agrees() -> None:
    s = scanned(CPU)
    # no fixed release after the last vulnerable one: what the check declares
    agree = declared_fix(s, {"fixed_since": None})
    assert agree is not None and agree["agrees"] is True and agree["disagreement"] == ""
    doc_lines = render_lines({"declared_fix": agree})
    assert "- Declared fix: no unsloth_zoo release; agrees with this timeline." in doc_lines
    assert not [line for line in doc_lines if "DISAGREES" in line]


def test_the_fused_checks_declared_release_is_its_scan_boundary() -> None:
    s = scanned("fused-ce-masked-nan")
    # the real zoo releases: 2026.10.5 the last vulnerable, 2026.10.6 the first fixed (``nox -s scan``)
    assert declared_fix(s, {"fixed_since": "2026.10.6"})["agrees"] is True  # type: ignore[index]
    moved = declared_fix(s, {"fixed_since": "2026.10.7"})
    assert moved is not None and moved["disagreement"] == (
        "the check declares 2026.10.6 as the first unsloth_zoo release carrying the fix, but the scan's timeline "
        "says 2026.10.7")


def render_lines(extra: dict) -> list[str]:
    doc = {"check": CPU, "index": {"url": "https://index.invalid/simple", "origin": {}}, "generated": "now",
           "zoo": [], "unsloth": [], "warnings": [], "errors": [],
           "timeline": {"first_fixed": None, "fixed_since": None, "last_vulnerable": None, "regressions": []},
           **extra}
    return render(doc).splitlines()
