"""grpo-normalizer-nan's routes and the suite's newer demands, without torch: every case on every route (zoo's
module attribute and the loss functions of unsloth's generated UnslothGRPOTrainer), a 0 / 0 answer a trainer can
step on, the fractional normaliser, exceptions that propagate, and the verdict of a guard that reaches only one
route. Outcomes here are written by hand, the way ``kernel.outcome`` records them; the real builds are in
tests/integration/test_grpo_matrix.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from probes.checks.grpo_normalizer_nan import suite, trainer
from probes.checks.grpo_normalizer_nan import verdict as grpo_verdict
from probes.checks.vocabulary import GuardState

# zoo's 0 / 0 (NaN loss with a graph, zero gradients) and right / wrong answers to it.
NAN = {"loss": "nan", "loss_finite": False, "grads_finite": True, "loss_hex": "nan", "grad_hex": ["0x0.0p+0"],
       "kl": None, "requires_grad": True, "grads_zero": True, "grad_reaches_new": True}
ZERO = {**NAN, "loss": 0.0, "loss_finite": True, "loss_hex": "0x0.0p+0"}
NO_GRAPH = {**ZERO, "requires_grad": False, "grad_hex": [], "grad_reaches_new": False}
MOVES = {**ZERO, "grads_zero": False, "grad_hex": ["0x1.0p-2"]}
POS = {"loss": 0.5, "loss_finite": True, "grads_finite": True, "loss_hex": "0x1.0p-1", "grad_hex": ["0x1.0p-2"],
       "kl": None, "requires_grad": True, "grads_zero": False, "grad_reaches_new": True}
RAISED = {"error": "RuntimeError", "message": "CUDA out of memory. Tried to allocate 2.00 GiB"}

ALL_MASKED = suite.Case("s1-zero-all-masked", "dapo", (False, False), "tensor(0.)")


def test_the_zero_answer_must_be_connected_to_the_parameters_with_zero_gradients() -> None:
    assert suite.compare(ALL_MASKED, ZERO, NAN) == ""
    assert "no autograd graph" in suite.compare(ALL_MASKED, NO_GRAPH, NAN)
    assert "gradients are not all 0" in suite.compare(ALL_MASKED, MOVES, NAN)
    detached = {**ZERO, "grad_reaches_new": False, "grad_hex": []}
    assert "does not reach the log-probabilities" in suite.compare(ALL_MASKED, detached, NAN)


def test_a_swallowed_kernel_exception_fails_and_a_propagated_one_passes() -> None:
    case = suite.Case("s7-errors-propagate", "dapo", (True, True), "tensor(3.)", fault="oom")
    assert "swallowed" in suite.compare(case, ZERO, RAISED)
    assert suite.compare(case, dict(RAISED), RAISED) == ""
    assert "error" in suite.compare(case, {"error": "ValueError"}, RAISED)  # another type is not the same


def test_the_cases_cover_the_fractional_normaliser_none_and_faults_on_every_loss_type() -> None:
    from probes.checks.grpo_normalizer_nan.judge import LOSS_TYPES

    cases = suite.cases()
    fractional = {c.loss_type for c in cases if c.test == "s6-fractional-normaliser"
                  and c.count == "tensor(1)" and c.processes == 2}
    none_masked = {c.loss_type for c in cases if c.test == "s3-none-count" and c.rows == (False, False)}
    faults = {(c.loss_type, c.fault) for c in cases if c.test == "s7-errors-propagate" and any(c.rows)}
    assert fractional == none_masked == set(LOSS_TYPES)
    assert faults == {(lt, f) for lt in LOSS_TYPES for f in ("oom", "type")}
    assert suite.COUNTS["tensor(1)"][0] == "long"  # TRL's own count: a sum of int64 lengths
    assert len({c.key for c in cases}) == len(cases)


def _oracle() -> dict[str, dict[str, Any]]:
    return {c.key: (RAISED if c.fault else NAN if c.test == "s1-zero-all-masked" and c.loss_type == "dapo"
                    else POS) for c in suite.cases()}


def test_every_route_is_judged_and_a_failure_names_its_route() -> None:
    oracle = _oracle()
    right = {k: [ZERO if v is NAN else dict(v)] for k, v in oracle.items()}
    attribute_only = {"zoo's module attribute": right, trainer.route_name("grpo_compute_loss"):
                      {k: [dict(v)] for k, v in oracle.items()}}
    outcomes = {t["id"]: t for t in suite.tests(oracle, attribute_only)}
    s1 = outcomes["s1-zero-all-masked"]
    assert s1["outcome"] == "fail" and "UnslothGRPOTrainer's grpo_compute_loss" in s1["reason"]
    assert "module attribute" not in s1["reason"]
    assert all(t["outcome"] == "pass" for t in suite.tests(oracle, {"a": right, "b": right}))


def _section(*, module_finite: bool, trainer_finite: bool, trainer_replaced: bool = False,
             trainer_plain: bool = True, module_replaced: bool = False, s1_fails: bool = False) -> dict[str, Any]:
    def route(ok: bool) -> dict[str, Any]:
        return {"loss": 0.0 if ok else "nan", "loss_finite": ok, "grads_finite": True}

    tests = [{"id": t, "outcome": "fail" if s1_fails and t == "s1-zero-all-masked" else "pass",
              "reason": "dapo count tensor(0.) through UnslothGRPOTrainer's grpo_compute_loss: 0 / 0 still not finite"
              if s1_fails and t == "s1-zero-all-masked" else "ok"} for t in suite.TITLES]
    guard = {"kernel": "present", "original": not module_replaced,
             "routes": {"zoo's module attribute": route(module_finite),
                        trainer.route_name("grpo_compute_loss"): route(trainer_finite)},
             "handoff": {"found": True, "plain": True, "statements": [], "passes": ["num_items_in_batch"]},
             "trainer": {"state": "generated", "original": {"grpo_compute_loss": not trainer_replaced},
                         "handoff": {"found": True, "plain": trainer_plain, "passes": ["num_items_in_batch"],
                                     "statements": [] if trainer_plain else ["n = floor(n)"]}}}
    return {"static": {"verdict": "vulnerable", "reason": "s"},
            "steps": [{"name": "runtime", "status": "ok", "result": {"verdict": "vulnerable", "reason": "r"}},
                      {"name": "guard", "status": "ok", "result": guard},
                      {"name": "behavior", "status": "ok", "result": {"tests": tests}}]}


def test_a_guard_on_the_module_attribute_only_is_broken_and_names_the_route_it_missed() -> None:
    v = grpo_verdict.classify(_section(module_finite=True, trainer_finite=False, module_replaced=True,
                                       s1_fails=True), {})
    assert v.guard is GuardState.BROKEN
    assert "through UnslothGRPOTrainer's grpo_compute_loss is not finite" in v.guard_reason
    assert "misses that route" in v.guard_reason and "0 / 0 still not finite" in v.guard_reason


def test_a_guard_in_the_generated_trainer_only_is_present_and_broken_for_the_module_route() -> None:
    v = grpo_verdict.classify(_section(module_finite=False, trainer_finite=True, trainer_replaced=True), {})
    assert v.guard is GuardState.BROKEN and "zoo's module attribute is not finite" in v.guard_reason
    assert "UnslothGRPOTrainer's grpo_compute_loss replaced" in v.guard_reason
    changed = grpo_verdict.classify(_section(module_finite=False, trainer_finite=True, trainer_plain=False), {})
    assert changed.guard is GuardState.BROKEN  # not "missing": the trainer's hand-off changes the count


def test_nothing_changed_on_either_route_is_missing() -> None:
    v = grpo_verdict.classify(_section(module_finite=False, trainer_finite=False), {})
    assert v.guard is GuardState.MISSING


def test_only_torch_and_zoo_compile_wrappers_are_unwrapped_for_the_fingerprint() -> None:
    def zoo_body() -> None: ...

    def guard_wrapper() -> None: ...

    compiled = SimpleNamespace(_torchdynamo_orig_callable=zoo_body)  # torch.compile's result holds what it compiles
    assert trainer._unwrapped_compile(compiled) is zoo_body
    guard_wrapper.__wrapped__ = zoo_body  # type: ignore[attr-defined]  # functools.wraps in a guard: kept
    assert trainer._unwrapped_compile(guard_wrapper) is guard_wrapper


def test_a_changed_trainer_copy_on_a_fixed_zoo_is_judged_by_the_suite() -> None:
    fixed = _section(module_finite=True, trainer_finite=True, trainer_replaced=True)
    for s in fixed["steps"]:
        if s["name"] == "runtime":
            s["result"]["verdict"] = "fixed"
    fixed["static"]["verdict"] = "fixed"
    assert grpo_verdict.classify(fixed, {}).guard is GuardState.NO_OPS
    for s in fixed["steps"]:
        if s["name"] == "behavior":
            s["result"]["tests"][0]["outcome"] = "fail"
    assert grpo_verdict.classify(fixed, {}).guard is GuardState.BROKEN
