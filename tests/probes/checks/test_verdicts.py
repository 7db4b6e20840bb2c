"""Each check's verdict from hand-written evidence: every zoo state and guard state, and the
issue-11 rules (a present guard that fails anything is broken; every route counts; training counts)."""

from __future__ import annotations

import pytest

from probes.checks.cpu_ce_masked_nan import verdict as cpu_verdict
from probes.checks.fused_ce_masked_nan import verdict as fused_verdict
from probes.checks.vocabulary import GuardState, ZooState
from tests.probes.checks.evidence import behaviour, cpu, fused, train

ALL_PASS = {f"{i:02d}": "pass" for i in range(1, 15)}
CELL: dict = {}


def classify(section: dict) -> object:
    return fused_verdict.classify(section, CELL)


@pytest.mark.parametrize(("static", "runtime", "zoo"), [
    ("vulnerable", "vulnerable", ZooState.VULNERABLE),
    ("fixed", "fixed", ZooState.FIXED),
    ("absent", "absent", ZooState.ABSENT),
    ("fixed", "vulnerable", ZooState.INCONSISTENT),
    ("vulnerable", "fixed", ZooState.INCONSISTENT),
    ("unknown", "fixed", ZooState.UNKNOWN),
])
def test_zoo_state_from_both_detectors(static: str, runtime: str, zoo: ZooState) -> None:
    v = classify(fused(static=static, runtime=runtime, finite=runtime == "fixed"))
    assert v.zoo is zoo
    if zoo is ZooState.INCONSISTENT:
        assert v.guard is GuardState.ERROR and "disagree" in v.guard_reason
        assert f"static says {static}" in v.zoo_reason and f"runtime says {runtime}" in v.zoo_reason


def test_runtime_crash_is_unknown_with_reason() -> None:
    v = classify(fused(runtime_status="crash"))
    assert v.zoo is ZooState.UNKNOWN and "SIGABRT" in v.zoo_reason and v.guard is GuardState.ERROR


def test_missing_states_the_user_visible_symptom_from_training() -> None:
    v = classify(fused(training=train("nan-logged", 4, "logged loss NaN from step 4 to the end")))
    assert v.guard is GuardState.MISSING
    assert "step 4 to the end" in v.guard_reason and "step 4 to the end" in v.symptom


def test_missing_without_training_names_the_nan_routes() -> None:
    v = classify(fused())
    assert v.guard is GuardState.MISSING and "public (loss nan)" in v.guard_reason


def test_activates_needs_replacement_every_route_suite_and_clean_training() -> None:
    ok = fused(original=False, finite=True, behavior=behaviour(ALL_PASS, True), training=train("clean"))
    v = classify(ok)
    assert v.guard is GuardState.ACTIVATES and v.behavior.label() == "14/14" and "training clean" in v.guard_reason


def test_a_failing_test_makes_a_present_guard_broken() -> None:
    v = classify(fused(original=False, finite=True, behavior=behaviour({**ALL_PASS, "11": "fail"}, True)))
    assert v.guard is GuardState.BROKEN and "11" in v.guard_reason


def test_training_nan_with_a_guard_is_broken_and_names_n_items() -> None:
    reason = "logged loss NaN from step 4 to the end (num_items_in_batch=tensor(0) reached the loss)"
    v = classify(fused(original=False, finite=True, behavior=behaviour(ALL_PASS, True),
                       training=train("nan-logged", 4, reason)))
    assert v.guard is GuardState.BROKEN
    assert "training run nan-logged from step 4" in v.guard_reason and "num_items_in_batch=tensor(0)" in v.guard_reason


def test_nan_on_one_route_only_is_broken() -> None:
    good = {"loss": 0.0, "loss_finite": True, "grads_finite": True}
    routes = {"function": good, "public": good, "adapter": {"loss": "nan", "loss_finite": False, "grads_finite": True}}
    v = classify(fused(original=False, routes=routes, behavior=behaviour(ALL_PASS, True)))
    assert v.guard is GuardState.BROKEN and "adapter (loss nan)" in v.guard_reason


