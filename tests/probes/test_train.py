"""The training probe's pure parts: run layout, outcome wording, number and count encoding, config filtering.

The probe itself needs torch and a real unsloth stack; that is covered on real builds in
``tests/integration/test_train_real.py``. Here the step records are written by hand.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from probes import training
from probes.checks.fused_ce_masked_nan import train
from tests.integration.harness import ROOT


def step(n: int, logged: object, *, left: int = 13, n_items: str = "tensor(13)", nonfinite: int = 0) -> dict:
    return {"step": n, "labels_left": left, "num_items_in_batch": n_items, "logged_loss": logged,
            "nonfinite_params": nonfinite}


def outcome_of(steps: list) -> dict:
    return training.run_outcome(steps, "num_items_in_batch")


def masked_steps(spec: train.RunSpec) -> list[int]:
    """Optimizer steps (1-based) whose every micro-batch is a fully masked example."""
    ga = spec.gradient_accumulation_steps
    return [k + 1 for k in range(spec.max_steps) if all(i in spec.masked for i in range(k * ga, (k + 1) * ga))]


def test_importing_the_probe_imports_no_torch() -> None:
    # The probe runs in the cell process and is listed by tools that have no torch.
    code = "import sys, probes.checks.fused_ce_masked_nan.train; assert 'torch' not in sys.modules, 'torch'"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_runs_have_what_the_design_asks_for() -> None:
    by_ga = {spec.gradient_accumulation_steps: spec for spec in train.RUNS}
    assert set(by_ga) == {1, 2}
    ga1 = by_ga[1]
    # Every 4th example masked, and a clean step before the first masked one, so a NaN that stays
    # in the logged loss after it can be told from a NaN that was there from the start.
    assert masked_steps(ga1) == [4, 8]
    ga2 = by_ga[2]
    assert masked_steps(ga2), "the GA run needs a step whose micro-batches are all masked"
    assert min(masked_steps(ga2)) > 1
    mixed = [k for k in range(ga2.max_steps)
             if len({i in ga2.masked for i in range(2 * k, 2 * k + 2)}) == 2]
    assert mixed, "a half-masked step checks that a positive count keeps a masked micro-batch finite"
    assert len({spec.name for spec in train.RUNS}) == len(train.RUNS)


def test_clean_run_names_its_masked_steps() -> None:
    steps = [step(1, 4.2), step(2, 0.0, left=0, n_items="tensor(0)"), step(3, 4.1)]
    out = outcome_of(steps)
    assert out["outcome"] == "clean"
    assert out["first_nan_step"] is None and out["nan_until_end"] is False
    assert "step 2 logged 0.0 with num_items_in_batch=tensor(0)" in out["symptom"]


def test_clean_run_without_masked_step_says_so() -> None:
    assert "no fully masked step occurred" in outcome_of([step(1, 4.2)])["symptom"]


def test_nan_that_stays_is_named_with_the_count_that_caused_it() -> None:
    steps = [step(1, 4.2), step(2, 4.1), step(3, "nan", left=0, n_items="tensor(0)"), step(4, "nan"), step(5, "nan")]
    out = outcome_of(steps)
    assert out["outcome"] == "nan-logged"
    assert out["first_nan_step"] == 3
    assert out["nan_until_end"] is True
    assert out["symptom"] == ("logged loss NaN from step 3 to the end "
                              "(num_items_in_batch=tensor(0) reached the loss, no label left)")


def test_nan_that_recovers_is_not_until_the_end() -> None:
    steps = [step(1, "nan", left=0, n_items="None"), step(2, "inf"), step(3, 4.0), step(4, "nan")]
    out = outcome_of(steps)
    assert out["outcome"] == "nan-logged"
    assert out["first_nan_step"] == 1
    assert out["nan_until_end"] is False
    assert "finite again at step 3" in out["symptom"]
    assert "num_items_in_batch=None" in out["symptom"]


def test_non_finite_weights_outrank_a_nan_log() -> None:
    steps = [step(1, 4.2), step(2, "nan"), step(3, "nan", nonfinite=7), step(4, "nan", nonfinite=7)]
    out = outcome_of(steps)
    assert out["outcome"] == "nan-weights"
    assert out["first_nan_step"] == 3
    assert out["nan_until_end"] is True
    assert training.SEVERITY["nan-weights"] > training.SEVERITY["nan-logged"] > training.SEVERITY["clean"]


def test_a_step_without_a_log_entry_is_not_called_nan() -> None:
    assert outcome_of([step(1, None), step(2, 4.0)])["outcome"] == "clean"


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), (1.5, 1.5), (2, 2.0), (float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf"),
])
def test_numbers_are_json_safe(value: object, expected: object) -> None:
    assert training.json_number(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(None, "None"), (0, "0"), (5, "5"), (2.5, "2.5")])
def test_counts_that_are_not_tensors(value: object, expected: str) -> None:
    assert training.count_repr(value) == expected


@dataclasses.dataclass
class FakeArgs:
    output_dir: str
    gradient_accumulation_steps: int = 1
    logging_steps: int = 500
    logging_nan_inf_filter: bool = True
    max_steps: int = -1
    use_cpu: bool = False


@dataclasses.dataclass
class OldArgs:
    output_dir: str
    gradient_accumulation_steps: int = 1
    logging_steps: int = 500


def test_config_passes_only_fields_the_class_has() -> None:
    spec = train.RunSpec("x", 2, 3, frozenset())
    args = train._config(FakeArgs, "/tmp/out", spec, "cpu")
    assert args == FakeArgs(output_dir="/tmp/out", gradient_accumulation_steps=2, logging_steps=1,
                            logging_nan_inf_filter=False, max_steps=3, use_cpu=True)
    assert train._config(FakeArgs, "/tmp/out", spec, "cuda").use_cpu is False


def test_config_without_the_nan_filter_switch_is_not_applicable() -> None:
    with pytest.raises(train.NotApplicable, match="logging_nan_inf_filter"):
        train._config(OldArgs, "/tmp/out", train.RUNS[0], "cpu")


# ---------------------------------------------------------------- the evaluation run's outcome


def eval_batch(n: int, left: int, loss: object, *, count: str = "None", model_loss: object = "same",
               kernel: list | None = None) -> dict:
    return {"batch": n, "labels_left": left, "count": count, "loss": loss,
            "model_loss": loss if model_loss == "same" else model_loss,
            "kernel_calls": [{"n_items": count, "raw_loss": k} for k in (kernel or [])]}


def eval_record(eval_loss: object, *batches: dict) -> dict:
    return {"eval_loss": eval_loss, "batches": list(batches),
            "model_loss_function": "transformers.loss.loss_utils.ForCausalLMLoss"}


def test_an_eval_nan_the_kernel_answered_is_the_kernels() -> None:
    out = training.eval_outcome(eval_record("nan", eval_batch(1, 13, 4.0, kernel=[4.0]),
                                            eval_batch(2, 0, "nan", kernel=["nan"])))
    assert (out["outcome"], out["source"]) == ("nan-logged", "kernel")
    assert out["symptom"] == ("eval_loss NaN: the check's kernel answered NaN on eval batch 2 "
                              "(count None reached the kernel, no label left)")


def test_an_eval_nan_from_the_models_own_loss_is_a_stack_hazard_named_by_its_function() -> None:
    # the cpu backend's route: evaluation runs the stock forward, the kernel is never called
    out = training.eval_outcome(eval_record("nan", eval_batch(1, 13, 4.0), eval_batch(2, 0, "nan")))
    assert (out["outcome"], out["source"]) == ("nan-logged", "stack")
    assert out["symptom"] == ("eval_loss NaN from the model's own loss (transformers.loss.loss_utils.ForCausalLMLoss) "
                              "on eval batch 2 (count None reached the model, no label left); the check's kernel "
                              "was not called during evaluation: a stack hazard, not this check's kernel")


def test_an_eval_nan_the_kernel_did_not_answer_is_not_blamed_on_it() -> None:
    # the kernel answered 0.0 on the masked batch, but the trainer's own loss turned it NaN
    trainer_loss = training.eval_outcome(eval_record(
        "nan", eval_batch(2, 0, "nan", model_loss=0.0, kernel=[0.0])))
    assert trainer_loss["source"] == "stack"
    assert "the trainer's loss computation (compute_loss)" in trainer_loss["symptom"]
    assert "the check's kernel answered finite on every eval batch" in trainer_loss["symptom"]
    averaging = training.eval_outcome(eval_record("nan", eval_batch(1, 13, 4.0, kernel=[4.0])))
    assert averaging["source"] == "stack" and "the trainer's averaging" in averaging["symptom"]


def test_a_finite_eval_loss_is_clean_and_shows_the_masked_batch() -> None:
    out = training.eval_outcome(eval_record(2.5, eval_batch(1, 13, 4.0), eval_batch(2, 0, 0.0, count="tensor(0)")))
    assert (out["outcome"], out["source"]) == ("clean", None)
    assert out["symptom"] == ("eval_loss 2.5 finite; batch 2 (no label left, count tensor(0) reached the model) "
                              "gave loss 0.0")


def test_an_eval_crash_is_the_kernels_when_its_frame_is_in_the_traceback() -> None:
    def recorded_kernel_call() -> None:
        raise ZeroDivisionError("0 / 0")

    def trainer_loss() -> None:
        recorded_kernel_call()

    for fn, source in ((trainer_loss, "kernel"), (lambda: 1 / 0, "stack")):
        try:
            fn()
        except ZeroDivisionError as exc:
            out = training.eval_crash(exc, "recorded_kernel_call")
        assert (out["outcome"], out["source"], out["eval_loss"]) == ("crash", source, None)
        assert out["symptom"].startswith("trainer.evaluate() raised ZeroDivisionError")


def test_the_eval_set_has_a_fully_masked_batch_between_trainable_ones() -> None:
    assert min(training.EVAL_MASKED) > 0 and max(training.EVAL_MASKED) < training.EVAL_EXAMPLES - 1
