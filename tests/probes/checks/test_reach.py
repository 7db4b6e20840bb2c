"""Reach (issue 17): a failing verdict says whether a real training run on the cell shows it.

Evidence is hand-written; every expectation follows from the rule in
``probes.checks.vocabulary.reach``: a run that shows the symptom is
``exposed``; a clean run that sent the kernel fully masked micro-batches is
``latent``; anything else (no run, a run that broke, a run that never sent a
fully masked micro-batch) is ``unknown`` and fails like ``exposed``.
"""

from __future__ import annotations

from probes.checks.cpu_ce_masked_nan import verdict as cpu_verdict
from probes.checks.fused_ce_masked_nan import verdict as fused_verdict
from probes.checks.vocabulary import GuardState, Reach, fails_gate
from tests.probes.checks.evidence import behaviour, cpu, evaluation, fused, train

STACK = {"transformers": "4.52.4", "trl": "0.18.2", "torch": "2.14.1"}
CLEAN_ZERO = train("clean", kernel_calls=12, masked=["0.0"], versions=STACK,
                   reason="ga1: logged loss finite at every step")


def cpu_v(**kw: object) -> object:
    return cpu_verdict.classify(cpu(**kw), {})  # type: ignore[arg-type]


def test_clean_run_that_sent_a_count_is_latent_and_passes_the_default_gate_only() -> None:
    v = cpu_v(training=CLEAN_ZERO)
    assert v.guard is GuardState.MISSING and v.reach is Reach.LATENT
    assert "num_items_in_batch=0.0" in v.reach_reason and "transformers 4.52.4, TRL 0.18.2" in v.reach_reason
    assert "num_items_in_batch=None" in v.reach_reason  # the input that would reach the fault
    d = v.to_dict()
    assert d["reach"] == "latent" and d["gate_fail"] is False and d["gate_warn"] is True
    strict = v.to_dict(strict=True)
    assert strict["gate_fail"] is True and strict["gate_warn"] is False


def test_run_that_logs_nan_is_exposed_and_fails() -> None:
    v = cpu_v(training=train("nan-logged", 4, "logged loss NaN from step 4 to the end", kernel_calls=8,
                             masked=["None"]))
    assert v.guard is GuardState.MISSING and v.reach is Reach.EXPOSED
    assert "step 4 to the end" in v.symptom and v.to_dict()["gate_fail"] is True


def test_a_crash_inside_the_trainer_is_a_symptom() -> None:
    v = cpu_v(training=train("crash", None, "trainer.train() raised ZeroDivisionError", kernel_calls=3,
                             masked=["0.0"]))
    assert v.reach is Reach.EXPOSED and v.to_dict()["gate_fail"] is True


def test_no_training_run_is_unknown_and_fails() -> None:
    v = cpu_v()
    assert v.guard is GuardState.MISSING and v.reach is Reach.UNKNOWN
    assert "no training run" in v.reach_reason and v.to_dict()["gate_fail"] is True


def test_a_run_that_could_not_run_is_no_evidence() -> None:
    errored = cpu_v(train_status="error", train_reason="KeyError: 'labels'")
    assert errored.reach is Reach.UNKNOWN and "KeyError" in errored.reach_reason
    assert errored.to_dict()["gate_fail"] is True
    skipped = cpu_v(train_status="skipped", train_reason="n/a: this zoo has no CPU backend")
    assert skipped.reach is Reach.UNKNOWN and skipped.to_dict()["gate_fail"] is True


def test_a_clean_run_that_never_sent_a_fully_masked_batch_proves_nothing() -> None:
    for t in (train("clean", kernel_calls=0, masked=[]), train("clean", kernel_calls=8, masked=[]),
              train("clean")):
        v = cpu_v(training=t)
        assert v.reach is Reach.UNKNOWN and v.to_dict()["gate_fail"] is True, t


def test_broken_fails_whatever_the_route() -> None:
    v = cpu_v(original=False, finite=True, outcomes={"c1": "fail", "c2": "pass"}, training=CLEAN_ZERO)
    assert v.guard is GuardState.BROKEN and v.reach is Reach.LATENT
    assert v.to_dict()["gate_fail"] is True


def test_a_replacement_whose_run_logs_nan_is_broken() -> None:
    v = cpu_v(original=False, finite=True, outcomes={"c1": "pass"},
              training=train("nan-logged", 2, "logged loss NaN from step 2", kernel_calls=4, masked=["0.0"]))
    assert v.guard is GuardState.BROKEN and "training run nan-logged from step 2" in v.guard_reason


def test_passing_states_have_no_reach() -> None:
    assert cpu_v(static="fixed", runtime="fixed", finite=True, training=CLEAN_ZERO).reach is None
    assert cpu_v(static="absent", runtime="absent").reach is None
    d = cpu_v(static="absent", runtime="absent").to_dict()
    assert d["reach"] is None and d["gate_fail"] is False and d["gate_warn"] is False


def test_fused_guard_whose_training_crashes_is_broken() -> None:
    ok = {f"{i:02d}": "pass" for i in range(1, 15)}
    v = fused_verdict.classify(fused(original=False, finite=True, behavior=behaviour(ok, True),
                                     training=train("crash", None, "trainer.train() raised RuntimeError")), {})
    assert v.guard is GuardState.BROKEN and "crash" in v.guard_reason


