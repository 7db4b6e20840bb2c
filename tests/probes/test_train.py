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


def test_one_count_per_step_unless_micro_batches_differ() -> None:
    assert train._one_or_all([]) is None
    assert train._one_or_all(["tensor(0)", "tensor(0)"]) == "tensor(0)"
    assert train._one_or_all(["tensor(0)", "tensor(3)"]) == ["tensor(0)", "tensor(3)"]


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
