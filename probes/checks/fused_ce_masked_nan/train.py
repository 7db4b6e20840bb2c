"""The end-to-end training probe (docs/design.md#the-training-run): does a real run log NaN?

Kernel tests answer "is the divisor guarded"; this probe answers the user's
question. In the process that already imported unsloth it builds a tiny
random-init causal LM offline (a Llama config and a character-level tokenizer
made in code, no hub), a small in-memory dataset in which some examples are
fully masked (labels all ``-100``: a sample truncated before its assistant
turn), and trains it for a few steps with a real TRL ``SFTTrainer``, batch 1,
NaN log filter off, as unsloth's SFT config sets it. The transformers
``Trainer`` stands in where TRL is absent, and where TRL's trainer never calls
the model's loss (TRL 1.x installs its own fused lm head on the model and
computes its own loss; the result says so). Two runs: GA 1, and GA 2 with one
optimizer step whose micro-batches are all masked (zoo's trainer patch then
hands the loss a count of 0).

The model's loss goes through zoo's public entry the way unsloth's generated
forwards call it, bound the same way: ``from unsloth_zoo.loss_utils import
unsloth_fused_ce_loss`` at call time, after ``import unsloth``. A guard that
only rebinds a module attribute therefore looks exactly as protective here as
it is for real runs. Per optimizer step the probe records the labels left
after the shift, ``num_items_in_batch`` as it reached the loss, the raw loss
of each micro-batch, the logged loss and grad norm from the trainer's log
history, non-finite parameters after the step, and the autograd node of each
kernel call. Everything is recorded, nothing is assumed: which batch sampler
the trainer used and whether it computed the count are part of the result.

After the first run's training, the same trainer evaluates a three-example
eval set at batch 1 whose middle batch has no label left
(``trainer.evaluate()``; the model's loss is zoo's entry in evaluation too, as
in unsloth's generated forwards): the result's ``evaluation`` records the
count each eval batch handed the model and the loss, ``eval_loss``, and
whether a NaN there came from zoo's entry or from elsewhere on the stack.

``FastLanguageModel`` cannot load a model on CPU (under ``UNSLOTH_ALLOW_CPU=1``
unsloth keeps its GPU code path), so on CPU the probe drives the loss itself
and says so in ``fast_language_model``. The model, tokenizer and data are
built in ``train_model.py``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Any

from probes.training import RUNS, NotApplicable, RunSpec, char_tokenizer, crash_record, run_outcome
from probes.training_run import probe_run, run_record, sft_config, sft_trainer, step_recorder, train_recorded

from .train_model import make_model

ROUTE = "zoo public entry unsloth_fused_ce_loss (bound by value)"
COUNT = "num_items_in_batch"  # what the trainer hands the loss, as the symptom names it


# ---------------------------------------------------------------- trainer


@dataclasses.dataclass(frozen=True)
class TrainerChoice:
    """A trainer class, its config class, and how the result names it."""

    trainer_cls: type
    config_cls: type
    name: str


def trainer_choices() -> tuple[list[TrainerChoice], list[str]]:
    """TRL's SFTTrainer first, the transformers Trainer after it; notes on what is not usable."""
    choices: list[TrainerChoice] = []
    notes: list[str] = []
    try:
        import trl

        choices.append(TrainerChoice(trl.SFTTrainer, trl.SFTConfig, f"trl.SFTTrainer {trl.__version__}"))
    except Exception as exc:  # TRL absent or unimportable in this stack: the Trainer still runs
        notes.append(f"trl not usable ({type(exc).__name__}: {exc})")
    try:
        import transformers
        from transformers import Trainer, TrainingArguments

        choices.append(TrainerChoice(Trainer, TrainingArguments, f"transformers.Trainer {transformers.__version__}"))
    except Exception as exc:
        notes.append(f"transformers not usable ({type(exc).__name__}: {exc})")
    if not choices:
        raise NotApplicable("; ".join(notes))
    return choices, notes


def _config(config_cls: type, output_dir: str, spec: RunSpec, device: str) -> Any:
    on_cpu = {"use_cpu": True} if device == "cpu" else {}
    return sft_config(config_cls, output_dir, spec, bf16=False, fp16=False, gradient_checkpointing=False,
                      padding_free=False, **on_cpu)


def _patch_trainer_like_unsloth() -> str:
    """Apply the trainer patch that ``FastLanguageModel.from_pretrained`` applies; say what is bound.

    ``import unsloth`` alone leaves ``Trainer.get_batch_samples`` stock (seen
    with unsloth 2026.10.9); every model load through unsloth then installs
    zoo's ``_unsloth_get_batch_samples`` (via ``patch_gradient_accumulation_fix``).
    The CPU route loads no model through unsloth, so it applies that patch
    itself, the same way. Each run records the sampler its trainer really used.
    """
    from transformers import Trainer

    before = getattr(Trainer.get_batch_samples, "__name__", None)
    try:
        from unsloth.models._utils import patch_gradient_accumulation_fix
    except ImportError as exc:
        return f"Trainer.get_batch_samples={before}; unsloth has no patch_gradient_accumulation_fix ({exc})"
    patch_gradient_accumulation_fix(Trainer)
    after = getattr(Trainer.get_batch_samples, "__name__", None)
    return (f"Trainer.get_batch_samples={before} after import unsloth, {after} after "
            "patch_gradient_accumulation_fix(Trainer) (as FastLanguageModel.from_pretrained applies it)")


