"""A real GRPO run on CPU: does the trainer of this stack send zoo's loss a count of 0, and does the run show it?

Runs in the raw process (never imports unsloth; zoo imports with
``UNSLOTH_IS_PRESENT=1 UNSLOTH_ALLOW_CPU=1``). A random-init one-layer Llama
and a character-level tokenizer made in code (``train_model.py``), TRL's
``GRPOTrainer`` with a reward function of our own, ``loss_type='dapo'``,
``mask_truncated_completions=True`` (what unsloth turns on for dapo),
``beta=0`` (TRL's default), and ``max_completion_length=2`` with the end and
pad tokens suppressed in generation, so that every completion is truncated
and the trainer masks them all. The loss is zoo's own ``grpo_compute_loss``
(the trainer's ``_compute_loss`` is replaced by a call to it with the
trainer's log-probabilities, mask, advantages and ``num_items_in_batch``):
the route without unsloth (this process never imports it); the steps
through unsloth's own trainer are ``unsloth_train.py``. Per step: the tokens left in the mask, the count the trainer
sent, zoo's loss, the logged loss and the non-finite parameters.

``latent`` evidence: the trainer sent a positive count at every batch with no
token left (TRL < 1.9 counts before the truncation mask); ``exposed``: the
logged loss or the weights went non-finite (TRL >= 1.9 sends 0).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from typing import Any

from probes.training import NotApplicable, count_repr, crash_record, json_number, run_outcome
from probes.training_run import base_args, probe_run, quiet, run_record, step_recorder, train_recorded, trainer_args

from .train_model import COMPLETION, PROMPTS, make_model

ROUTE = ("TRL GRPOTrainer (dapo, mask_truncated_completions, every completion truncated) -> "
         "unsloth_zoo.rl_replacements.grpo_compute_loss as the loss")
STEPS = 3
COUNT = "num_items_in_batch"  # what GRPO's trainer hands the loss, as the records name it


class RouteUnavailable(NotApplicable):
    """The cell's stack has no GRPO route to zoo's loss: TRL's GRPOTrainer does not import, or its config has
    no dapo / truncation-mask options. Reach then rests on the TRL version (``verdict._reach``)."""


def _reward(completions: list[Any], **_: Any) -> list[float]:
    """Our own reward: how many 'a' a completion has (varies, so the advantages are not all zero)."""
    return [float(str(c).count("a")) + 0.1 * i for i, c in enumerate(completions)]


def _config(config_cls: type, output_dir: str, eos: int, pad: int) -> Any:
    fields = {f.name for f in dataclasses.fields(config_cls)}
    for need in ("mask_truncated_completions", "loss_type"):
        if need not in fields:
            raise RouteUnavailable(f"{config_cls.__name__} has no {need} (TRL too old for the dapo route)")
    wanted: dict[str, Any] = dict(
        output_dir=output_dir, per_device_train_batch_size=2, num_generations=2, gradient_accumulation_steps=1,
        max_steps=STEPS, **base_args(), use_cpu=True, max_completion_length=COMPLETION, max_prompt_length=16,
        mask_truncated_completions=True, loss_type="dapo", beta=0.0, temperature=1.0,
        generation_kwargs={"suppress_tokens": [eos, pad]}, bf16=False, fp16=False, log_completions=False,
    )
    return trainer_args(config_cls, wanted, required=())


def grpo_trainer(cls: type, config: Any, model: Any, tokenizer: Any, callback: Any) -> Any:
    """A quiet GRPO trainer of class ``cls``: our reward, ``STEPS`` batches of ``PROMPTS``."""
    from datasets import Dataset

    return quiet(cls(model=model, reward_funcs=_reward, args=config, processing_class=tokenizer,
                     train_dataset=Dataset.from_dict({"prompt": list(PROMPTS) * STEPS}), callbacks=[callback]))


def _logps(trainer: Any, model: Any, inputs: dict[str, Any]) -> Any:
    import torch

    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    keep = inputs["completion_ids"].size(1)
    if hasattr(trainer, "_get_per_token_logps_and_entropies"):
        out = trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, keep)
        return out[0] if isinstance(out, tuple) else out
    return trainer._get_per_token_logps(model, input_ids, attention_mask, keep)


def train_once(zoo_loss: Any) -> dict[str, Any]:
    from trl import GRPOConfig, GRPOTrainer

    calls: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []

    class ZooLoss(GRPOTrainer):  # type: ignore[misc, valid-type]
        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            mask = inputs["completion_mask"]
            if "tool_mask" in inputs and inputs["tool_mask"] is not None:
                mask = mask * inputs["tool_mask"]
            new = _logps(self, model, inputs)
            count = inputs.get("num_items_in_batch")
            out = zoo_loss(inputs.get("ref_per_token_logps"), new, inputs.get("old_per_token_logps"), None,
                           inputs["completion_ids"], mask, self.beta, inputs["advantages"], loss_type=self.loss_type,
                           num_items_in_batch=count, num_processes=self.accelerator.num_processes,
                           current_gradient_accumulation_steps=getattr(
                               self, "current_gradient_accumulation_steps", self.args.gradient_accumulation_steps),
                           epsilon_low=self.epsilon_low, epsilon_high=self.epsilon_high,
                           max_completion_length=self.args.max_completion_length)
            calls.append({"labels_left": int(mask.sum()), "n_items": count_repr(count),
                          "raw_loss": json_number(out[0])})
            return out[0]

    model, tokenizer = make_model()
    output_dir = tempfile.mkdtemp(prefix="skewmatrix-grpo-train-")
    try:
        config = _config(GRPOConfig, output_dir, tokenizer.eos_token_id, tokenizer.pad_token_id)
        trainer = grpo_trainer(ZooLoss, config, model, tokenizer, step_recorder(calls, steps, COUNT, kernels=False))
        crashed = train_recorded(trainer, steps, calls)[0]
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    run = run_record("dapo-all-truncated", steps, trainer="trl.GRPOTrainer (zoo's grpo_compute_loss as _compute_loss)")
    run.update(run_outcome(steps, COUNT, "zoo's loss") if crashed is None
               else crash_record(crashed, steps))
    return run


def _runs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The one GRPO run, where this stack has the route."""
    from . import kernel

    try:
        zoo_loss = kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        raise NotApplicable(f"no {kernel.MODULE}.{kernel.FUNCTION} ({exc})") from exc
    try:
        import trl  # noqa: F401
    except Exception as exc:
        raise NotApplicable(f"trl not usable ({type(exc).__name__}: {exc})") from exc
    # TRL 0.24 under transformers >= 5 takes mergekit for installed (transformers' package check answers a
    # truthy tuple there) and imports it with its GRPOTrainer. unsloth's import fixes patch that check; this
    # route runs zoo's loss without unsloth, so on such a stack it has no GRPO run.
    try:
        from trl import GRPOTrainer  # noqa: F401
    except Exception as exc:
        cause = exc
        while cause.__cause__ is not None:
            cause = cause.__cause__
        raise RouteUnavailable(f"this stack cannot import TRL's GRPOTrainer without unsloth "
                               f"({type(cause).__name__}: {str(cause)[:200]})") from exc
    r = train_once(zoo_loss)
    if r["outcome"] == "crash" and not r["steps"]:
        # Our GRPO route never completed a step on this stack (seen: TRL 0.18 hands the loss no count; TRL
        # 0.24 with transformers 4.57 refuses the tiny model's token_type_ids in generate): the run gives no
        # evidence of the 0 / 0, so the route does not exist here rather than a symptom of the hazard.
        raise RouteUnavailable(f"the check's GRPO run crashed before its first step on this stack "
                               f"({r['symptom']})")
    return [r]


def run(device: str, torch_compile: bool) -> dict[str, Any]:
    """One GRPO run (``probes.training_run.probe_run``)."""
    return probe_run(ROUTE, device, torch_compile, ("unsloth_zoo", "torch", "transformers", "trl"), _runs,
                     unavailable=RouteUnavailable)
