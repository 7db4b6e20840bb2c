"""skewmatrix backport: the count unsloth's GRPO ``compute_loss`` hands zoo, with 0 replaced by 1.

zoo's ``grpo_compute_loss`` (up to 2026.9.7) divides the masked loss sum by
``num_items_in_batch / num_processes`` for ``loss_type`` dapo, cispo and
vespo. TRL >= 1.9 counts the tokens after ``mask_truncated_completions``, so
a batch whose completions were all truncated brings a count of 0 and the
loss is 0 / 0 = NaN. With 1 the sum (0, every token masked) gives a loss of
0.0 and zero gradients, as zoo 2026.9.8's own floor does.

Only an exact 0 changes, and it keeps its type (a tensor stays a tensor of
the same dtype and device, a number stays a number); None and every other
count pass through untouched, so a zoo that floors the count itself sees
exactly what it would have seen.
"""

from __future__ import annotations

from typing import Any


def floor_count(count: Any) -> Any:
    """``count``, or 1 in its type where it is exactly 0."""
    if count is None:
        return None
    try:
        import torch
    except ImportError:  # pragma: no cover - unsloth does not import without torch
        torch = None
    if torch is not None and torch.is_tensor(count):
        return torch.where(count == 0, torch.ones_like(count), count)
    return type(count)(1) if count == 0 else count
