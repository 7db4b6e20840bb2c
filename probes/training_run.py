"""How a check's training step drives a trainer and reports it: the scaffolding every ``train.py`` shares.

``probes.training`` holds the data and the judgement of a run; this module
holds the plumbing around them that each check's training step would
otherwise copy: the trainer arguments every run sets alike (one process, a
log line per step, the NaN log filter off, no saving, no reporting), the
arguments filtered to the fields the installed config class has, a trainer
built on the shared batch-1 data with its console callbacks removed, the
callback that turns what the check's recording saw into one record per
optimizer step, training followed by the evaluation run, and the step's
result around it all: versions, one torch thread, ``n/a`` for a route this
stack cannot run, ``error`` for the probe's own failure, the worst run's
outcome otherwise, and the seconds it took.

What stays the check's (``probes/checks/<check>/train.py``): its route into
its kernel (the model, the trainer class, the recording of each kernel call
as ``{"labels_left", "n_items", "raw_loss"}``, plus ``"kernel"`` where it
names the autograd node) and the arguments its route needs beyond these.
Knows no check. Importing it imports nothing heavy: torch and transformers
are imported by the functions that need them.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from probes.training import (
    EVAL_EXAMPLES,
    EVAL_MASKED,
    SEED,
    SEVERITY,
    NotApplicable,
    RunSpec,
    collate,
    evaluate_logged,
    in_order,
    masked_dataset,
    nonfinite_params,
    summary,
    train_logged,
    version,
)

# The arguments without which a run cannot show a logged NaN: a log line per step, unfiltered.
REQUIRED = ("logging_nan_inf_filter", "gradient_accumulation_steps", "logging_steps")


def _empty() -> dict[str, Any]:
    """What an ``n/a`` or ``error`` result carries for the runs it did not make."""
    return {"first_nan_step": None, "nan_until_end": False, "runs": [], **summary([])}


def base_args() -> dict[str, Any]:
    """The trainer arguments every check's run sets alike (a new dict each call: the config may keep the list)."""
    return dict(learning_rate=1e-3, logging_steps=1, logging_nan_inf_filter=False, report_to=[], save_strategy="no",
                seed=SEED, data_seed=SEED, dataloader_num_workers=0, disable_tqdm=True)


def sft_config(config_cls: type, output_dir: str, spec: RunSpec, **extra: Any) -> Any:
    """:func:`trainer_args` for a batch-1 supervised run of ``spec`` on the shared data, in order, as tokenised,
    with the ``extra`` arguments the check's route needs."""
    return trainer_args(config_cls, dict(
        output_dir=output_dir, per_device_train_batch_size=1, per_device_eval_batch_size=1,
        gradient_accumulation_steps=spec.gradient_accumulation_steps, max_steps=spec.max_steps, **base_args(),
        max_grad_norm=1.0,
        # Sequential order puts the masked examples on known steps.
        train_sampling_strategy="sequential",
        # TRL: the dataset is already tokenised with its labels (TRL 0.18 drops a column its model
        # signature lacks, ``labels`` included, unless told not to); no packing.
        remove_unused_columns=False, dataset_kwargs={"skip_prepare_dataset": True}, packing=False, **extra,
    ))


def trainer_args(config_cls: type, wanted: dict[str, Any], required: Iterable[str] = REQUIRED) -> Any:
    """``config_cls`` built from the ``wanted`` arguments it has (the others are dropped: versions differ);
    ``NotApplicable`` naming those of ``required`` it lacks."""
    fields = {f.name for f in dataclasses.fields(config_cls)}
    missing = [k for k in required if k not in fields]
    if missing:
        raise NotApplicable(f"{config_cls.__name__} has no {', '.join(missing)}")
    return config_cls(**{k: v for k, v in wanted.items() if k in fields})


def quiet(trainer: Any) -> Any:
    """``trainer`` without its console callbacks: the cell's stdout is not ours to fill."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)
    return trainer


def sft_trainer(trainer_cls: type, args: Any, model: Any, tokenizer: Any, spec: RunSpec,
                callback: Any) -> tuple[Any, str]:
    """A quiet ``trainer_cls`` on ``spec``'s masked data at batch 1, in order; and how the order was kept."""
    params = inspect.signature(trainer_cls.__init__).parameters
    kwargs: dict[str, Any] = dict(model=model, args=args, data_collator=collate, callbacks=[callback],
                                  train_dataset=masked_dataset(tokenizer, spec.max_steps
                                                               * spec.gradient_accumulation_steps, spec.masked))
    kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
    cls, order = in_order(trainer_cls, args)
    return quiet(cls(**kwargs)), order


# ---------------------------------------------------------------- a run's records


def one_or_all(values: list[str]) -> str | list[str] | None:
    """The count a step's micro-batches received: one value (counted per step), else each."""
    if not values:
        return None
    return values[0] if len(set(values)) == 1 else values


