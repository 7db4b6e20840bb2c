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
from tests.probes.checks.evidence import behaviour, cpu, fused, train

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
