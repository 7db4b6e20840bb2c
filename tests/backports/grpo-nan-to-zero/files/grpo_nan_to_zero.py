"""Replace a NaN GRPO loss by 0 (a wrong guard used by skewmatrix's tests: it hides every NaN, not only 0 / 0)."""

from __future__ import annotations

from typing import Any


def install() -> None:
    import torch
    import unsloth_zoo.rl_replacements as rl

    original = rl.grpo_compute_loss

    def grpo_compute_loss(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        return (torch.nan_to_num(out[0], nan=0.0), *out[1:])

    rl.grpo_compute_loss = grpo_compute_loss
    rl.RL_REPLACEMENTS["grpo_compute_loss"] = grpo_compute_loss
