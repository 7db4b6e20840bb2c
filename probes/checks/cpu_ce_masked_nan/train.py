"""The end-to-end training run on the CPU backend's own route: does a user's run show the NaN?

Runs in a process where ``import unsloth`` selected zoo's CPU backend (no
``UNSLOTH_ALLOW_CPU`` on a host with no accelerator: ``unsloth._cpu_init``).
It saves a tiny random-init Llama and a character-level tokenizer (made in
code, no hub) into a temporary directory, loads them with the backend's
``FastLanguageModel.from_pretrained`` (full finetuning: no PEFT involved, and
the loader installs zoo's chunked CE on the model either way), and trains with
the ``SFTTrainer``/``SFTConfig`` that ``trl`` exports after ``import unsloth``
(the backend patches them), batch 1, NaN log filter off. Two runs: GA 1 with
steps 4 and 8 fully masked, and GA 2 with one optimizer step whose
micro-batches are both fully masked.

Nothing on the route is changed: the kernel the patched forward resolves at
call time (the module global of zoo's CPU ops, whatever object is there now,
a guard's replacement included) is wrapped by a recording pass-through for
the run and restored afterwards. Per optimizer step the result has the labels
left after the shift, ``num_items_in_batch`` as it reached the kernel, the
raw loss of each micro-batch, non-finite parameters, the autograd node, and
the logged loss and grad norm from the trainer's log history.
"""

from __future__ import annotations

import dataclasses
import inspect
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from typing import Any

from probes.training import (
    EVAL_EXAMPLES,
    EVAL_MASKED,
    IGNORE,
    RUNS,
    SEED,
    SEVERITY,
    NotApplicable,
    RunSpec,
    collate,
    count_repr,
    crash_record,
    evaluate_logged,
    in_order,
    json_number,
    masked_dataset,
    nonfinite_params,
    run_outcome,
    summary,
    train_logged,
    version,
)

from .train_model import MAX_SEQ_LENGTH, save_model

ROUTE = ("zoo CPU backend: FastLanguageModel + patched SFTTrainer -> "
         "unsloth_zoo.cpu.ops.chunked_linear_cross_entropy")


ARG_NAMES = ("hidden", "weight", "labels", "num_items_in_batch")  # the kernel's leading parameters


# The recording pass-through's name: its frame in a traceback means the kernel (zoo's, or whatever replaced it) raised.
KERNEL_FRAME = "recorded_kernel_call"


class TrainCrashed(Exception):
    """``trainer.train()`` raised: a user's run crashes the same way."""


def _recording(original: Any, calls: list[dict[str, Any]]) -> Any:
    """A pass-through that calls ``original`` unchanged and records what reached it."""

    def recorded_kernel_call(*args: Any, **kwargs: Any) -> Any:
        loss = original(*args, **kwargs)
        seen = {**dict(zip(ARG_NAMES, args, strict=False)), **kwargs}
        ignore = seen.get("ignore_index", IGNORE)
        shifted = seen.get("shift_labels")
        labels = seen.get("labels")
        if shifted is None and labels is not None:
            shifted = labels[..., 1:]
        calls.append({
            "labels_left": None if shifted is None else int((shifted != ignore).sum()),
            "n_items": count_repr(seen.get("num_items_in_batch")),
            "raw_loss": json_number(loss),
            "kernel": type(loss.grad_fn).__name__ if getattr(loss, "grad_fn", None) is not None else "None",
        })
        return loss

    recorded_kernel_call.__wrapped__ = original  # type: ignore[attr-defined]
    return recorded_kernel_call


