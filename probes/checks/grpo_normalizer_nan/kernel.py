"""Small, seeded inputs and the call into zoo's ``grpo_compute_loss``.

Shared by the runtime detector, the guard probe and the suite, so every probe
calls the function the same way: per-token log-probabilities of a batch of
completions (``new`` with a gradient, ``old`` and ``ref`` near it), a
completion mask, per-completion advantages, and the trainer's keywords
(``loss_type``, ``num_items_in_batch``, ``num_processes``,
``current_gradient_accumulation_steps``). ``vespo`` needs TRL's gamma weights;
the probe hands it a stand-in that weighs every completion 1 (what is probed
is the normaliser, not the weights). Importing this module imports torch
only; zoo is imported lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from .judge import LOSS_TYPES

MODULE = "unsloth_zoo.rl_replacements"
FUNCTION = "grpo_compute_loss"
__all__ = ["FUNCTION", "LOSS_TYPES", "MODULE"]
B, T = 2, 5  # two completions of five tokens


@dataclass
class Batch:
    """One call's tensors and keywords; ``count`` is whatever the trainer hands zoo (a tensor, a number, None)."""

    new: torch.Tensor
    old: torch.Tensor | None
    ref: torch.Tensor | None
    input_ids: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor
    beta: float
    loss_type: str
    count: Any
    extra: dict[str, Any] = field(default_factory=dict)


def module() -> Any:
    import importlib

    return importlib.import_module(MODULE)


def function() -> Any:
    return getattr(module(), FUNCTION)


def make_batch(loss_type: str, rows_kept: tuple[bool, ...] = (False, False), count: Any = None, seed: int = 0,
               beta: float = 0.0, shape: tuple[int, int] = (B, T)) -> Batch:
    """Completions whose rows in ``rows_kept`` keep their tokens (the last one masked as padding)."""
    g = torch.Generator().manual_seed(seed)
    b, t = shape
    new = (-torch.rand(b, t, generator=g) * 3.0).requires_grad_(True)
    old = new.detach() + 0.1 * torch.randn(b, t, generator=g)
    ref = new.detach() + 0.1 * torch.randn(b, t, generator=g)
    mask = torch.zeros(b, t, dtype=torch.int64)
    for i, keep in enumerate(rows_kept[:b]):
        if keep:
            mask[i, : t - 1 - (i % 2)] = 1
    advantages = torch.randn(b, generator=g)
    return Batch(new=new, old=old, ref=ref, input_ids=torch.randint(3, 60, (b, t), generator=g), mask=mask,
                 advantages=advantages, beta=beta, loss_type=loss_type, count=count)


def tokens(batch: Batch) -> int:
    return int(batch.mask.sum())


def _gamma_weights(advantages: Any = None, log_ratio_per_token: Any = None, **_: Any) -> torch.Tensor:
    """vespo's weights, as a stand-in for TRL's: 1 per completion (shape (B, 1)), no gradient."""
    return torch.ones(log_ratio_per_token.shape[0], 1)


def call(batch: Batch, fn: Any = None, count: Any = "batch") -> tuple[Any, Any]:
    """(loss, mean KL) from ``fn`` (zoo's function by default); ``count`` overrides the batch's count."""
    fn = function() if fn is None else fn
    n = batch.count if isinstance(count, str) and count == "batch" else count
    kwargs: dict[str, Any] = dict(loss_type=batch.loss_type, num_items_in_batch=n, num_processes=1,
                                  current_gradient_accumulation_steps=1, max_completion_length=batch.mask.shape[1],
                                  get_gamma_weights=_gamma_weights)
    kwargs.update(batch.extra)
    out = fn(batch.ref if batch.beta else None, batch.new, batch.old, None, batch.input_ids, batch.mask,
             batch.beta, batch.advantages, **kwargs)
    return out[0], (out[2] if len(out) > 2 else None)


def number(value: Any) -> Any:
    """A JSON-safe float (non-finite as a string) of a scalar tensor or number; None stays None."""
    if value is None:
        return None
    x = float(value.detach()) if torch.is_tensor(value) else float(value)
    return x if math.isfinite(x) else str(x)


def outcome(batch: Batch, fn: Any = None, count: Any = "batch") -> dict[str, Any]:
    """The call's loss, KL and gradient: values, finiteness, and the exact bits for oracle comparisons."""
    batch.new.grad = None
    loss, kl = call(batch, fn, count)
    out: dict[str, Any] = {"loss": number(loss), "loss_finite": bool(torch.isfinite(loss.detach()).all()),
                           "loss_hex": float(loss.detach()).hex(), "kl": number(kl),
                           "kl_finite": None if kl is None else bool(torch.isfinite(torch.as_tensor(kl)).all()),
                           "requires_grad": bool(loss.requires_grad)}
    if loss.requires_grad:
        loss.backward()  # a trainer's backward(): it must work on every answer that has a graph
        grad = batch.new.grad
        if grad is None:  # a graph that does not reach the log-probabilities
            out["grads_finite"], out["grads_zero"], out["grad_hex"] = True, True, []
            out["grad_reaches_new"] = False
            return out
        out["grads_finite"] = bool(torch.isfinite(grad).all())
        out["grads_zero"] = bool((grad == 0).all())
        out["grad_hex"] = [float(v).hex() for v in grad.flatten()]
        out["grad_reaches_new"] = True
    else:
        out["grads_finite"], out["grads_zero"], out["grad_hex"], out["grad_reaches_new"] = True, True, [], False
    return out


FAULTS: dict[str, tuple[type[Exception], str]] = {
    "oom": (RuntimeError, "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; "
                          "77.50 GiB already allocated) [injected by skewmatrix]"),
    "type": (TypeError, "unsupported operand type(s) for *: 'Tensor' and 'NoneType' [injected by skewmatrix]"),
}


class InjectedFault:
    """A callable zoo's loss calls inside itself (the off-policy mask, vespo's gamma weights) made to raise: what a
    failing kernel raises reaches the guard from inside zoo, whatever the guard wraps or delegates to."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        cls, message = FAULTS[self.kind]
        raise cls(message)


def inject(batch: Batch, kind: str) -> None:
    """Make zoo's loss raise ``kind`` (``oom``: a RuntimeError that reads like an out-of-memory, ``type``: a
    TypeError) from the first callable it calls: the off-policy mask (on when its threshold is set) and, for
    vespo, the gamma weights."""
    fault = InjectedFault(kind)
    batch.extra.update(off_policy_mask_threshold=0.5, get_off_policy_mask=fault, get_gamma_weights=fault)


def count_forms() -> dict[str, Any]:
    """The zero counts a trainer sends when every completion was masked: TRL's tensor, and a plain number."""
    return {"tensor(0.)": torch.tensor(0.0), "0": 0}
