"""Each check's declared upstream fix (``FIX``): the release that carries it, or that none does yet.

The releases were read by the wide scan in every zoo release on the index (``nox -s scan`` for the fused
check: 2026.10.5 the last vulnerable, 2026.10.6 the first fixed; ``--check cpu-ce-masked-nan``: the CPU
kernel only in 2026.10.9, vulnerable); nanochat's fix PRs for its issue #590 are open.
"""

from __future__ import annotations

import importlib

import pytest

from probes import checks
from probes.checks.capabilities import UpstreamFix
from reports.model import check_table


def fix_of(check_id: str) -> UpstreamFix:
    name = checks.folder_of(check_id)
    assert name is not None
    fix = checks.upstream_fix(name)
    assert fix is not None, f"{check_id} declares no FIX"
    return fix


def test_the_fused_fix_is_in_zoo_2026_10_6() -> None:
    fix = fix_of("fused-ce-masked-nan")
    assert (fix.package, fix.release) == ("unsloth_zoo", "2026.10.6")
    assert fix.sentence() == "unsloth_zoo>=2026.10.6 carries the fix."


def test_no_zoo_release_fixes_the_cpu_kernel() -> None:
    fix = fix_of("cpu-ce-masked-nan")
    assert (fix.package, fix.release, fix.prs) == ("unsloth_zoo", None, ())
    assert fix.sentence() == "No unsloth_zoo release fixes it yet."


def test_nanochats_fix_prs_are_open_not_released() -> None:
    fix = fix_of("nanochat-sft-masked-nan")
    assert fix.release is None and fix.prs_state == "open"
    assert fix.sentence() == ("No nanochat release carries a fix yet: karpathy/nanochat#619, karpathy/nanochat#623, "
                              "karpathy/nanochat#662 are open, not released.")


def test_the_report_lists_each_checks_fix() -> None:
    table = {c["id"]: c["upstream_fix"] for c in check_table()}
    assert table["fused-ce-masked-nan"]["release"] == "2026.10.6"
    assert table["nanochat-sft-masked-nan"]["prs"] == ["karpathy/nanochat#619", "karpathy/nanochat#623",
                                                       "karpathy/nanochat#662"]
    assert table["cpu-ce-masked-nan"] == {"package": "unsloth_zoo", "release": None, "prs": [], "prs_state": "",
                                          "title": ""}


def test_a_check_without_a_declaration_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    name = checks.REGISTRY[0]
    monkeypatch.delattr(importlib.import_module(checks.package(name)), "FIX")
    assert checks.upstream_fix(name) is None
