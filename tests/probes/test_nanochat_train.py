"""The nanochat training probe's pure parts: arguments from --help, a run's record into steps and an outcome,
and the launcher's loader observer. No nanochat, no torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from probes.checks.nanochat_sft_masked_nan import launcher, train

HELP = """usage: chat_sft.py [-h] [--run RUN]
options:
  -h, --help            show this help message and exit
  --run RUN             wandb run name
  --device-type DEVICE_TYPE
  --num-iterations NUM_ITERATIONS
  --device-batch-size DEVICE_BATCH_SIZE
  --total-batch-size TOTAL_BATCH_SIZE
  --eval-every EVAL_EVERY
"""


def test_flags_from_help() -> None:
    assert train.flags(HELP) == {"--run", "--device-type", "--num-iterations", "--device-batch-size",
                                 "--total-batch-size", "--eval-every"}


def test_arguments_follow_the_help() -> None:
    args, dropped = train.argv_for(train.RunSpec("ga4", 4, 3), train.flags(HELP))
    assert "--total-batch-size=8192" in args and "--num-iterations=13" in args and "--device-batch-size=1" in args
    assert "--chatcore-every" in dropped and "--load-optimizer" in dropped
    assert not any(a.startswith("--chatcore-every") for a in args)


def test_an_accumulation_flag_stands_in_for_the_total_batch_size() -> None:
    offered = (train.flags(HELP) - {"--total-batch-size"}) | {"--grad-accum-steps"}
    args, _ = train.argv_for(train.RunSpec("ga4", 4, 3), offered)
    assert "--grad-accum-steps=4" in args


@pytest.mark.parametrize("missing", ["--device-batch-size", "--num-iterations"])
def test_a_ref_without_the_needed_flags_is_not_applicable(missing: str) -> None:
    with pytest.raises(train.NotApplicable, match=missing):
        train.argv_for(train.RunSpec("ga1", 1, 6), train.flags(HELP) - {missing})
    with pytest.raises(train.NotApplicable):
        train.argv_for(train.RunSpec("ga1", 1, 6), train.flags(HELP) - {"--total-batch-size"})


def record(valid: list[int], losses: dict[int, Any], final_bad: int = 0, exc: dict[str, Any] | None = None,
           skipped: tuple[int, ...] = ()) -> dict[str, Any]:
    return {"micro_batches": [{"index": i, "valid_targets": v} for i, v in enumerate(valid)],
            "forwards": [{"micro_batch": i, "valid_targets": v, "loss": losses.get(i, 5.0), "grad_fn": True,
                          "nonfinite_params": 0} for i, v in enumerate(valid) if i not in skipped],
            "final_nonfinite_params": final_bad, "exception": exc}


def test_a_nan_logged_run() -> None:
    rec = record([0, 900, 700, 0], {0: "nan", 3: "nan"})
    steps = train.steps_from(rec, {1: "nan", 2: "nan", 3: "nan"}, 1)
    assert [s["labels_left"] for s in steps] == [0, 900, 700]
    assert steps[0]["micro_batches"][0] == {"labels_left": 0, "n_items": "0", "loss_computed": True,
                                            "raw_loss": "nan", "grad_fn": True}
    out = train.judge({"steps": steps}, 0, None)
    assert out["outcome"] == "nan-logged" and out["first_nan_step"] == 1 and out["nan_until_end"]


def test_accumulation_groups_micro_batches_and_skips_show() -> None:
    rec = record([0, 900, 800, 0, 50], {}, skipped=(0, 3))
    steps = train.steps_from(rec, {1: 5.0, 2: 0.0}, 2)
    assert [[m["loss_computed"] for m in s["micro_batches"]] for s in steps] == [[False, True], [True, False]]
    assert [s["kernel_calls"] for s in steps] == [1, 1]
    assert train.judge({"steps": steps}, 0, None)["outcome"] == "clean"
    assert train.summary([{"steps": steps, "kernel_calls": 2, "masked_micro_batches": [0, 3]}])["masked_inputs"] == []


def test_nonfinite_weights_at_the_end() -> None:
    steps = train.steps_from(record([900, 800], {}, final_bad=7, skipped=(1,)), {1: 5.0}, 1)
    assert train.judge({"steps": steps}, 0, None)["outcome"] == "nan-weights"


def test_a_crash_names_the_step_the_message_and_the_line(tmp_path: Path) -> None:
    exc = {"type": "TypeError", "message": "expected Tensor as element 0 in argument 0, but got NoneType",
           "frames": [[str(tmp_path / "scripts/chat_sft.py"), 461, "<module>", "optimizer.step()"],
                      [str(tmp_path / "nanochat/optim.py"), 257, "_step_muon", "torch.stack(...)"],
                      ["/env/torch/x.py", 1, "f", ""]]}
    rec = record([800, 0], {}, exc=exc, skipped=(1,))
    steps = train.steps_from(rec, {1: 5.0}, 1)
    crash = train.crash_from(rec, 1, len(steps), 1, tmp_path)
    assert crash["at_step"] == 2 and crash["valid_targets"] == [0] and not crash["masked_forward"]
    assert crash["where"] == "nanochat/optim.py:257 `torch.stack(...)`"
    out = train.judge({"steps": steps}, 1, crash)
    assert out["outcome"] == "crash" and "TypeError" in out["symptom"] and "in step 2" in out["symptom"]


def test_a_timeout_is_a_probe_error_not_a_finding() -> None:
    assert train.judge({"steps": []}, None, None)["outcome"] == "error"


class Targets:
    """Enough of a tensor for the observer: ``(y != -1).sum(dim=-1).tolist()``."""

    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows

    def __ne__(self, other: object) -> Targets:  # type: ignore[override]
        return Targets([[int(v != other) for v in row] for row in self.rows])

    def sum(self, dim: int) -> Targets:
        return Targets([[sum(row)] for row in self.rows])

    def tolist(self) -> list[int]:
        return [row[0] for row in self.rows]


LOADER = """
def sft_data_generator_bos_bestfit(split, batches):
    for b in batches:
        yield b
