"""What every check's training run shares: tiny data made in code, and how a run's steps become an outcome.

A check with a training route (``Step(..., training=True)``) builds its own
model and drives its own trainer, on its own route into its kernel; this
module holds the parts that are the same whatever the route: a
character-level tokenizer and a small in-memory dataset whose chosen
examples have no trainable label, a batch-1 collator, a sampler that keeps
the examples in order, JSON-safe numbers, and the judgement of a run from
its per-step records (``clean``, ``nan-logged``, ``nan-weights``,
``crash``) with the user-visible symptom in words, and the evaluation run
after training (``trainer.evaluate()`` on an eval set with one fully masked
batch): per eval batch the count that reached the model, the loss the
trainer got, the check's kernel calls, and who produced a NaN ``eval_loss``
(the check's kernel, or something else on the stack). Knows no check: the
name of the count a trainer hands the loss is the caller's (``count=``), and
so is the kernel's recording.

Importing this module imports nothing heavy: torch, tokenizers,
transformers and datasets are imported by the functions that need them, in
a probe process that already imported the packages under test.
"""

from __future__ import annotations

import dataclasses
import math
import traceback
from importlib import metadata
from typing import Any

SEED = 0
IGNORE = -100
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
    """One training run: its name, GA, optimizer steps, and which examples of the shared data (in training
    order) are fully masked (none where the check's route brings its own data)."""

    name: str
    gradient_accumulation_steps: int
    max_steps: int
    masked: frozenset[int] = frozenset()


# GA 1: every 4th example masked, so steps 4 and 8 have no trainable label.
# GA 2: step 2 (examples 2, 3) is all masked -> the count over the step is 0;
# step 3 (examples 4, 5) is half masked -> a positive count, the masked
# micro-batch contributes 0 / count, which is finite on every zoo.
RUNS = (
    RunSpec("ga1", 1, 8, frozenset({3, 7})),
    RunSpec("ga2-all-masked-step", 2, 4, frozenset({2, 3, 5})),
)


# The evaluation set: batch 1, so the fully masked example is a fully masked eval batch between two
# trainable ones (a NaN on it turns the trainer's mean ``eval_loss`` NaN; a 0.0 keeps it finite).
EVAL_EXAMPLES = 3
EVAL_MASKED = frozenset({1})


class NotApplicable(Exception):
    """A training route this stack cannot run; the message says why (an ``n/a`` outcome, not an error)."""


# How bad a run's outcome is, for picking the worst of several runs.
SEVERITY = {"clean": 0, "nan-logged": 1, "nan-weights": 2, "crash": 3}


def version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def json_number(value: Any) -> Any:
    """A float for JSON, non-finite values as strings ("nan", "inf", "-inf"); None stays None."""
    if value is None:
        return None
    if hasattr(value, "detach"):  # a tensor
        value = value.detach().float().cpu().item()
    value = float(value)
    return value if math.isfinite(value) else str(value)


def nonfinite(value: Any) -> bool:
    """A recorded number that is NaN or infinite (``json_number`` writes those as strings); None is "not logged"."""
    return isinstance(value, str) or (isinstance(value, float) and not math.isfinite(value))


def count_repr(value: Any) -> str:
    """A count as it reached a loss: "None", "0.0", "5", "tensor(5)", "tensor([5, 5])"."""
    if value is None:
        return "None"
    if hasattr(value, "detach"):  # a tensor
        items = value.detach().cpu().flatten().tolist()
        items = [int(v) if float(v).is_integer() else v for v in items]
        inner = str(items[0]) if value.dim() == 0 else str(items)
        return f"tensor({inner})"
    return repr(value)


def nonfinite_params(model: Any) -> int:
    import torch

    return sum(int((~torch.isfinite(p.detach())).sum()) for p in model.parameters())


