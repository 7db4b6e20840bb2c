"""The end-to-end training probe (DESIGN.md section 5b): does a real run log NaN?

Kernel tests answer "is the divisor guarded"; this probe answers the user's
question. In the process that already imported unsloth it builds a tiny
random-init causal LM offline (a Llama config and a character-level tokenizer
made in code, no hub), a small in-memory dataset in which some examples are
fully masked (labels all ``-100``: a sample truncated before its assistant
turn), and trains it for a few steps with a real TRL ``SFTTrainer`` (the
transformers ``Trainer`` where TRL is absent), batch 1, NaN log filter off, as
unsloth's SFT config sets it. Two runs: GA 1, and GA 2 with one optimizer step
whose micro-batches are all masked (zoo's trainer patch then hands the loss a
count of 0).

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

``FastLanguageModel`` cannot load a model on CPU (under ``UNSLOTH_ALLOW_CPU=1``
unsloth keeps its GPU code path), so on CPU the probe drives the loss itself
and says so in ``fast_language_model``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import shutil
import tempfile
import time
import traceback
from collections import Counter
from importlib import metadata
from typing import Any

import torch

from . import kernel

ROUTE = "zoo public entry unsloth_fused_ce_loss (bound by value)"
SEED = 0
# Tiny on purpose: the phase runs in every cell, after a ~20 s import.
HIDDEN, LAYERS, HEADS, VOCAB = 32, 1, 2, 64
SPECIALS = ("<pad>", "<eos>", "<unk>")
ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
PROMPT_TOKENS = 4  # the prompt part of a trainable example stays masked (completion-only loss)
TEXTS = (
    "the cat sat on the mat.",
    "a dog ran in the park.",
    "birds sing at dawn, loud.",
    "rain fell on the roof.",
    "the sun rose over hills.",
    "fish swim in cold water.",
    "we read a book by night.",
    "snow covers the old road.",
)
MAX_CHARS = 16


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run: its name, GA, and which examples (in training order) are fully masked."""

    name: str
    gradient_accumulation_steps: int
    max_steps: int
    masked: frozenset[int]


# GA 1: every 4th example masked, so steps 4 and 8 have no trainable label.
# GA 2: step 2 (examples 2, 3) is all masked -> the count over the step is 0;
# step 3 (examples 4, 5) is half masked -> a positive count, the masked
# micro-batch contributes 0 / count, which is finite on every zoo.
RUNS = (
    RunSpec("ga1", 1, 8, frozenset({3, 7})),
    RunSpec("ga2-all-masked-step", 2, 4, frozenset({2, 3, 5})),
)
SEVERITY = {"clean": 0, "nan-logged": 1, "nan-weights": 2}


class NotApplicable(Exception):
    """The probe cannot run in this stack; the message says why."""


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _num(value: Any) -> Any:
    """A float for JSON, non-finite values as strings ("nan", "inf", "-inf")."""
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        value = value.detach().float().cpu().item()
    value = float(value)
    return value if math.isfinite(value) else str(value)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def n_items_repr(value: Any) -> str:
    """``num_items_in_batch`` as it reached the loss: "None", "5", "tensor(5)", "tensor([5, 5])"."""
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        items = value.detach().cpu().flatten().tolist()
        items = [int(v) if float(v).is_integer() else v for v in items]
        inner = str(items[0]) if value.dim() == 0 else str(items)
        return f"tensor({inner})"
    return repr(value)


# ---------------------------------------------------------------- model and data


def make_tokenizer() -> Any:
    """A character-level fast tokenizer built in code (no files, no hub)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate((*SPECIALS, *ALPHABET))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>")


def make_dataset(tokenizer: Any, spec: RunSpec) -> list[dict[str, list[int]]]:
    """``max_steps * GA`` examples in training order; those in ``spec.masked`` have no trainable label."""
    rows = []
    for i in range(spec.max_steps * spec.gradient_accumulation_steps):
        ids = tokenizer(TEXTS[i % len(TEXTS)][:MAX_CHARS])["input_ids"] + [tokenizer.eos_token_id]
        if i in spec.masked:
            labels = [kernel.IGNORE] * len(ids)
        else:
            labels = [kernel.IGNORE] * PROMPT_TOKENS + ids[PROMPT_TOKENS:]
        rows.append({"input_ids": ids, "labels": labels})
    return rows


def collate(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Batch 1 needs no padding; refuse anything else rather than pad wrongly.

    The attention mask is made here, as TRL's own collator does: TRL drops
    dataset columns other than its own before the collator sees them.
    """
    if len(features) != 1:
        raise ValueError(f"the training probe runs at batch 1, got {len(features)} examples")
    input_ids = torch.tensor([features[0]["input_ids"]], dtype=torch.long)
    labels = torch.tensor([features[0]["labels"]], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}