"""


def test_the_observer_sees_only_the_train_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    ns: dict[str, Any] = {}
    exec(compile(LOADER, "/tree/scripts/chat_sft.py", "exec"), ns)
    monkeypatch.setattr(launcher, "STATE", {"micro_batches": [], "forwards": []})
    train_it = ns["sft_data_generator_bos_bestfit"]("train", [("x", Targets([[-1, -1], [-1, 3]]))])
    val_it = ns["sft_data_generator_bos_bestfit"]("val", [("x", Targets([[1, 2]]))])
    assert launcher.recording_next(train_it)[0] == "x"
    launcher.recording_next(val_it)
    assert launcher.recording_next(iter([1]), None) == 1
    assert launcher.STATE["micro_batches"] == [{"index": 0, "valid_targets": 1, "rows_valid": [0, 1]}]


def test_the_result_shapes_match_the_checks_schema() -> None:
    import json

    import jsonschema

    schema = json.loads((Path(train.__file__).with_name("schema.json")).read_text(encoding="utf-8"))
    steps = train.steps_from(record([0, 900], {0: "nan"}), {1: "nan", 2: "nan"}, 1)
    run = {"name": "ga1", "gradient_accumulation_steps": 1, "argv": ["python"], "returncode": 0,
           "loss_lines": ["step 00001 (1%) | loss: nan |"], "steps": steps, **train.judge({"steps": steps}, 0, None)}
    result = {"outcome": run["outcome"], "reason": run["symptom"], "runs": [run], "versions": {"torch": "2.9.1"},
              **train.summary([{**run, "kernel_calls": 2, "masked_micro_batches": [0]}])}
    jsonschema.Draft202012Validator(schema["train"]).validate(result)
    assert result["masked_inputs"] == ["all targets -1"] and result["kernel_calls"] == 2
