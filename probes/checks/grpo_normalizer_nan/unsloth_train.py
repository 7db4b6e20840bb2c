"""The reach through unsloth's own route: real GRPO steps through the ``UnslothGRPOTrainer`` unsloth generates.

Runs in a forked child of the unsloth process (``probes.common.in_fork``),
where the cell's TRL counts the completion tokens after
``mask_truncated_completions`` (TRL >= 1.9): below that the trainer sends a
positive count whatever the loss, and ``train.py``'s run is the evidence.
The setup is ``train.py``'s (the tiny Llama and character tokenizer of
``train_model.py``, our reward, ``loss_type='dapo'``,
``mask_truncated_completions=True``, ``beta=0``, ``max_completion_length=2``
with the end and pad tokens suppressed: every completion truncated), but the
trainer is the class unsloth's generator makes (``trainer.generate``) and the
loss is whatever its ``compute_loss`` calls: nothing is replaced.

Two things a user's run has and ours must give the trainer by hand, both
unsloth's own code: the model's ``for_training`` / ``for_inference``, which
``FastLanguageModel.from_pretrained`` binds to every model it loads
(``functools.partial(FastLlamaModel.for_training, model)`` and
``FastBaseModel``'s on the inner models; ``from_pretrained`` itself needs
the hub and, for the zoos here, an accelerator), bound the same way here;
and eager execution: the generated loss functions run under the
``force_eager`` stance (``trainer._eager``), as in the route probe, so the
first step does not spend half a minute compiling arithmetic that is not
judged here. Recorded per step: the completion tokens left, the count the
trainer sent ``compute_loss``, the count its loss function got (after any
hand-off), that function's loss, the logged loss and the non-finite
parameters. The loss functions are observed through pass-through wrappers
(same arguments, same result) in the child only, after the guard probe has
fingerprinted them.
"""

from __future__ import annotations

import functools
import shutil
import sys
import tempfile
import time
import traceback
from typing import Any

from probes.common import in_fork
from probes.training import count_repr, crash_record, json_number, run_outcome, summary, version
from probes.training_run import run_record, step_recorder, train_recorded

ROUTE = ("unsloth's generated UnslothGRPOTrainer (dapo, mask_truncated_completions, every completion truncated) -> "
         "the loss its own compute_loss calls")
OBSERVED = ("grpo_compute_loss_slow", "grpo_accumulated_loss")  # what the generated compute_loss calls
FIRST_COUNTING_AFTER_MASK = (1, 9)
TIMEOUT_S = 300.0


def counts_after_mask(trl: str | None) -> bool | None:
    """Whether a TRL counts GRPO's ``num_items_in_batch`` after ``mask_truncated_completions`` (None: unknown)."""
    try:
        major, minor = (int(p) for p in (trl or "").split(".")[:2])
    except ValueError:
        return None
    return (major, minor) >= FIRST_COUNTING_AFTER_MASK


def _bind_unsloth_model_methods(model: Any) -> None:
    """``for_training`` / ``for_inference`` as unsloth's ``from_pretrained`` binds them (llama.py)."""
    from unsloth.models.llama import FastLlamaModel
    from unsloth.models.vision import FastBaseModel

    model.for_training = functools.partial(FastLlamaModel.for_training, model)
    model.for_inference = functools.partial(FastLlamaModel.for_inference, model)
    m = model
    while hasattr(m, "model"):
        m = m.model
        m.for_training = functools.partial(FastBaseModel.for_training, m)
        m.for_inference = functools.partial(FastBaseModel.for_inference, m)


def _observe(module: Any, calls: list[dict[str, Any]]) -> list[str]:
    """Pass-through wrappers on the module's loss functions: the count each got and the loss it gave."""
    wrapped = []
    for name in OBSERVED:
        fn = vars(module).get(name)
        if not callable(fn):
            continue

        def seen(*args: Any, _fn: Any = fn, _name: str = name, **kwargs: Any) -> Any:
            out = _fn(*args, **kwargs)
            calls.append({"function": _name, "n_items": count_repr(kwargs.get("num_items_in_batch")),
                          "loss": json_number(out[0] if isinstance(out, tuple) else out)})
            return out

        setattr(module, name, seen)
        wrapped.append(name)
    return wrapped