def _config(config_cls: type, output_dir: str, spec: RunSpec) -> Any:
    fields = {f.name for f in dataclasses.fields(config_cls)}
    wanted: dict[str, Any] = dict(
        output_dir=output_dir, per_device_train_batch_size=1, per_device_eval_batch_size=1,
        gradient_accumulation_steps=spec.gradient_accumulation_steps, max_steps=spec.max_steps,
        learning_rate=1e-3, logging_steps=1, logging_nan_inf_filter=False, report_to=[], save_strategy="no",
        seed=SEED, data_seed=SEED, dataloader_num_workers=0, disable_tqdm=True, max_grad_norm=1.0,
        use_cpu=True, train_sampling_strategy="sequential", max_length=MAX_SEQ_LENGTH,
        # The dataset is tokenised with its labels: TRL keeps the column and prepares nothing.
        remove_unused_columns=False, dataset_kwargs={"skip_prepare_dataset": True}, packing=False,
    )
    missing = [k for k in ("logging_nan_inf_filter", "gradient_accumulation_steps", "logging_steps") if k not in fields]
    if missing:
        raise NotApplicable(f"{config_cls.__name__} has no {', '.join(missing)}")
    return config_cls(**{k: v for k, v in wanted.items() if k in fields})


def train_once(spec: RunSpec, model_dir: str, calls: list[dict[str, Any]], evaluate: bool = False) -> dict[str, Any]:
    """Load the saved model through the backend, train it once; the run's record and outcome.

    With ``evaluate``, the trained model is then evaluated (``evaluation`` in the record).
    """
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer
    from unsloth import FastLanguageModel

    steps: list[dict[str, Any]] = []

    class StepRecorder(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            mine = list(calls)
            calls.clear()
            ns = [c["n_items"] for c in mine]
            steps.append({
                "step": int(state.global_step),
                "labels_left": sum(c["labels_left"] or 0 for c in mine),
                "num_items_in_batch": None if not ns else ns[0] if len(set(ns)) == 1 else ns,
                "micro_batches": [{"labels_left": c["labels_left"], "n_items": c["n_items"]} for c in mine],
                "raw_loss": [c["raw_loss"] for c in mine],
                "nonfinite_params": nonfinite_params(model) if model is not None else None,
                "kernels": dict(Counter(c["kernel"] for c in mine)),
            })

    model, tokenizer = FastLanguageModel.from_pretrained(model_dir, max_seq_length=MAX_SEQ_LENGTH,
                                                         load_in_4bit=False, full_finetuning=True)
    if not vars(model).get("_unsloth_cpu_chunked_ce", False):
        raise NotApplicable("FastLanguageModel did not install zoo's chunked CE on the model (chunked CE = False): "
                            "the kernel is not on this route")
    output_dir = tempfile.mkdtemp(prefix="skewmatrix-cpu-train-")
    try:
        config = _config(SFTConfig, output_dir, spec)
        trainer_cls, order = in_order(SFTTrainer, config)
        params = inspect.signature(SFTTrainer.__init__).parameters
        kwargs: dict[str, Any] = dict(model=model, args=config, data_collator=collate, callbacks=[StepRecorder()],
                                      train_dataset=masked_dataset(tokenizer, spec.max_steps
                                                                 * spec.gradient_accumulation_steps, spec.masked))
        kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
        trainer = trainer_cls(**kwargs)
        for quiet in (PrinterCallback, ProgressCallback):  # the cell's stdout is not ours to fill
            trainer.remove_callback(quiet)
        calls.clear()
        crashed = train_logged(trainer, steps)
        evaluation = None
        if evaluate:
            evaluation = ({"outcome": "n/a", "source": None, "symptom": "not evaluated: trainer.train() raised"}
                          if crashed is not None else
                          evaluate_logged(trainer, calls, masked_dataset(tokenizer, EVAL_EXAMPLES, EVAL_MASKED),
                                          KERNEL_FRAME, "num_items_in_batch"))
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    run = {"name": spec.name, "trainer": f"{SFTTrainer.__module__}.{SFTTrainer.__qualname__}",
           "trainer_patched": bool(getattr(SFTTrainer, "_unsloth_cpu", False)), "order": order, "chunked_ce": True,
           "gradient_accumulation_steps": spec.gradient_accumulation_steps,
           "model_dtype": str(getattr(model, "dtype", None)), "bf16": getattr(config, "bf16", None),
           "model_accepts_loss_kwargs": getattr(trainer, "model_accepts_loss_kwargs", None),
           "masked_steps": [s["step"] for s in steps if s["labels_left"] == 0], "steps": steps}
    run.update(run_outcome(steps, "num_items_in_batch", "the kernel") if crashed is None
               else crash_record(crashed, steps))
    if evaluation is not None:
        run["evaluation"] = evaluation
    return run


def _route_ready() -> Any:
    """The zoo module that holds the kernel, once this process is on the CPU backend; else NotApplicable."""
    from . import kernel

    if "unsloth._cpu_init" not in sys.modules:
        raise NotApplicable("import unsloth did not select zoo's CPU backend in this process (no unsloth._cpu_init)")
    try:
        ops = kernel.module()
    except ModuleNotFoundError as exc:
        raise NotApplicable(f"no module {kernel.MODULE} ({exc})") from exc
    if not callable(getattr(ops, kernel.FUNCTION, None)):
        raise NotApplicable(f"{kernel.MODULE} has no {kernel.FUNCTION}")
    try:
        import trl  # noqa: F401 -- the backend's supported trainer is TRL's SFTTrainer
    except Exception as exc:
        raise NotApplicable(f"trl not usable ({type(exc).__name__}: {exc}); the CPU backend trains with "
                            "TRL's SFTTrainer") from exc
    return ops


def run(device: str, torch_compile: bool) -> dict[str, Any]:
    """Both ``RUNS`` through the CPU backend; JSON-serialisable, NaN as strings."""
    import torch

    from . import kernel

    start = time.perf_counter()
    result: dict[str, Any] = {"ok": True, "route": ROUTE, "device": device, "torch_compile": torch_compile,
                              "versions": {n: version(n) for n in ("unsloth", "unsloth_zoo", "torch",
                                                                     "transformers", "trl")}}
    empty = {"first_nan_step": None, "nan_until_end": False, "runs": [], "n_items_seen": [], "kernel_calls": 0,
             "masked_inputs": []}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: OpenMP threads only spin on a loaded host
    ops, original, calls = None, None, []  # type: ignore[var-annotated]
    model_dir = tempfile.mkdtemp(prefix="skewmatrix-cpu-model-")
    try:
        ops = _route_ready()
        original = getattr(ops, kernel.FUNCTION)
        result["kernel_object"] = f"{getattr(original, '__module__', '?')}.{getattr(original, '__qualname__', '?')}"
        save_model(model_dir)
        setattr(ops, kernel.FUNCTION, _recording(original, calls))
        runs = [train_once(spec, model_dir, calls, evaluate=i == 0) for i, spec in enumerate(RUNS)]
    except NotApplicable as exc:
        result.update(outcome="n/a", reason=f"n/a: {exc}", **empty)
    except Exception as exc:  # the probe itself could not set up: not a finding
        result.update(ok=False, outcome="error", reason=f"training probe failed: {type(exc).__name__}: {exc}",
                      error=traceback.format_exc(limit=40), **empty)
    else:
        worst = max(runs, key=lambda r: SEVERITY[r["outcome"]])
        evaluation = runs[0].pop("evaluation", None)
        result.update(outcome=worst["outcome"], first_nan_step=worst["first_nan_step"],
                      nan_until_end=worst["nan_until_end"], runs=runs, **summary(runs),
                      reason="; ".join(f"{r['name']}: {r['symptom']}" for r in runs), evaluation=evaluation)
    finally:
        if ops is not None and original is not None:
            setattr(ops, kernel.FUNCTION, original)
        shutil.rmtree(model_dir, ignore_errors=True)
        torch.set_num_threads(threads)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
