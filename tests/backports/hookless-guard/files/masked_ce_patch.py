"""Zoo's fused cross-entropy divides by zero when no label is left and no count (or a count of 0) is given.

Patched on import: ``UnslothFusedLoss.forward`` is wrapped at class level (every route ends in
``UnslothFusedLoss.apply``), but only when zoo's own forward gives a NaN for a tiny all-masked batch, so a
zoo that carries the fix is left alone. The wrapper answers exactly that case -- no label after the shift
and the mask, and a count of None or 0 -- with a loss of 0.0 and zero gradients; everything else goes to zoo.
"""

import inspect
import math

import torch
from unsloth_zoo.fused_losses import cross_entropy_loss as _ce

_Loss = _ce.UnslothFusedLoss
_zoo_forward = _Loss.forward  # the staticmethod's function


class _Probe:
    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def _zoo_gives_nan():
    with torch.no_grad():
        loss = _zoo_forward(_Probe(), _ce.compute_fused_ce_loss, torch.ones(1, 2, 2), torch.ones(3, 2), None,
                            torch.full((1, 2), -100), n_items=None, target_gb=1.0, torch_compile=False)
    return not math.isfinite(float(loss))


def _count_is_zero(n_items):
    if n_items is None:
        return True
    if torch.is_tensor(n_items):
        return n_items.numel() == 1 and n_items.item() == 0
    return n_items == 0


def _no_label_left(labels, mask, shift_labels, ignore_index):
    if shift_labels:
        keep = labels[..., 1:] != ignore_index
        if mask is not None:
            if mask.shape != labels.shape:
                return False  # not ours to judge: zoo raises for a mask that does not fit the labels
            keep = keep & (mask[..., 1:].to(keep.device) != 0)
    else:
        keep = labels != ignore_index
    return not bool(keep.any())


_signature = inspect.signature(_zoo_forward)


def _forward(ctx, *args, **kwargs):
    call = _signature.bind(ctx, *args, **kwargs)
    call.apply_defaults()
    a = call.arguments
    extra = a["extra_kwargs"] or {}
    if not (_count_is_zero(a["n_items"])
            and _no_label_left(a["labels"], a["mask"], a["shift_labels"], int(extra.get("ignore_index", -100)))):
        return _zoo_forward(ctx, *args, **kwargs)
    hidden, weight, bias = a["hidden_states"], a["lm_head_weight"], a["lm_head_bias"]
    # zoo leaves the hidden-state gradient in hidden_states under overwrite
    grad_hidden = hidden.zero_() if a["overwrite"] else torch.zeros_like(hidden)
    ctx.save_for_backward(grad_hidden,
                          torch.zeros_like(weight) if weight.requires_grad else None,
                          torch.zeros_like(bias) if bias is not None and bias.requires_grad else None)
    ctx.scaling = a["scaling"]
    return torch.zeros((), device=weight.device)


_forward.__signature__ = _signature  # zoo builds its positional call from the forward's signature

if _zoo_gives_nan():
    _Loss.forward = staticmethod(_forward)
    _ce._get_mapping.cache_clear()