def char_tokenizer(model_max_length: int | None = None) -> Any:
    """A character-level fast tokenizer built in code (no files, no hub)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate((*SPECIALS, *ALPHABET))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    extra = {"model_max_length": model_max_length} if model_max_length else {}
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", **extra)


def masked_dataset(tokenizer: Any, n_examples: int, masked: frozenset[int], ignore: int = IGNORE) -> Any:
    """``n_examples`` pre-tokenised examples in training order; those whose index is in ``masked`` have every
    label ``ignore`` (a sample truncated before its answer: nothing left to learn).

    An in-memory ``datasets.Dataset`` (recent TRL accepts nothing else), a
    plain list where ``datasets`` is not installed.
    """
    rows = []
    for i in range(n_examples):
        ids = tokenizer(TEXTS[i % len(TEXTS)][:MAX_CHARS])["input_ids"] + [tokenizer.eos_token_id]
        prompt = len(ids) if i in masked else PROMPT_TOKENS
        rows.append({"input_ids": ids, "labels": [ignore] * prompt + ids[prompt:]})
    try:
        from datasets import Dataset
    except ImportError:
        return rows
    return Dataset.from_list(rows)


def collate(features: list[dict[str, Any]]) -> dict[str, Any]:
    """Batch 1 needs no padding; refuse anything else rather than pad wrongly.

    The attention mask is made here, as TRL's own collator does.
    """
    import torch

    if len(features) != 1:
        raise ValueError(f"the training probe runs at batch 1, got {len(features)} examples")
    input_ids = torch.tensor([features[0]["input_ids"]], dtype=torch.long)
    labels = torch.tensor([features[0]["labels"]], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}


def in_order(trainer_cls: type, args: Any) -> tuple[type, str]:
    """(``trainer_cls``, or a subclass that feeds the examples in order, and how the order was kept).

    transformers < 5 has no ``train_sampling_strategy`` and shuffles; only the
    order changes (the masked examples land on known steps), not the loss route.
    """
    if getattr(args, "train_sampling_strategy", None) == "sequential":
        return trainer_cls, "sequential (train_sampling_strategy)"
    import torch

    class InOrder(trainer_cls):  # type: ignore[misc, valid-type]
        def _get_train_sampler(self, *a: Any, **kw: Any) -> Any:
            return torch.utils.data.SequentialSampler(a[0] if a and a[0] is not None else self.train_dataset)

    return InOrder, "sequential (the probe's subclass overrides _get_train_sampler)"


# ---------------------------------------------------------------- a run's outcome


def train_logged(trainer: Any, steps: list[dict[str, Any]]) -> BaseException | None:
    """``trainer.train()``; then each recorded step gets its logged loss and grad norm from the trainer's log
    history. Returns what ``train()`` raised (a user's run crashes there too: a finding, not a probe error)."""
    crashed = None
    try:
        trainer.train()
    except Exception as exc:
        crashed = exc
    logged = {int(e["step"]): e for e in trainer.state.log_history if "loss" in e and "step" in e}
    for s in steps:
        entry = logged.get(s["step"], {})
        s["logged_loss"] = json_number(entry.get("loss"))
        s["grad_norm"] = json_number(entry.get("grad_norm"))
    return crashed


def crash_record(exc: BaseException, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A run whose ``trainer.train()`` raised: a user's run dies here. The exception and its traceback's tail."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return {"outcome": "crash", "first_nan_step": None, "nan_until_end": False,
            "symptom": f"trainer.train() raised {type(exc).__name__}: {first} after {len(steps)} step(s)",
            "traceback": traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:]}


def run_outcome(steps: list[dict[str, Any]], count: str, where: str = "the loss") -> dict[str, Any]:
    """Outcome of one run from its steps: the worst symptom, where it starts, whether it lasts.

    Each step has ``step``, ``labels_left``, ``logged_loss``, ``nonfinite_params`` and the count the
    trainer handed ``where``, recorded under the key ``count`` (the caller's name for it, e.g. the trainer's
    keyword; the symptom says it under that name).
    """
    bad_weights = [s["step"] for s in steps if s["nonfinite_params"]]
    bad_logged = [s["step"] for s in steps if nonfinite(s["logged_loss"])]
    if bad_weights:
        outcome, first = "nan-weights", bad_weights[0]
        symptom = f"non-finite weights from step {first}"
    elif bad_logged:
        outcome, first = "nan-logged", bad_logged[0]
        symptom = f"logged loss NaN from step {first}"
    else:
        return {"outcome": "clean", "first_nan_step": None, "nan_until_end": False,
                "symptom": "logged loss finite at every step" + _masked_note(steps, count)}
    bad = set(bad_weights if outcome == "nan-weights" else bad_logged)
    recovered = [s["step"] for s in steps if s["step"] > first and s["step"] not in bad]
    until_end = not recovered
    symptom += " to the end" if until_end else f", finite again at step {recovered[0]}"
    at = next(s for s in steps if s["step"] == first)
    symptom += f" ({count}={at[count]} reached {where}"
    symptom += f", {at['labels_left']} labels left)" if at["labels_left"] else ", no label left)"
    return {"outcome": outcome, "first_nan_step": first, "nan_until_end": until_end, "symptom": symptom}


