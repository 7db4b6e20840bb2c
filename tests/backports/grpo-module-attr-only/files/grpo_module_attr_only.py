"""Floor the GRPO count in a wrapper of zoo's ``grpo_compute_loss`` (a wrong guard used by skewmatrix's tests:
it replaces the module attribute only, which unsloth's generated trainer never calls)."""

from __future__ import annotations

from typing import Any


def install() -> None:
    import torch
    import unsloth_zoo.rl_replacements as rl

    original = rl.grpo_compute_loss

    def grpo_compute_loss(*args: Any, **kwargs: Any) -> Any:
        n = kwargs.get("num_items_in_batch")
        if torch.is_tensor(n):
            kwargs["num_items_in_batch"] = torch.where(n == 0, torch.ones_like(n), n)
        elif n is not None and n == 0:
            kwargs["num_items_in_batch"] = type(n)(1)
        return original(*args, **kwargs)

    rl.grpo_compute_loss = grpo_compute_loss