def test_fused_missing_with_a_nan_run_is_exposed() -> None:
    v = fused_verdict.classify(fused(training=train("nan-logged", 4, "logged loss NaN from step 4",
                                                    kernel_calls=8, masked=["tensor(0)"])), {})
    assert v.guard is GuardState.MISSING and v.reach is Reach.EXPOSED


def test_the_gate_rule() -> None:
    failing = frozenset({"missing", "broken", "error"})
    assert fails_gate("missing", "exposed", failing) and fails_gate("missing", "unknown", failing)
    assert not fails_gate("missing", "latent", failing) and fails_gate("missing", "latent", failing, strict=True)
    assert fails_gate("broken", "latent", failing) and fails_gate("error", "unknown", failing)
    assert not fails_gate("activates", None, failing) and not fails_gate("missing", "exposed", frozenset())


# ---------------------------------------------------------------- the evaluation run (issue 27, item 5)
# The training run's evidence stays CLEAN_ZERO's; the evaluation after it changes. A NaN eval_loss the
# check's kernel answered is judged like a NaN training run; one made elsewhere on the stack (the model's
# own loss, the trainer) is a stack hazard: named, and blamed on nothing the check judges.

EVAL_NAN_KERNEL = evaluation("nan-logged", "kernel", loss="nan", masked_loss="nan", kernel_loss="nan")
EVAL_NAN_STACK = evaluation("nan-logged", "stack", loss="nan", masked_loss="nan")  # the kernel was not called
EVAL_CLEAN_ON_KERNEL = evaluation("clean", count="tensor(0)", kernel_loss=0.0)


def with_eval(ev: dict) -> dict:
    return train("clean", kernel_calls=12, masked=["tensor(0)"], versions=STACK,
                 reason="ga1: logged loss finite at every step", evaluation=ev)


def test_an_evaluation_the_kernel_turns_nan_is_exposed_though_training_was_clean() -> None:
    v = cpu_v(training=with_eval(EVAL_NAN_KERNEL))
    assert v.guard is GuardState.MISSING and v.reach is Reach.EXPOSED
    assert "evaluation" in v.reach_reason and "transformers 4.52.4, TRL 0.18.2" in v.reach_reason
    assert "evaluation nan-logged kernel" in v.symptom  # the missing guard's symptom is the evaluation's
    assert v.training is not None and v.training.label() == "clean, evaluation eval_loss nan"
    assert v.to_dict()["gate_fail"] is True


def test_a_nan_evaluation_from_the_stack_leaves_the_kernel_latent_and_is_named_a_stack_hazard() -> None:
    v = cpu_v(training=with_eval(EVAL_NAN_STACK))
    assert v.guard is GuardState.MISSING and v.reach is Reach.LATENT
    assert "stack hazard: evaluation nan-logged stack" in v.reach_reason
    assert v.training is not None and v.training.label() == "clean" and not v.training.failed
    d = v.to_dict()
    assert (d["gate_fail"], d["gate_warn"]) == (False, True)
    assert d["training"]["evaluation"]["source"] == "stack"


def test_a_clean_evaluation_through_the_kernel_keeps_latent_and_says_what_it_sent() -> None:
    v = cpu_v(training=with_eval(EVAL_CLEAN_ON_KERNEL))
    assert v.reach is Reach.LATENT
    assert "evaluation (trainer.evaluate()) sent num_items_in_batch=tensor(0)" in v.reach_reason
    off_route = cpu_v(training=with_eval(evaluation("clean", masked_loss=0.0)))
    assert "does not call this kernel" in off_route.reach_reason


def test_a_stack_hazard_is_no_fault_of_a_fixed_zoo_nor_of_a_replacement() -> None:
    fixed = cpu_v(static="fixed", runtime="fixed", finite=True, training=with_eval(EVAL_NAN_STACK))
    assert fixed.guard is GuardState.NOT_NEEDED, fixed.guard_reason
    guarded = cpu_v(original=False, finite=True, outcomes={"c1": "pass"}, training=with_eval(EVAL_NAN_STACK))
    assert guarded.guard is GuardState.ACTIVATES, guarded.guard_reason


def test_a_replacement_whose_kernel_turns_the_evaluation_nan_is_broken() -> None:
    v = cpu_v(original=False, finite=True, outcomes={"c1": "pass"}, training=with_eval(EVAL_NAN_KERNEL))
    assert v.guard is GuardState.BROKEN and "evaluation: evaluation nan-logged kernel" in v.guard_reason
    ok = {f"{i:02d}": "pass" for i in range(1, 15)}
    f = fused_verdict.classify(fused(original=False, finite=True, behavior=behaviour(ok, True),
                                     training=with_eval(EVAL_NAN_KERNEL)), {})
    assert f.guard is GuardState.BROKEN and "evaluation eval_loss nan" in f.guard_reason


def test_fused_missing_whose_evaluation_alone_shows_the_nan_is_exposed() -> None:
    v = fused_verdict.classify(fused(training=with_eval(EVAL_NAN_KERNEL)), {})
    assert v.guard is GuardState.MISSING and v.reach is Reach.EXPOSED
    stack = fused_verdict.classify(fused(training=with_eval(EVAL_NAN_STACK)), {})
    assert stack.reach is Reach.LATENT and "stack hazard" in stack.reach_reason


def test_an_evaluation_crash_is_judged_by_where_it_raised() -> None:
    inside = evaluation("crash", "kernel", loss=None)
    outside = evaluation("crash", "stack", loss=None)
    assert cpu_v(training=with_eval(inside)).reach is Reach.EXPOSED
    assert cpu_v(training=with_eval(outside)).reach is Reach.LATENT
