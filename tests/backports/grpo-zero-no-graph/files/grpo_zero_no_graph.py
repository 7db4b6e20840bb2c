"""Answer ``torch.tensor(0.0)`` for a GRPO count of 0 (a wrong guard used by skewmatrix's tests: the answer has
no autograd graph, so ``loss.backward()`` raises)."""

from __future__ import annotations

from typing import Any

# Appended to the generated UnslothGRPOTrainer module, after its copies of zoo's loss: rebinds both.
TRAINER_SOURCE = (
    "from unsloth.grpo_zero_no_graph import wrap as _grpo_zero_wrap\n"
    "grpo_compute_loss = _grpo_zero_wrap(grpo_compute_loss)\n"
    "grpo_compute_loss_slow = _grpo_zero_wrap(grpo_compute_loss_slow)\n"
)


def wrap(fn: Any) -> Any:
    import torch

    def grpo_compute_loss(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        n = kwargs.get("num_items_in_batch")
        if kwargs.get("loss_type") in ("dapo", "cispo", "vespo") and n is not None and float(n) == 0:
            return (torch.tensor(0.0), *out[1:])  # nothing to learn from this batch
        return out

    return grpo_compute_loss


def install() -> None:
    import unsloth_zoo.rl_replacements as rl

    rl.grpo_compute_loss = wrap(rl.grpo_compute_loss)
