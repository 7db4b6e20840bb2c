"""Seeded inputs and calls into zoo's CPU-backend chunked cross-entropy (``unsloth_zoo.cpu.ops``).

Shared by the runtime detector, the guard probe and the suite of this check.
Importing this module imports torch only; zoo is imported when called.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import torch

MODULE = "unsloth_zoo.cpu.ops"
FUNCTION = "chunked_linear_cross_entropy"
IGNORE = -100


@dataclass
class Batch:
    hidden: torch.Tensor
    weight: torch.Tensor
    labels: torch.Tensor
    num_items: Any = None


def module() -> Any:
    return importlib.import_module(MODULE)


def function() -> Any:
    return getattr(module(), FUNCTION)


def make_batch(kind: str, *, seed: int = 0, shape: tuple[int, int, int, int] = (2, 6, 8, 16)) -> Batch:
    """``all_masked``, ``dense``, ``sparse`` (rows differ: one fully masked) on a (bsz, qlen, hidden, vocab) shape."""
    bsz, qlen, hid, vocab = shape
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(bsz, qlen, hid, generator=gen)
    weight = torch.randn(vocab, hid, generator=gen) * 0.5
    labels = torch.randint(0, vocab, (bsz, qlen), generator=gen)
    if kind == "all_masked":
        labels.fill_(IGNORE)
    elif kind == "sparse":
        labels[0, :] = IGNORE
        labels[1:, ::2] = IGNORE
    elif kind != "dense":
        raise ValueError(f"unknown batch kind {kind!r}")
    return Batch(hidden.requires_grad_(True), weight.requires_grad_(True), labels)


def call(batch: Batch, **kw: Any) -> torch.Tensor:
    return function()(batch.hidden, batch.weight, batch.labels, batch.num_items, **kw)  # type: ignore[no-any-return]


def reference(batch: Batch) -> torch.Tensor:
    """Unchunked loss: sum of CE over shifted labels, divided by num_items or the label count."""
    labels = torch.cat([batch.labels[:, 1:], torch.full_like(batch.labels[:, :1], IGNORE)], dim=1).reshape(-1)
    logits = (batch.hidden @ batch.weight.t()).float().reshape(-1, batch.weight.shape[0])
    total = torch.nn.functional.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
    n = batch.num_items if batch.num_items is not None else (labels != IGNORE).sum()
    return total / n


def outcome(loss: torch.Tensor, batch: Batch) -> dict[str, Any]:
    """Loss and each gradient, reported apart (the CPU kernel gives a NaN loss with zero gradients)."""
    value = float(loss.detach())
    out: dict[str, Any] = {"loss": value if math.isfinite(value) else repr(value), "loss_finite": math.isfinite(value),
                           "grad_fn": type(loss.grad_fn).__name__ if loss.grad_fn is not None else None, "grads": {}}
    if loss.requires_grad:
        loss.backward()
    for name, t in (("hidden", batch.hidden), ("weight", batch.weight)):
        g = t.grad
        out["grads"][name] = None if g is None else {"finite": bool(torch.isfinite(g).all()),
                                                     "all_zero": bool((g == 0).all())}
    out["grads_finite"] = all(g is None or g["finite"] for g in out["grads"].values())
    return out
