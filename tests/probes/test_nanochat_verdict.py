"""The nanochat check's verdict mapping, from hand-written evidence (no nanochat, no torch)."""

from __future__ import annotations

from typing import Any

import pytest

from probes.checks.nanochat_sft_masked_nan import verdict
from probes.checks.vocabulary import GuardState, Reach, ZooState

TESTS = ("n1-partial-reference", "n2-normal-backward", "n3-all-masked-micro-batch", "n4-all-masked-step",
         "n5-other-reductions", "n6-masked-adds-nothing", "n7-logged-loss-finite")


def evidence(model: str = "vulnerable", loop: str = "unguarded", failing: tuple[str, ...] = (),
             train: dict[str, Any] | None = None, runtime: str | None = None) -> dict[str, Any]:
    tests = [{"id": t, "outcome": "fail" if t in failing else "pass", "reason": "x"} for t in TESTS]
    steps = [
        {"name": "runtime", "status": "ok", "result": {"verdict": runtime or model, "reason": "all -1: loss nan"}},
        {"name": "behavior", "status": "ok", "result": {"tests": tests, "extra": []}},
    ]
    if train is not None:
        steps.append({"name": "train", "status": "ok", "result": train})
    return {"static": {"verdict": model, "reason": "nanochat/gpt.py:520: ...",
                       "loop": {"verdict": loop, "guard_line": 438, "reason": "scripts/chat_sft.py:432: ..."}},
            "steps": steps}


def run(outcome: str, first: int | None = None, masked: bool = True, reason: str = "") -> dict[str, Any]:
    return {"outcome": outcome, "first_nan_step": first, "reason": reason or outcome,
            "kernel_calls": 12, "masked_inputs": ["all targets -1"] if masked else [], "versions": {"torch": "2.9.1"}}


def test_master_shape_is_missing_and_exposed_by_its_nan_run() -> None:
    v = verdict.classify(evidence(failing=("n3-all-masked-micro-batch", "n7-logged-loss-finite"),
                                  train=run("nan-logged", 1)), {})
    assert (v.zoo, v.guard, v.reach) == (ZooState.VULNERABLE, GuardState.MISSING, Reach.EXPOSED)
    assert "NaN" in v.symptom and "step 1" in v.symptom


def test_missing_with_a_clean_run_that_fed_masked_batches_is_latent() -> None:
    v = verdict.classify(evidence(train=run("clean")), {})
    assert (v.guard, v.reach) == (GuardState.MISSING, Reach.LATENT)


def test_missing_without_a_run_is_unknown_reach() -> None:
    assert verdict.classify(evidence(), {}).reach is Reach.UNKNOWN


def test_a_model_fix_that_crashes_backward_is_broken_with_the_crash_named() -> None:
    v = verdict.classify(evidence(model="fixed", failing=("n3-all-masked-micro-batch", "n5-other-reductions"),
                                  train=run("crash", reason="ga1: chat_sft.py raised RuntimeError: element 0")), {})
    assert (v.zoo, v.guard, v.reach) == (ZooState.FIXED, GuardState.BROKEN, Reach.EXPOSED)
    assert v.symptom.startswith("the NaN became a crash")
    assert "n5-other-reductions" in v.guard_reason


def test_a_loop_guard_that_still_logs_nan_is_broken() -> None:
    v = verdict.classify(evidence(loop="guarded", failing=("n7-logged-loss-finite",), train=run("nan-logged", 2)),
                         {})
    assert v.guard is GuardState.BROKEN and v.symptom.startswith("the logged loss is still NaN")
    assert v.guard_reason.startswith("the loop's guard")


def test_a_loop_guard_whose_tests_fail_but_whose_run_is_clean_is_broken_latent() -> None:
    v = verdict.classify(evidence(loop="guarded", failing=("n4-all-masked-step",), train=run("clean")), {})
    assert (v.guard, v.reach) == (GuardState.BROKEN, Reach.LATENT)
    assert "n4-all-masked-step" in v.symptom


