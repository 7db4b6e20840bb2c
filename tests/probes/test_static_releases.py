"""The static detector on real zoo releases and on the backports built from one (issue 20, part 4).

Each release's wheel comes from the index into the backport wheel cache (``download_wheel``: reused when
cached, checked against the index's sha256), so the test needs the index: marked integration.
Known verdicts: 2026.9.3 and 2026.10.5 vulnerable (the label count and the caller's
``n_items`` both divide unguarded), 2026.10.6 and 2026.10.9 fixed (``_nonzero_count`` covers both), the
shipped ``zoo-fix`` backport fixed, and ``tests/backports/zoo-fix-none-only`` vulnerable through ``n_items``
alone.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from matrix.sources.backport import BACKPORTS_DIR, download_wheel, wheel_cache
from matrix.sources.backport_build import build_backport, load_manifest
from probes.checks.fused_ce_masked_nan.static import StaticVerdict, analyze_files

ROOT = Path(__file__).resolve().parents[2]
NONE_ONLY = ROOT / "tests" / "backports" / "zoo-fix-none-only"
pytestmark = pytest.mark.integration


def _release(version: str) -> dict[str, str]:
    return _wheel_files(download_wheel("unsloth_zoo", version, wheel_cache()))


def _wheel_files(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n).decode("utf-8", errors="replace") for n in zf.namelist()
                if n.startswith("unsloth_zoo/") and n.endswith(".py")}


def _backport(folder: Path, tmp: Path) -> StaticVerdict:
    base = download_wheel("unsloth_zoo", "2026.9.3", wheel_cache())
    wheel = build_backport(load_manifest(folder), base, None, tmp / folder.name, f"test-{folder.name}")
    return analyze_files(_wheel_files(wheel))


@pytest.mark.parametrize(("version", "verdict"), [
    ("2026.9.3", "vulnerable"), ("2026.10.5", "vulnerable"), ("2026.10.6", "fixed"), ("2026.10.9", "fixed"),
])
def test_real_release(version: str, verdict: str) -> None:
    got = analyze_files(_release(version))
    assert got.verdict == verdict, got.reason
    assert "the caller's count (parameter 'n_items')" in got.reason  # n_items is judged, not only the count


def test_the_shipped_zoo_fix_backport_is_fixed(tmp_path: Path) -> None:
    got = _backport(BACKPORTS_DIR / "zoo-fix", tmp_path)
    assert got.verdict == "fixed", got.reason


def test_a_zoo_fixed_for_none_only_is_vulnerable_through_n_items(tmp_path: Path) -> None:
    got = _backport(NONE_ONLY, tmp_path)
    assert got.verdict == "vulnerable", got.reason
    assert got.reason.startswith("the caller's count (parameter 'n_items', divided by whenever it is given) "
                                 "reaches the division at line 131 in compute_fused_ce_loss()"), got.reason
    assert "the label count" not in got.reason  # the label count is floored: only n_items is open