def make_model(loss_fn: Any, torch_compile: bool, target_gb: float | None, calls: list[dict[str, Any]]) -> Any:
    """A random-init one-layer Llama whose loss is zoo's public entry, bound by value.

    The class name ends in ``ForCausalLM`` and ``forward`` takes ``**kwargs``:
    that is what zoo's batch sampler and the trainer inspect to decide that
    the model accepts ``num_items_in_batch``.
    """
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class SkewProbeLlamaForCausalLM(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):  # type: ignore[override]
            # Mirrors unsloth's generated forwards: the count comes from the
            # trainer as ``num_items_in_batch`` (or ``n_items``).
            n_items = kwargs.get("num_items_in_batch", None)
            if n_items is None:
                n_items = kwargs.get("n_items", None)
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            with torch.no_grad():  # TRL's SFTTrainer reads logits for its token metrics
                logits = self.lm_head(hidden).float()
            loss = None
            if labels is not None:
                loss = loss_fn(
                    trainer=None,
                    hidden_states=hidden,
                    lm_head_weight=self.lm_head.weight,
                    lm_head_bias=getattr(self.lm_head, "bias", None),
                    labels=labels,
                    mask=None,
                    n_items=n_items,
                    scaling=None,
                    target_gb=target_gb,
                    torch_compile=torch_compile,
                )
                if self.training:
                    calls.append({
                        "labels_left": int((labels[..., 1:] != kernel.IGNORE).sum()),
                        "n_items": n_items_repr(n_items),
                        "raw_loss": _num(loss),
                        "kernel": type(loss.grad_fn).__name__ if loss.grad_fn is not None else "None",
                    })
            return CausalLMOutputWithPast(loss=loss, logits=logits)

    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                         num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                         max_position_embeddings=64, tie_word_embeddings=False, pad_token_id=0,
                         eos_token_id=1, bos_token_id=1)
    return SkewProbeLlamaForCausalLM(config).float()


# ---------------------------------------------------------------- trainer


def _trainer_classes() -> tuple[type, type, str]:
    """(trainer class, config class, name) -- TRL's SFTTrainer, else the transformers Trainer."""
    try:
        import trl

        return trl.SFTTrainer, trl.SFTConfig, f"trl.SFTTrainer {trl.__version__}"
    except Exception as trl_exc:  # TRL absent or unimportable in this stack: fall back
        try:
            import transformers
            from transformers import Trainer, TrainingArguments
        except Exception as exc:
            raise NotApplicable(f"neither trl ({trl_exc}) nor transformers ({exc}) is usable") from exc
        return Trainer, TrainingArguments, f"transformers.Trainer {transformers.__version__} (trl: {trl_exc})"


def _config(config_cls: type, output_dir: str, spec: RunSpec, device: str) -> Any:
    fields = {f.name for f in dataclasses.fields(config_cls)}
    wanted: dict[str, Any] = dict(
        output_dir=output_dir, per_device_train_batch_size=1,
        gradient_accumulation_steps=spec.gradient_accumulation_steps, max_steps=spec.max_steps,
        learning_rate=1e-3, logging_steps=1, logging_nan_inf_filter=False, report_to=[],
        save_strategy="no", bf16=False, fp16=False, seed=SEED, data_seed=SEED, dataloader_num_workers=0,
        disable_tqdm=True, gradient_checkpointing=False, max_grad_norm=1.0,
        # Sequential order puts the masked examples on known steps.
        train_sampling_strategy="sequential",
        # TRL: the dataset is already tokenised with its labels; no packing.
        dataset_kwargs={"skip_prepare_dataset": True}, packing=False, padding_free=False,
    )
    if device == "cpu":
        wanted["use_cpu"] = True
    required = ("logging_nan_inf_filter", "gradient_accumulation_steps", "logging_steps")
    missing = [k for k in required if k not in fields]
    if missing:
        raise NotApplicable(f"{config_cls.__name__} has no {', '.join(missing)}")
    return config_cls(**{k: v for k, v in wanted.items() if k in fields})