def step_recorder(calls: list[dict[str, Any]], steps: list[dict[str, Any]], count: str, kernels: bool = True,
                  extra: Callable[[], dict[str, Any]] | None = None) -> Any:
    """A ``TrainerCallback`` that, at each optimizer step's end, moves the step's ``calls`` into one record.

    The record: the step, the labels left over its micro-batches, the count the trainer handed the kernel under
    the check's name for it, ``count`` (:func:`one_or_all` of the calls'),
    each micro-batch's labels and count, each call's ``raw_loss``, the non-finite parameters after the step,
    with ``kernels`` the calls' autograd nodes counted, and what ``extra()`` adds (it may replace any of these).
    """
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            mine = list(calls)
            calls.clear()
            step = {
                "step": int(state.global_step),
                "labels_left": sum(c["labels_left"] or 0 for c in mine),
                count: one_or_all([c["n_items"] for c in mine]),
                "micro_batches": [{"labels_left": c["labels_left"], "n_items": c["n_items"]} for c in mine],
                "raw_loss": [c.get("raw_loss") for c in mine],
                "nonfinite_params": nonfinite_params(model) if model is not None else None,
            }
            if kernels:
                step["kernels"] = dict(Counter(c["kernel"] for c in mine))
            if extra is not None:
                step.update(extra())
            steps.append(step)

    return StepRecorder()


def run_record(name: str, steps: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A run's record before its outcome: its name, what the check says of it, its masked steps and its steps."""
    return {"name": name, **fields, "masked_steps": [s["step"] for s in steps if s["labels_left"] == 0],
            "steps": steps}


def train_recorded(trainer: Any, steps: list[dict[str, Any]], calls: list[dict[str, Any]], tokenizer: Any = None,
                   evaluate: tuple[str, str] | None = None) -> tuple[BaseException | None, dict[str, Any] | None]:
    """Train from empty ``calls`` (:func:`probes.training.train_logged`): what ``train()`` raised, and the evaluation.

    With ``evaluate`` (the kernel's frame name, the count's keyword) the trained model is then evaluated on
    the shared eval set (:func:`probes.training.evaluate_logged`), or ``n/a`` when training raised.
    """
    calls.clear()
    crashed = train_logged(trainer, steps)
    if evaluate is None:
        return crashed, None
    if crashed is not None:
        return crashed, {"outcome": "n/a", "source": None, "symptom": "not evaluated: trainer.train() raised"}
    kernel_name, count = evaluate
    return crashed, evaluate_logged(trainer, calls, masked_dataset(tokenizer, EVAL_EXAMPLES, EVAL_MASKED),
                                    kernel_name, count)


# ---------------------------------------------------------------- the step's result


def judged(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The step's outcome from its runs: the worst run's, every run's symptom, the counts seen; the first
    run's evaluation where it made one."""
    worst = max(runs, key=lambda r: SEVERITY[r["outcome"]])
    out = {"outcome": worst["outcome"], "first_nan_step": worst["first_nan_step"],
           "nan_until_end": worst["nan_until_end"], "runs": runs,
           "reason": "; ".join(f"{r['name']}: {r['symptom']}" for r in runs), **summary(runs)}
    if "evaluation" in runs[0]:
        out["evaluation"] = runs[0].pop("evaluation")
    return out


def probe_run(route: str, device: str, torch_compile: bool, packages: Iterable[str],
              runs: Callable[[dict[str, Any]], list[dict[str, Any]]],
              unavailable: type[NotApplicable] | None = None) -> dict[str, Any]:
    """A training step's result (JSON-serialisable, NaN as strings) around the check's ``runs(result)``.

    ``runs`` makes the check's runs (it may add what it learns to ``result`` first) and raises
    ``NotApplicable`` where this stack has no route (an ``n/a``; one of class ``unavailable`` is also
    kept under ``unavailable``); any other exception is the probe's own failure, an ``error`` with its
    traceback, never a finding.
    """
    import torch

    start = time.perf_counter()
    result: dict[str, Any] = {"ok": True, "route": route, "device": device, "torch_compile": torch_compile,
                              "versions": {n: version(n) for n in packages}}
    # One thread: the tensors are tiny, and on a loaded host OpenMP's spinning
    # threads make each op ~20x slower (measured on 2 shared cores).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        made = runs(result)
    except NotApplicable as exc:
        if unavailable is not None and isinstance(exc, unavailable):
            result["unavailable"] = str(exc)
        result.update(outcome="n/a", reason=f"n/a: {exc}", **_empty())
    except Exception as exc:  # the probe itself broke before or around training: not a finding
        result.update(ok=False, outcome="error", reason=f"training probe failed: {type(exc).__name__}: {exc}",
                      error=traceback.format_exc(limit=40), **_empty())
    else:
        result.update(judged(made))
    finally:
        torch.set_num_threads(threads)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