def _masked_note(steps: list[dict[str, Any]], count: str) -> str:
    masked = [s for s in steps if s["labels_left"] == 0]
    if not masked:
        return " (no fully masked step occurred)"
    shown = ", ".join(f"step {s['step']} logged {s['logged_loss']} with {count}={s[count]}"
                      for s in masked)
    return f"; fully masked: {shown}"


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts that reached the kernel: all of them, those on micro-batches with no label left, the calls."""
    micro = [m for r in runs for s in r["steps"] for m in s["micro_batches"]]
    return {"n_items_seen": sorted({m["n_items"] for m in micro}), "kernel_calls": len(micro),
            "masked_inputs": sorted({m["n_items"] for m in micro if m["labels_left"] == 0})}


# ---------------------------------------------------------------- the evaluation run


def evaluate_logged(trainer: Any, calls: list[dict[str, Any]], eval_dataset: Any, kernel_name: str,
                    count: str) -> dict[str, Any]:
    """See :func:`_evaluate`; a probe that cannot set the evaluation up is an ``error`` record, never a lost run."""
    try:
        return _evaluate(trainer, calls, eval_dataset, kernel_name, count)
    except Exception as exc:  # the probe's own failure around evaluate(), not a finding
        return {"outcome": "error", "source": None, "eval_loss": None,
                "symptom": f"the evaluation probe failed: {type(exc).__name__}: {exc}",
                "traceback": traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:]}


def _evaluate(trainer: Any, calls: list[dict[str, Any]], eval_dataset: Any, kernel_name: str,
              count: str) -> dict[str, Any]:
    """``trainer.evaluate(eval_dataset)`` after training, recorded per eval batch; its outcome and who caused it.

    ``calls`` is the list the check's recording appends each kernel call to (``labels_left``, ``n_items``,
    ``raw_loss``); ``kernel_name`` the kernel function's name, looked for in the traceback when evaluation
    raises; ``count`` the keyword under which the trainer hands the model its count. Nothing on the route
    changes: a forward pre-hook on the model reads the count it was handed,
    and the trainer's ``prediction_step`` is wrapped on the instance by a pass-through that keeps the loss
    it returns (what the trainer averages into ``eval_loss``).
    """
    model = trainer.model
    batches: list[dict[str, Any]] = []
    forwards: list[dict[str, Any]] = []

    def seen(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        if kwargs.get("labels") is not None and not forwards:
            forwards.append({"count": count_repr(kwargs.get(count))})

    def answered(module: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        if forwards and "model_loss" not in forwards[0]:
            forwards[0]["model_loss"] = json_number(getattr(out, "loss", None))

    step = trainer.prediction_step

    def recorded(inner_model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        forwards.clear()
        start = len(calls)
        labels = inputs.get("labels")
        out = step(inner_model, inputs, *args, **kwargs)
        mine = calls[start:]
        first = forwards[0] if forwards else {}
        batches.append({
            "batch": len(batches) + 1,
            "labels_left": None if labels is None else int((labels[..., 1:] != IGNORE).sum()),
            "count": first.get("count"), "model_loss": first.get("model_loss"),
            "loss": json_number(out[0] if isinstance(out, tuple) else out),
            "kernel_calls": [{"n_items": c["n_items"], "raw_loss": c["raw_loss"]} for c in mine],
        })
        return out

    loss_function = getattr(model, "loss_function", None)  # the model's own loss (transformers >= 4.46)
    named = f"{getattr(loss_function, '__module__', '?')}.{getattr(loss_function, '__qualname__', '?')}"
    record: dict[str, Any] = {"examples": EVAL_EXAMPLES, "masked": sorted(EVAL_MASKED),
                              "model_loss_function": named if callable(loss_function) else None}
    hooks = [model.register_forward_pre_hook(seen, with_kwargs=True),
             model.register_forward_hook(answered, with_kwargs=True)]
    trainer.prediction_step = recorded
    calls.clear()
    try:
        metrics = trainer.evaluate(eval_dataset=eval_dataset)
    except Exception as exc:
        metrics = None
        record.update(eval_crash(exc, kernel_name))
    finally:
        for h in hooks:
            h.remove()
        del trainer.prediction_step
        calls.clear()
    record["batches"] = batches
    record["kernel_calls"] = sum(len(b["kernel_calls"]) for b in batches)
    record["masked_inputs"] = sorted({str(b["count"]) for b in batches if b["labels_left"] == 0})
    if metrics is not None:
        record["eval_loss"] = json_number(metrics.get("eval_loss"))
        record.update(eval_outcome(record))
    return record


def eval_crash(exc: BaseException, kernel_name: str) -> dict[str, Any]:
    """``evaluate()`` raised: a user's evaluation dies there. The kernel's when its frame is in the traceback."""
    frames = {frame.f_code.co_name for frame, _ in traceback.walk_tb(exc.__traceback__)}
    first = str(exc).splitlines()[0] if str(exc) else ""
    source = "kernel" if kernel_name in frames else "stack"
    where = "inside the check's kernel" if source == "kernel" else "outside the check's kernel (a stack hazard)"
    return {"outcome": "crash", "source": source, "eval_loss": None,
            "symptom": f"trainer.evaluate() raised {type(exc).__name__}: {first} {where}",
            "traceback": traceback.format_exception(type(exc), exc, exc.__traceback__)[-12:]}


def eval_outcome(record: dict[str, Any]) -> dict[str, Any]:
    """``clean`` or ``nan-logged`` from an evaluation record, and who produced a NaN ``eval_loss``.

    ``kernel``: the check's kernel answered a non-finite loss on some eval batch. ``stack``: it did not (it
    was not called, or answered finite): the model's own loss, the trainer's loss, or the trainer's
    averaging made the NaN -- a hazard of the stack, named as such, not of the kernel.
    """
    batches = record["batches"]
    masked = [b for b in batches if b["labels_left"] == 0]
    shown = "; ".join(f"batch {b['batch']} (no label left, count {b['count']} reached the model) gave loss "
                      f"{b['loss']}" for b in masked) or "no fully masked eval batch"
    if not nonfinite(record.get("eval_loss")):
        return {"outcome": "clean", "source": None,
                "symptom": f"eval_loss {record.get('eval_loss')} finite; {shown}"}
    kernel_bad = [b for b in batches if any(nonfinite(c["raw_loss"]) for c in b["kernel_calls"])]
    if kernel_bad:
        b = kernel_bad[0]
        n_items = next(c["n_items"] for c in b["kernel_calls"] if nonfinite(c["raw_loss"]))
        left = f"{b['labels_left']} labels left" if b["labels_left"] else "no label left"
        return {"outcome": "nan-logged", "source": "kernel",
                "symptom": f"eval_loss NaN: the check's kernel answered NaN on eval batch {b['batch']} "
                           f"(count {n_items} reached the kernel, {left})"}
    bad = [b for b in batches if nonfinite(b["loss"])]
    calls = sum(len(b["kernel_calls"]) for b in batches)
    kernel = ("the check's kernel was not called during evaluation" if not calls
              else "the check's kernel answered finite on every eval batch")
    if not bad:
        where = "the trainer's averaging of finite eval losses"
    elif nonfinite(bad[0]["model_loss"]):
        where = f"the model's own loss ({record.get('model_loss_function')})"
    else:
        where = "the trainer's loss computation (compute_loss)"
    at = ""
    if bad:
        left = f"{bad[0]['labels_left']} labels left" if bad[0]["labels_left"] else "no label left"
        at = f" on eval batch {bad[0]['batch']} (count {bad[0]['count']} reached the model, {left})"
    return {"outcome": "nan-logged", "source": "stack",
            "symptom": f"eval_loss NaN from {where}{at}; {kernel}: a stack hazard, not this check's kernel"}
