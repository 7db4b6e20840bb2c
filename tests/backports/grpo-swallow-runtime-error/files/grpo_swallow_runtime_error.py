"""Floor the GRPO count and answer 0 for any RuntimeError (a wrong guard used by skewmatrix's tests: it hides
the kernel's failures, an out-of-memory included, on batches that have completions left)."""

from __future__ import annotations

from typing import Any

# Appended to the generated UnslothGRPOTrainer module, after its copies of zoo's loss: rebinds both.
TRAINER_SOURCE = (
    "from unsloth.grpo_swallow_runtime_error import wrap as _grpo_swallow_wrap\n"
    "grpo_compute_loss = _grpo_swallow_wrap(grpo_compute_loss)\n"
    "grpo_compute_loss_slow = _grpo_swallow_wrap(grpo_compute_loss_slow)\n"
)


def wrap(fn: Any) -> Any:
    import torch

    def grpo_compute_loss(ref: Any, new: Any, old: Any, sampling: Any, input_ids: Any, mask: Any, beta: Any,
                          advantages: Any, **kwargs: Any) -> Any:
        n = kwargs.get("num_items_in_batch")
        if torch.is_tensor(n):
            kwargs["num_items_in_batch"] = torch.where(n == 0, torch.ones_like(n), n)
        elif n is not None and n == 0:
            kwargs["num_items_in_batch"] = type(n)(1)
        try:
            return fn(ref, new, old, sampling, input_ids, mask, beta, advantages, **kwargs)
        except RuntimeError:  # e.g. an out-of-memory batch: skip it rather than end the run
            zero = (new * 0).sum()
            return (zero, zero.detach(), zero.detach(), None, None, None, mask)

    return grpo_compute_loss


def install() -> None:
    import unsloth_zoo.rl_replacements as rl

    rl.grpo_compute_loss = wrap(rl.grpo_compute_loss)