def _patch_trainer_like_unsloth(trainer_cls: type) -> str:
    """Apply the trainer patch that ``FastLanguageModel.from_pretrained`` applies; say what is bound.

    ``import unsloth`` alone leaves ``Trainer.get_batch_samples`` stock; every
    model load through unsloth then installs zoo's ``_unsloth_get_batch_samples``
    (via ``patch_gradient_accumulation_fix``). The CPU route loads no model
    through unsloth, so it applies that patch itself, the same way.
    """
    from transformers import Trainer

    try:
        from unsloth.models._utils import patch_gradient_accumulation_fix
    except ImportError as exc:
        note = f"unsloth has no patch_gradient_accumulation_fix ({exc})"
    else:
        patch_gradient_accumulation_fix(Trainer)
        note = "applied unsloth's patch_gradient_accumulation_fix(Trainer), as FastLanguageModel.from_pretrained does"
    bound = getattr(trainer_cls, "get_batch_samples", None)
    name = getattr(bound, "__name__", None)
    return f"get_batch_samples={name} ({getattr(bound, '__module__', None)}); {note}"


def _one_or_all(values: list[str]) -> str | list[str] | None:
    """The count a step's micro-batches received: one value (zoo counts per step), else each."""
    if not values:
        return None
    return values[0] if len(set(values)) == 1 else values


def _nonfinite_params(model: Any) -> int:
    return sum(int((~torch.isfinite(p.detach())).sum()) for p in model.parameters())


def train_once(spec: RunSpec, device: str, torch_compile: bool, loss_fn: Any, target_gb: float | None,
               trainer_cls: type, config_cls: type) -> dict[str, Any]:
    """One training run; the per-step record and its outcome."""
    from transformers import TrainerCallback

    calls: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    tokenizer = make_tokenizer()
    model = make_model(loss_fn, torch_compile, target_gb, calls)

    class StepRecorder(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            mine = list(calls)
            calls.clear()
            steps.append({
                "step": int(state.global_step),
                "labels_left": sum(c["labels_left"] for c in mine),
                "num_items_in_batch": _one_or_all([c["n_items"] for c in mine]),
                "micro_batches": [{"labels_left": c["labels_left"], "n_items": c["n_items"]} for c in mine],
                "raw_loss": [c["raw_loss"] for c in mine],
                "nonfinite_params": _nonfinite_params(model) if model is not None else None,
                "kernels": dict(Counter(c["kernel"] for c in mine)),
            })

    output_dir = tempfile.mkdtemp(prefix="skewmatrix-train-")
    try:
        args = _config(config_cls, output_dir, spec, device)
        params = inspect.signature(trainer_cls.__init__).parameters
        kwargs: dict[str, Any] = dict(model=model.to(device), args=args, train_dataset=make_dataset(tokenizer, spec),
                                      data_collator=collate, callbacks=[StepRecorder()])
        kwargs["processing_class" if "processing_class" in params else "tokenizer"] = tokenizer
        trainer = trainer_cls(**kwargs)
        sampler = getattr(type(trainer), "get_batch_samples", None)
        trainer.train()
        logs = trainer.state.log_history
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)

    logged = {int(e["step"]): e for e in logs if "loss" in e and "step" in e}
    for s in steps:
        entry = logged.get(s["step"], {})
        s["logged_loss"] = _num(entry.get("loss"))
        s["grad_norm"] = _num(entry.get("grad_norm"))
    run = {
        "name": spec.name,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
        "batch_sampler": getattr(sampler, "__name__", None),
        "model_accepts_loss_kwargs": getattr(trainer, "model_accepts_loss_kwargs", None),
        "masked_steps": [s["step"] for s in steps if s["labels_left"] == 0],
        "steps": steps,
    }
    run.update(_outcome(steps))
    return run


