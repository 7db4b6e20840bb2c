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

import shutil
import sys
import tempfile
from typing import Any

from probes.training import IGNORE, RUNS, NotApplicable, RunSpec, count_repr, crash_record, json_number, run_outcome
from probes.training_run import probe_run, run_record, sft_config, sft_trainer, step_recorder, train_recorded

from .train_model import MAX_SEQ_LENGTH, save_model

ROUTE = ("zoo CPU backend: FastLanguageModel + patched SFTTrainer -> "
         "unsloth_zoo.cpu.ops.chunked_linear_cross_entropy")


COUNT = "num_items_in_batch"  # what the backend's trainer hands the kernel, as the records name it
ARG_NAMES = ("hidden", "weight", "labels", "num_items_in_batch")  # the kernel's leading parameters


# The recording pass-through's name: its frame in a traceback means the kernel (zoo's, or whatever replaced it) raised.
KERNEL_FRAME = "recorded_kernel_call"


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


def train_once(spec: RunSpec, model_dir: str, calls: list[dict[str, Any]], evaluate: bool = False) -> dict[str, Any]:
    """Load the saved model through the backend, train it once; the run's record and outcome.

    With ``evaluate``, the trained model is then evaluated (``evaluation`` in the record).
    """
    from trl import SFTConfig, SFTTrainer
    from unsloth import FastLanguageModel

    steps: list[dict[str, Any]] = []
    model, tokenizer = FastLanguageModel.from_pretrained(model_dir, max_seq_length=MAX_SEQ_LENGTH,
                                                         load_in_4bit=False, full_finetuning=True)
    if not vars(model).get("_unsloth_cpu_chunked_ce", False):
        raise NotApplicable("FastLanguageModel did not install zoo's chunked CE on the model (chunked CE = False): "
                            "the kernel is not on this route")
    output_dir = tempfile.mkdtemp(prefix="skewmatrix-cpu-train-")
    try:
        config = sft_config(SFTConfig, output_dir, spec, use_cpu=True, max_length=MAX_SEQ_LENGTH)
        trainer, order = sft_trainer(SFTTrainer, config, model, tokenizer, spec, step_recorder(calls, steps, COUNT))
        crashed, evaluation = train_recorded(trainer, steps, calls, tokenizer,
                                             (KERNEL_FRAME, COUNT) if evaluate else None)
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    run = run_record(spec.name, steps, trainer=f"{SFTTrainer.__module__}.{SFTTrainer.__qualname__}",
                     trainer_patched=bool(getattr(SFTTrainer, "_unsloth_cpu", False)), order=order, chunked_ce=True,
                     gradient_accumulation_steps=spec.gradient_accumulation_steps,
                     model_dtype=str(getattr(model, "dtype", None)), bf16=getattr(config, "bf16", None),
                     model_accepts_loss_kwargs=getattr(trainer, "model_accepts_loss_kwargs", None))
    run.update(run_outcome(steps, COUNT, "the kernel") if crashed is None
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


def _runs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Both ``RUNS``, the first evaluated too, with the kernel wrapped by the recording for their time only."""
    from . import kernel

    ops = _route_ready()
    original = getattr(ops, kernel.FUNCTION)
    result["kernel_object"] = f"{getattr(original, '__module__', '?')}.{getattr(original, '__qualname__', '?')}"
    calls: list[dict[str, Any]] = []
    model_dir = tempfile.mkdtemp(prefix="skewmatrix-cpu-model-")
    try:
        save_model(model_dir)
        setattr(ops, kernel.FUNCTION, _recording(original, calls))
        return [train_once(spec, model_dir, calls, evaluate=i == 0) for i, spec in enumerate(RUNS)]
    finally:
        setattr(ops, kernel.FUNCTION, original)
        shutil.rmtree(model_dir, ignore_errors=True)


def run(device: str, torch_compile: bool) -> dict[str, Any]:
    """Both ``RUNS`` through the CPU backend (``probes.training_run.probe_run``)."""
    return probe_run(ROUTE, device, torch_compile, ("unsloth", "unsloth_zoo", "torch", "transformers", "trl"), _runs)