def test_a_route_the_host_cannot_run_does_not_count() -> None:
    good = {"loss": 0.0, "loss_finite": True, "grads_finite": True}
    routes = {"public": good, "public-default-target-gb": {"error": "RuntimeError: no CUDA", "n/a": "no CUDA"}}
    v = classify(fused(original=False, routes=routes, behavior=behaviour(ALL_PASS, True)))
    assert v.guard is GuardState.ACTIVATES


def test_a_route_that_raises_counts_against_a_guard() -> None:
    good = {"loss": 0.0, "loss_finite": True, "grads_finite": True}
    routes = {"public": good, "adapter": {"error": "TypeError: forward() takes 3 positional arguments"}}
    v = classify(fused(original=False, routes=routes, behavior=behaviour(ALL_PASS, True)))
    assert v.guard is GuardState.BROKEN and "adapter (raised TypeError" in v.guard_reason


def test_guard_module_that_patched_the_wrong_object_is_broken_not_missing() -> None:
    v = classify(fused(original=True, finite=False, behavior=behaviour({**ALL_PASS, "02": "fail"}, True)))
    assert v.guard is GuardState.BROKEN and "wrong object" in v.guard_reason


def test_no_ops_needs_a_guard_module_and_an_untouched_forward() -> None:
    v = classify(fused(static="fixed", runtime="fixed", finite=True,
                       behavior=behaviour({**ALL_PASS, "01": "n/a"}, True)))
    assert v.guard is GuardState.NO_OPS and v.behavior.label() == "13/13 (+1 n/a)"


def test_not_needed() -> None:
    assert classify(fused(static="fixed", runtime="fixed", finite=True)).guard is GuardState.NOT_NEEDED


def test_fixed_zoo_whose_training_logs_nan_without_guard_is_error_not_pass() -> None:
    v = classify(fused(static="fixed", runtime="fixed", finite=True, training=train("nan-logged", 2)))
    assert v.guard is GuardState.ERROR


def test_guard_that_replaces_a_fixed_forward_is_broken() -> None:
    v = classify(fused(static="fixed", runtime="fixed", finite=True, original=False))
    assert v.guard is GuardState.BROKEN and "carries the fix" in v.guard_reason


def test_import_failure_is_error() -> None:
    v = classify(fused(guard_status="error"))
    assert v.guard is GuardState.ERROR and "import unsloth" in v.guard_reason


def test_absent_kernel_needs_no_guard() -> None:
    assert classify(fused(static="absent", runtime="absent")).guard is GuardState.NOT_NEEDED


def test_gate_fail_follows_the_failing_states_given() -> None:
    v = classify(fused())
    assert v.to_dict()["gate_fail"] is True
    assert v.to_dict(frozenset({"broken"}))["gate_fail"] is False


# ---------------------------------------------------------------- the CPU-backend check


def test_cpu_vulnerable_unreplaced_is_missing_with_symptom() -> None:
    v = cpu_verdict.classify(cpu(outcomes={"c1": "fail", "c2": "pass"}), CELL)
    assert v.zoo is ZooState.VULNERABLE and v.guard is GuardState.MISSING and "loss nan" in v.symptom


def test_cpu_absent_is_not_needed() -> None:
    v = cpu_verdict.classify(cpu(static="absent", runtime="absent"), CELL)
    assert v.zoo is ZooState.ABSENT and v.guard is GuardState.NOT_NEEDED


def test_cpu_replaced_and_finite_activates_unless_a_test_fails() -> None:
    assert cpu_verdict.classify(cpu(original=False, finite=True, outcomes={"c1": "pass"}), CELL).guard \
        is GuardState.ACTIVATES
    assert cpu_verdict.classify(cpu(original=False, finite=True, outcomes={"c1": "fail"}), CELL).guard \
        is GuardState.BROKEN


def test_cpu_without_raw_fingerprint_cannot_tell() -> None:
    assert cpu_verdict.classify(cpu(original=None), CELL).guard is GuardState.ERROR