def test_a_working_loop_guard_activates() -> None:
    v = verdict.classify(evidence(loop="guarded", train=run("clean")), {})
    assert v.guard is GuardState.ACTIVATES and v.reach is None


def test_a_working_model_fix_is_not_needed_and_with_a_loop_guard_too_no_ops() -> None:
    assert verdict.classify(evidence(model="fixed", train=run("clean")), {}).guard is GuardState.NOT_NEEDED
    assert verdict.classify(evidence(model="fixed", loop="guarded", train=run("clean")), {}).guard is GuardState.NO_OPS


def test_a_passing_fix_whose_run_could_not_run_is_error() -> None:
    v = verdict.classify(evidence(model="fixed", train=run("error", reason="probe failed")), {})
    assert v.guard is GuardState.ERROR


def test_training_turned_off_judges_by_the_suite() -> None:
    check = evidence(model="fixed")
    check["steps"].append({"name": "train", "status": "skipped", "reason": "n/a: training off"})
    assert verdict.classify(check, {}).guard is GuardState.NOT_NEEDED


@pytest.mark.parametrize(("model", "runtime", "zoo"), [("vulnerable", "fixed", ZooState.INCONSISTENT),
                                                      ("fixed", "vulnerable", ZooState.INCONSISTENT),
                                                      ("unknown", "unknown", ZooState.UNKNOWN),
                                                      ("fixed", "unknown", ZooState.UNKNOWN)])
def test_disagreeing_or_unknown_detectors_are_error(model: str, runtime: str, zoo: ZooState) -> None:
    v = verdict.classify(evidence(model=model, runtime=runtime, train=run("clean")), {})
    assert (v.zoo, v.guard, v.reach) == (zoo, GuardState.ERROR, Reach.UNKNOWN)


def test_a_fix_the_static_reading_abstains_on_is_judged_by_the_runtime_detector_and_its_evidence() -> None:
    # a right fix written in a shape the reading does not know is not an error: the tree's own GPT answered
    v = verdict.classify(evidence(model="unknown", runtime="fixed", train=run("clean")), {})
    assert (v.zoo, v.guard) == (ZooState.FIXED, GuardState.NOT_NEEDED)
    assert "static reading abstained" in v.zoo_reason and "nanochat/gpt.py:520" in v.zoo_reason
    # ... but still by the suite and the run: a wrong one in an unknown shape is broken
    v = verdict.classify(evidence(model="unknown", runtime="fixed", failing=("n5-other-reductions",),
                                  train=run("clean")), {})
    assert v.guard is GuardState.BROKEN
    v = verdict.classify(evidence(model="unknown", runtime="vulnerable", train=run("nan-logged", 1)), {})
    assert (v.zoo, v.guard, v.reach) == (ZooState.VULNERABLE, GuardState.MISSING, Reach.EXPOSED)


def test_an_unreadable_loop_counts_as_guarded_when_the_loop_tests_pass() -> None:
    v = verdict.classify(evidence(loop="unknown", train=run("clean")), {})
    assert v.guard is GuardState.ACTIVATES
    v = verdict.classify(evidence(loop="unknown", failing=("n4-all-masked-step",), train=run("clean")), {})
    assert v.guard is GuardState.MISSING


def test_a_suite_step_that_died_is_a_failure_not_a_pass() -> None:
    check = evidence(model="fixed", train=run("clean"))
    check["steps"][1] = {"name": "behavior", "status": "error", "reason": "boom", "result": None}
    assert verdict.classify(check, {}).guard is GuardState.BROKEN


def test_the_verdict_serialises_with_the_gate() -> None:
    d = verdict.classify(evidence(train=run("nan-logged", 1)), {}).to_dict()
    assert d["guard"] == "missing" and d["reach"] == "exposed" and d["gate_fail"] is True


