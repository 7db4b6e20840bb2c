"""Richer hand-made cells for the HTML and JUnit renderers: behaviour tests with titles and extras,
training runs, installed distributions with digests, log tails, an error cell.

Built on ``tests.reports.cells``; every verdict and value here is written by hand.
"""

from __future__ import annotations

from typing import Any

from tests.reports.cells import (
    CPU,
    CPU_ABSENT,
    LOSS,
    behaviour_result,
    make_entry,
    make_report,
    make_step,
    section,
    train_result,
    training,
    verdict,
)

SCRIPT_REASON = "<script>alert('x')</script> & \"quoted\""
ANSI_LOG = "building unsloth...\n\x1b[31merror\x1b[0m: resolver failed </pre><script>alert(1)</script>\nexit 1"


def installed(unsloth: str = "2026.10.9", zoo: str = "2026.9.3") -> list[dict[str, Any]]:
    return [
        {"name": "accelerate", "version": "1.16.0", "tree_sha256": "1" * 64},
        {"name": "torch", "version": "2.12.1", "tree_sha256": "2" * 64, "wheel_sha256": "3" * 64},
        {"name": "unsloth", "version": unsloth, "tree_sha256": "4" * 64, "wheel_sha256": "5" * 64},
        {"name": "unsloth_zoo", "version": zoo, "tree_sha256": "6" * 64, "wheel_sha256": "7" * 64},
    ]


MISSING_OUTCOMES = {"01-before": "pass", "02-after": "fail", "03-dense": "pass", "11-idempotent": "n/a"}
MISSING_EXTRA = {"x-public-all-masked": "fail", "x-compiled": "n/a"}
CPU_FIXED = verdict("fixed", "not-needed", "zoo carries the fix; no guard", behavior=(2, 0, 0, [], "2/2"))


def cpu_fixed_section() -> dict[str, Any]:
    return section("fixed", make_step("runtime", {"verdict": "fixed", "reason": "loss 0.0 with None"}, seconds=3.0),
                   make_step("behavior", behaviour_result({"01-none": "pass", "02-zero": "pass"}), seconds=4.0))


def missing_cell() -> dict[str, Any]:
    """u1__z1: toy-loss vulnerable, no guard (2 pass, 2 fail with one extra, 2 n/a with one extra; training NaN
    from step 4); cpu-ops absent. A plain install refuses the pair."""
    cell = make_entry("u1__z1", admissible=False, verdicts={
        LOSS["id"]: verdict("vulnerable", "missing", "no guard replaced the forward",
                            behavior=(2, 1, 1, ["02-after"], "2/3 (+1 n/a)"),
                            training=training("nan-logged", "nan-logged from step 4",
                                              "num_items_in_batch reached the loss as 0 on step 4", 4),
                            symptom="logged loss NaN from step 4 to the end", reach="exposed"),
        CPU["id"]: CPU_ABSENT,
    }, checks={
        LOSS["id"]: section(
            "vulnerable",
            make_step("runtime", {"verdict": "vulnerable", "reason": "runtime says vulnerable"}, seconds=15.0),
            make_step("guard", {"forward": {"original": True}, "all_masked_finite": False,
                                "routes": {"public": {"loss": "nan", "loss_finite": False, "grads_finite": True,
                                                      "grad_fn": "ToyBackward"}}}, seconds=22.0),
            make_step("behavior", behaviour_result(
                MISSING_OUTCOMES, extra=MISSING_EXTRA,
                reasons={"02-after": SCRIPT_REASON, "11-idempotent": "n/a: no guard in this build"}),
                seconds=30.0, log_tail="===== behavior: python -m probes\nUnsloth: patched"),
            make_step("train", train_result("nan-logged", 4), seconds=9.0)),
        CPU["id"]: section("absent", make_step("runtime", {"verdict": "absent", "reason": "no cpu backend"})),
    })
    cell["installed"] = installed()
    cell["started"] = "2026-12-02T18:31:32+00:00"
    return cell


def not_needed_cell() -> dict[str, Any]:
    """u1__z2: both checks fixed, no guard, all pass, training clean. A plain install admits the pair."""
    cell = make_entry("u1__z2", admissible=True, verdicts={
        LOSS["id"]: verdict("fixed", "not-needed", "zoo carries the fix; no guard", behavior=(2, 0, 0, [], "2/2"),
                            training=training("clean", "clean", "every step finite")),
        CPU["id"]: CPU_FIXED,
    }, checks={
        LOSS["id"]: section(
            "fixed",
            make_step("runtime", {"verdict": "fixed", "reason": "runtime says fixed"}, seconds=15.0),
            make_step("guard", {"forward": {"original": True}, "all_masked_finite": True,
                                "routes": {"public": {"loss": 0.0, "loss_finite": True}}}, seconds=22.0),
            make_step("behavior", behaviour_result({"01-before": "pass", "02-after": "pass"},
                                                   extra={"x-public-all-masked": "pass"}), seconds=30.0),
            make_step("train", train_result("clean"), seconds=9.0)),
        CPU["id"]: cpu_fixed_section(),
    })
    cell["installed"] = installed(zoo="2026.10.9")
    return cell


def error_cell() -> dict[str, Any]:
    """u2__z1: the build failed; no checks at all, the log tail carries ANSI escapes and markup."""
    v = verdict("unknown", "error", "build: uv pip install failed (exit 1)")
    cell = make_entry("u2__z1", admissible=None, verdicts={LOSS["id"]: v, CPU["id"]: v}, checks=None,
                     error={"kind": "build", "message": "uv pip install failed (exit 1)\nsecond line",
                            "log_tail": ANSI_LOG})
    cell["builds"]["unsloth"]["describe"] = 'git "main" <b>bold</b>'
    return cell


def activates_cell() -> dict[str, Any]:
    """u3__z2: a guard replaced the toy-loss forward on a vulnerable zoo; all pass; training clean."""
    cell = make_entry("u3__z2", admissible=True, verdicts={
        LOSS["id"]: verdict("vulnerable", "activates", "a guard replaced the forward; the all-masked loss is finite",
                            behavior=(3, 0, 0, [], "3/3"), training=training("clean", "clean", "every step finite")),
        CPU["id"]: CPU_FIXED,
    }, checks={
        LOSS["id"]: section(
            "vulnerable",
            make_step("runtime", {"verdict": "vulnerable", "reason": "runtime says vulnerable"}),
            make_step("guard", {"forward": {"original": False}, "all_masked_finite": True}),
            make_step("behavior", behaviour_result({"01-before": "pass", "02-after": "pass", "12-uninstall": "pass"},
                                                   guard_module="toy_unsloth.toy_guard")),
            make_step("train", train_result("clean"))),
        CPU["id"]: cpu_fixed_section(),
    })
    cell["builds"]["unsloth"]["source"] = "backport"
    return cell


def four_cell_report() -> dict[str, Any]:
    """Rows u1, u2, u3; columns z1, z2; (u2, z2) and (u3, z1) are not in the matrix."""
    return make_report([missing_cell(), not_needed_cell(), error_cell(), activates_cell()])