def _outcome(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Outcome of one run from its steps: the worst symptom, where it starts, whether it lasts."""
    bad_weights = [s["step"] for s in steps if s["nonfinite_params"]]
    bad_logged = [s["step"] for s in steps if not _finite(s["logged_loss"])]
    if bad_weights:
        outcome, first = "nan-weights", bad_weights[0]
        symptom = f"non-finite weights from step {first}"
    elif bad_logged:
        outcome, first = "nan-logged", bad_logged[0]
        symptom = f"logged loss NaN from step {first}"
    else:
        return {"outcome": "clean", "first_nan_step": None, "nan_until_end": False,
                "symptom": "logged loss finite at every step" + _masked_note(steps)}
    later = [s for s in steps if s["step"] >= first]
    until_end = all((s["nonfinite_params"] if outcome == "nan-weights" else not _finite(s["logged_loss"]))
                    for s in later)
    symptom += " to the end" if until_end else f" (finite again by step {steps[-1]['step']})"
    at = next(s for s in steps if s["step"] == first)
    symptom += f" (num_items_in_batch={at['num_items_in_batch']} reached the loss"
    symptom += f", {at['labels_left']} labels left)" if at["labels_left"] else ", no label left)"
    return {"outcome": outcome, "first_nan_step": first, "nan_until_end": until_end, "symptom": symptom}


def _masked_note(steps: list[dict[str, Any]]) -> str:
    masked = [s for s in steps if s["labels_left"] == 0]
    if not masked:
        return " (no fully masked step occurred)"
    shown = ", ".join(f"step {s['step']} logged {s['logged_loss']} with num_items_in_batch="
                      f"{s['num_items_in_batch']}" for s in masked)
    return f"; fully masked: {shown}"


# ---------------------------------------------------------------- entry point


def run(device: str, torch_compile: bool) -> dict[str, Any]:
    """Train the tiny model through each of ``RUNS``; JSON-serialisable, NaN as strings."""
    start = time.perf_counter()
    result: dict[str, Any] = {"ok": True, "route": ROUTE, "device": device, "torch_compile": torch_compile,
                              "versions": {n: _version(n) for n in ("unsloth", "unsloth_zoo", "torch",
                                                                     "transformers", "trl")}}
    result["fast_language_model"] = {
        "route": "n/a",
        "reason": (f"device {device}: FastLanguageModel needs a GPU to load a model "
                   "(UNSLOTH_ALLOW_CPU=1 keeps unsloth's GPU path); the probe drives zoo's public entry itself"),
    }
    try:
        try:
            # By value, after ``import unsloth``: the way unsloth's generated forwards bind it.
            from unsloth_zoo.loss_utils import unsloth_fused_ce_loss
        except ImportError as exc:
            raise NotApplicable(f"zoo has no unsloth_zoo.loss_utils.unsloth_fused_ce_loss ({exc})") from exc
        trainer_cls, config_cls, trainer_name = _trainer_classes()
        result["trainer"] = trainer_name
        result["trainer_patch"] = _patch_trainer_like_unsloth(trainer_cls)
        # CPU needs target_gb (zoo otherwise asks CUDA for free memory); on a
        # GPU the generated forwards pass None, and so does the probe.
        target_gb = kernel.TARGET_GB if device == "cpu" else None
        result["target_gb"] = target_gb
        runs = [train_once(spec, device, torch_compile, unsloth_fused_ce_loss, target_gb, trainer_cls, config_cls)
                for spec in RUNS]
    except NotApplicable as exc:
        result.update(outcome="n/a", reason=f"n/a: {exc}", first_nan_step=None, nan_until_end=False, runs=[],
                      n_items_seen=[])
    except Exception as exc:  # the probe itself broke: not a finding, say so with the traceback
        result.update(ok=False, outcome="n/a", reason=f"training probe crashed: {type(exc).__name__}: {exc}",
                      error=traceback.format_exc(limit=12), first_nan_step=None, nan_until_end=False, runs=[],
                      n_items_seen=[])
    else:
        worst = max(runs, key=lambda r: SEVERITY[r["outcome"]])
        result.update(
            outcome=worst["outcome"],
            first_nan_step=worst["first_nan_step"],
            nan_until_end=worst["nan_until_end"],
            reason="; ".join(f"{r['name']}: {r['symptom']}" for r in runs),
            n_items_seen=sorted({m["n_items"] for r in runs for s in r["steps"] for m in s["micro_batches"]}),
            runs=runs,
        )
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
