"""Richer hand-made cells for the HTML and JUnit renderers: behaviour tests with titles
and extras, installed distributions with digests, log tails, an error cell.

Built on ``tests.reports.cells.make_cell``; every value here is written by hand.
"""

from __future__ import annotations

from typing import Any

from reports.model import build_report
from tests.reports.cells import make_cell

SCRIPT_REASON = "<script>alert('x')</script> & \"quoted\""
ANSI_LOG = "building unsloth...\n\x1b[31merror\x1b[0m: resolver failed </pre><script>alert(1)</script>\nexit 1"


def outcome_entry(tid: str, outcome: str, reason: str = "", title: str = "") -> dict[str, Any]:
    return {"id": tid, "title": title or f"title of {tid}", "outcome": outcome,
            "reason": reason or ("ok" if outcome == "pass" else f"why {tid}"), "duration_s": 0.25}


def behaviour_result(outcomes: dict[str, str], *, guard_found: bool, extra: dict[str, str] | None = None,
                     reasons: dict[str, str] | None = None) -> dict[str, Any]:
    reasons = reasons or {}
    return {
        "schema": 1,
        "guard_found": guard_found,
        "guard_module": "unsloth.fused_ce_guard" if guard_found else None,
        "tests": [outcome_entry(tid, o, reasons.get(tid, "")) for tid, o in outcomes.items()],
        "extra": [outcome_entry(tid, o, reasons.get(tid, "")) for tid, o in (extra or {}).items()],
    }


def installed(unsloth: str = "2026.10.9", zoo: str = "2026.9.3") -> list[dict[str, Any]]:
    return [
        {"name": "accelerate", "version": "1.16.0", "tree_sha256": "1" * 64},
        {"name": "torch", "version": "2.12.1", "tree_sha256": "2" * 64, "wheel_sha256": "3" * 64},
        {"name": "unsloth", "version": unsloth, "tree_sha256": "4" * 64, "wheel_sha256": "5" * 64},
        {"name": "unsloth_zoo", "version": zoo, "tree_sha256": "6" * 64, "wheel_sha256": "7" * 64},
    ]


MISSING_OUTCOMES = {"01-before": "pass", "02-after": "fail", "03-dense": "pass", "11-idempotent": "n/a"}
MISSING_EXTRA = {"x-public-all-masked": "fail", "x-compiled": "n/a"}


def missing_cell() -> dict[str, Any]:
    """u1__z1: vulnerable zoo, no guard; 2 pass, 2 fail (one extra), 2 n/a (one extra)."""
    cell = make_cell("u1__z1", behavior=behaviour_result(
        MISSING_OUTCOMES, guard_found=False, extra=MISSING_EXTRA,
        reasons={"02-after": SCRIPT_REASON, "11-idempotent": "n/a: no guard in this build"}))
    cell["installed"] = installed()
    cell["started"] = "2026-12-02T18:31:32+00:00"
    cell["probes"]["steps"][2]["log_tail"] = "===== behavior: python -m probes.behavior\nUnsloth: patched"
    return cell


def not_needed_cell() -> dict[str, Any]:
    """u1__z2: fixed zoo, no guard, all pass."""
    cell = make_cell("u1__z2", static="fixed", runtime="fixed", finite=True, behavior=behaviour_result(
        {"01-before": "pass", "02-after": "pass"}, guard_found=False, extra={"x-public-all-masked": "pass"}))
    cell["installed"] = installed(zoo="2026.10.9")
    return cell


def error_cell() -> dict[str, Any]:
    """u2__z1: the build failed; no probes, the log tail carries ANSI escapes and markup."""
    cell = make_cell("u2__z1", error={"kind": "build", "message": "uv pip install failed (exit 1)\nsecond line",
                                      "log_tail": ANSI_LOG})
    cell["builds"]["unsloth"]["describe"] = 'git "main" <b>bold</b>'
    return cell


def activates_cell() -> dict[str, Any]:
    """u3__z2: a guard replaced the forward on a vulnerable zoo; all pass."""
    cell = make_cell("u3__z2", original=False, finite=True, behavior=behaviour_result(
        {"01-before": "pass", "02-after": "pass", "12-uninstall": "pass"}, guard_found=True))
    cell["builds"]["unsloth"]["source"] = "backport"
    return cell


def four_cell_report() -> dict[str, Any]:
    """Rows u1, u2, u3; columns z1, z2; (u2, z2) and (u3, z1) are not in the matrix."""
    cells = [missing_cell(), not_needed_cell(), error_cell(), activates_cell()]
    return build_report(cells, matrix="matrix/test.toml")