def test_a_suite_failure_on_a_runtime_fixed_model_is_broken_whatever_the_static_reading_says() -> None:
    # the static reading says vulnerable, the tree's own GPT returns a finite loss, the partial-batch test fails:
    # the fix is wrong, and that is the finding (not an inconsistency to investigate)
    v = verdict.classify(evidence(model="vulnerable", runtime="fixed", failing=("n1-partial-reference",),
                                  train=run("clean")), {})
    assert (v.zoo, v.guard, v.reach) == (ZooState.FIXED, GuardState.BROKEN, Reach.LATENT)
    assert "n1-partial-reference" in v.guard_reason and "static reading says vulnerable" in v.zoo_reason
    # the reverse (the runtime detector sees the NaN) stays an inconsistency
    v = verdict.classify(evidence(model="fixed", runtime="vulnerable", failing=("n1-partial-reference",),
                                  train=run("clean")), {})
    assert v.guard is GuardState.ERROR


def logged_run(ga: int, losses: list[float | str], masked: list[int]) -> dict[str, Any]:
    """A chat_sft.py run's steps: each step's logged loss; in the steps of ``masked`` the last micro-batch has no
    valid target."""
    steps = [{"step": i + 1, "logged_loss": loss,
              "micro_batches": [{"labels_left": 0 if (i + 1 in masked and m == ga - 1) else 40} for m in range(ga)]}
             for i, loss in enumerate(losses)]
    return {"name": f"ga{ga}", "gradient_accumulation_steps": ga, "steps": steps}


def loop_fix(n7_cases: dict[str, bool], runs: list[dict[str, Any]], outcome: str = "clean") -> dict[str, Any]:
    check = evidence(loop="guarded", failing=("n7-logged-loss-finite",), train={**run(outcome), "runs": runs})
    n7 = next(t for t in check["steps"][1]["result"]["tests"] if t["id"] == "n7-logged-loss-finite")
    n7["details"] = {"cases": {k: {"ok": ok} for k, ok in n7_cases.items()}}
    return check


BOTH = [logged_run(1, [3.1, 3.0, 2.9], masked=[2]), logged_run(4, [3.1, 3.0], masked=[1])]


def test_a_proxy_the_real_run_contradicts_is_reported_as_such_and_the_run_stands() -> None:
    v = verdict.classify(loop_fix({"ga2-last-masked": False, "ga1-masked": False}, BOTH), {})
    assert v.guard is GuardState.ACTIVATES, v.guard_reason
    assert "proxy disagrees with the run" in v.guard_reason and "n7-logged-loss-finite" in v.guard_reason
    assert v.behavior.failed == 0 and v.behavior.na == 1


@pytest.mark.parametrize(("runs", "outcome"), [
    # the run logged NaN itself: no disagreement
    ([logged_run(1, [3.1, "nan", "nan"], masked=[2]), BOTH[1]], "nan-logged"),
    # the run never had a fully masked step at GA 1: it says nothing about that case
    ([logged_run(1, [3.1, 3.0, 2.9], masked=[]), BOTH[1]], "clean"),
    # no run at GA > 1: the last-micro-batch case is the proxy's alone
    ([BOTH[0]], "clean"),
])
def test_a_proxy_failure_the_run_does_not_contradict_stands(runs: list[dict[str, Any]], outcome: str) -> None:
    v = verdict.classify(loop_fix({"ga2-last-masked": False, "ga1-masked": False}, runs, outcome), {})
    assert v.guard is GuardState.BROKEN and "n7-logged-loss-finite" in v.guard_reason


def test_only_the_cases_the_run_covers_are_overruled() -> None:
    # n7 fails only at GA 1, the run covers GA 1: overruled; a failing n4 (not a proxy of the log) stands
    check = loop_fix({"ga2-last-masked": True, "ga1-masked": False}, BOTH)
    next(t for t in check["steps"][1]["result"]["tests"] if t["id"] == "n4-all-masked-step")["outcome"] = "fail"
    v = verdict.classify(check, {})
    assert v.guard is GuardState.BROKEN and v.behavior.failing == ("n4-all-masked-step",)