def _train(cls: Any) -> dict[str, Any]:
    from trl import GRPOConfig

    from . import trainer as route
    from .train import COUNT, _config, grpo_trainer
    from .train_model import make_model

    module = sys.modules[cls.__module__]
    sent: list[dict[str, Any]] = []
    handed: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    wrapped = _observe(module, handed)

    class Recorded(cls):  # type: ignore[misc, valid-type]
        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            mask = inputs.get("completion_mask")
            sent.append({"labels_left": None if mask is None else int(mask.sum()),
                         "n_items": count_repr(inputs.get("num_items_in_batch"))})
            return super().compute_loss(model, inputs, *args, **kwargs)

    def loss_calls() -> dict[str, Any]:
        """What the step's loss functions got, in place of the sent counts' (absent) losses."""
        got = list(handed)
        handed.clear()
        return {"loss_calls": got, "raw_loss": [c["loss"] for c in got]}

    model, tokenizer = make_model()
    _bind_unsloth_model_methods(model)
    output_dir = tempfile.mkdtemp(prefix="skewmatrix-grpo-unsloth-")
    try:
        config_cls = getattr(module, "UnslothGRPOConfig", None) or GRPOConfig
        config = _config(config_cls, output_dir, tokenizer.eos_token_id, tokenizer.pad_token_id)
        trainer = grpo_trainer(Recorded, config, model, tokenizer,
                               step_recorder(sent, steps, COUNT, kernels=False, extra=loss_calls))
        with route._eager():
            crashed = train_recorded(trainer, steps, sent)[0]
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    run = run_record("dapo-all-truncated-unsloth", steps, trainer=f"{cls.__module__}.{cls.__name__}",
                     loss_functions_observed=wrapped)
    outcome = run_outcome(steps, COUNT, f"{cls.__name__}.compute_loss")
    if crashed is not None:
        crash = crash_record(crashed, steps)
        if outcome["outcome"] == "clean":
            outcome = crash
        else:  # NaN weights make the next generation's sampling raise: the NaN came first, and is the symptom
            outcome.update(nan_until_end=True, traceback=crash["traceback"],
                           symptom=f"{outcome['symptom']}; then {crash['symptom']}")
    run.update(outcome)
    return run


def _in_child() -> dict[str, Any]:
    import torch

    from . import trainer as route

    torch.set_num_threads(1)
    cls = route.generate()
    if isinstance(cls, str):
        return {"outcome": "n/a", "reason": f"n/a: {cls}"}
    r = _train(cls)
    if r["outcome"] == "crash" and not r["steps"]:
        return {"outcome": "n/a", "reason": f"n/a: {cls.__name__} crashed before its first step on CPU "
                f"({r['symptom']})", "runs": [r]}
    calls = [c for s in r["steps"] for c in s["loss_calls"]]
    return {"outcome": r["outcome"], "first_nan_step": r["first_nan_step"], "nan_until_end": r["nan_until_end"],
            "reason": f"{r['name']}: {r['symptom']}", "runs": [r], **summary([r]), "kernel_calls": len(calls),
            "handed_inputs": sorted({c["n_items"] for c in calls})}


def _child(conn: Any) -> None:
    try:
        out = _in_child()
    except Exception as exc:  # the probe itself failed: an error with its reason, not a finding
        out = {"outcome": "error", "ok": False, "reason": f"training probe failed: {type(exc).__name__}: {exc}",
               "error": traceback.format_exc(limit=20)[-3000:]}
    conn.send(out)
    conn.close()


def run(timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """A few GRPO steps through the generated trainer (or ``n/a`` with the reason); JSON-serialisable."""
    start = time.perf_counter()
    versions = {n: version(n) for n in ("unsloth", "unsloth_zoo", "torch", "transformers", "trl")}
    result: dict[str, Any] = {"ok": True, "route": ROUTE, "versions": versions, "runs": [], "kernel_calls": 0,
                              "masked_inputs": [], "first_nan_step": None}
    after = counts_after_mask(versions["trl"])
    if not after:
        why = ("TRL is not installed" if versions["trl"] is None else
               f"TRL {versions['trl']} counts the completion tokens before mask_truncated_completions, so a "
               f"fully truncated batch sends a positive count whatever the loss (TRL < 1.9)")
        result.update(outcome="n/a", reason=f"n/a: {why}")
    else:
        got = in_fork(_child, (), timeout, "training through the generated UnslothGRPOTrainer")
        if "outcome" not in got:  # in_fork's own answer: a hang or a death
            got = {"outcome": "error", "ok": False, "reason": f"training probe failed: {got.get('reason')}"}
        result.update(got)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