def train_once(spec: RunSpec, device: str, torch_compile: bool, loss_fn: Any, target_gb: float | None,
               choices: list[TrainerChoice], evaluate: bool = False) -> tuple[dict[str, Any], list[TrainerChoice],
                                                                           list[str]]:
    """One training run: (its record and outcome, the trainer choices still standing, notes on those dropped).

    With ``evaluate``, the trained model is then evaluated (``evaluation`` in the record).

    A trainer that replaces the model's forward on the instance (TRL >= 1.x
    installs its own fused lm head and computes its own loss) never calls the
    model's loss, so it cannot show what zoo's kernel does to a run: the next
    choice is used instead and the reason is kept.
    """
    calls: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    tokenizer = char_tokenizer()
    notes: list[str] = []
    recorder = step_recorder(calls, steps, COUNT)

    output_dir = tempfile.mkdtemp(prefix="skewmatrix-train-")
    try:
        while True:
            choice = choices[0]
            model = make_model(loss_fn, torch_compile, target_gb, calls)
            trainer = sft_trainer(choice.trainer_cls, _config(choice.config_cls, output_dir, spec, device),
                                  model.to(device), tokenizer, spec, recorder)[0]
            if "forward" not in vars(model):
                break
            replaced = getattr(getattr(vars(model)["forward"], "__code__", None), "co_qualname", "?")
            notes.append(f"{choice.name} replaces the model's forward with its own ({replaced}) and computes "
                         "its own loss, so the model's loss never runs; not used")
            choices = choices[1:]
            if not choices:
                raise NotApplicable("; ".join(notes))
        sampler = getattr(type(trainer), "get_batch_samples", None)
        crashed, evaluation = train_recorded(trainer, steps, calls, tokenizer,
                                             (getattr(loss_fn, "__name__", "?"), COUNT) if evaluate else None)
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    run = run_record(spec.name, steps, trainer=choice.name,
                     gradient_accumulation_steps=spec.gradient_accumulation_steps,
                     batch_sampler=getattr(sampler, "__name__", None),
                     model_accepts_loss_kwargs=getattr(trainer, "model_accepts_loss_kwargs", None))
    run.update(run_outcome(steps, COUNT) if crashed is None else crash_record(crashed, steps))
    if evaluation is not None:
        run["evaluation"] = evaluation
    return run, choices, notes


# ---------------------------------------------------------------- entry point


def _no_fast_language_model(device: str) -> str:
    """Why the run does not load its model through ``FastLanguageModel``."""
    if device == "cpu" and os.environ.get("UNSLOTH_ALLOW_CPU") == "1":
        why = "FastLanguageModel needs a GPU to load a model under UNSLOTH_ALLOW_CPU=1 (unsloth keeps its GPU path)"
    else:
        why = f"the FastLanguageModel route on {device} is not implemented in this probe yet"
    return f"{why}; the probe's model calls zoo's public entry itself"


def _runs(result: dict[str, Any], device: str, torch_compile: bool) -> list[dict[str, Any]]:
    """Each of ``RUNS`` through the first trainer that calls the model's loss; the first evaluated too."""
    from . import kernel

    result["fast_language_model"] = {"route": "n/a", "reason": _no_fast_language_model(device)}
    try:
        # By value, after ``import unsloth``: the way unsloth's generated forwards bind it.
        from unsloth_zoo.loss_utils import unsloth_fused_ce_loss
    except ImportError as exc:
        raise NotApplicable(f"zoo has no unsloth_zoo.loss_utils.unsloth_fused_ce_loss ({exc})") from exc
    choices, notes = trainer_choices()
    result["trainer"] = choices[0].name
    result["trainer_patch"] = _patch_trainer_like_unsloth()
    # CPU needs target_gb (zoo otherwise asks CUDA for free memory); on a
    # GPU the generated forwards pass None, and so does the probe.
    target_gb = kernel.TARGET_GB if device == "cpu" else None
    result["target_gb"] = target_gb
    runs = []
    for i, spec in enumerate(RUNS):
        record, choices, dropped = train_once(spec, device, torch_compile, unsloth_fused_ce_loss, target_gb,
                                              choices, evaluate=i == 0)
        notes += dropped
        runs.append(record)
    result["trainer"] = choices[0].name
    result["trainer_notes"] = notes
    return runs


def run(device: str, torch_compile: bool) -> dict[str, Any]:
    """Train the tiny model through each of ``RUNS`` (``probes.training_run.probe_run``)."""
    return probe_run(ROUTE, device, torch_compile, ("unsloth", "unsloth_zoo", "torch", "transformers", "trl"),
                     lambda result: _runs(result, device, torch_compile))
