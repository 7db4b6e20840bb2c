"""Small, seeded inputs and the calls into zoo's fused cross-entropy kernel.

Shared by the runtime detector, the guard probe and the behaviour suite so
that every probe exercises the kernel the same way. Importing this module
imports torch only; zoo is imported lazily by the functions that need it.

Two routes reach ``UnslothFusedLoss``:

* ``function``: ``apply_autograd_function(UnslothFusedLoss, ...)`` in
  ``unsloth_zoo.fused_losses.cross_entropy_loss`` -- the autograd Function
  itself, resolved through ``cls.forward`` at call time;
* ``public``: ``unsloth_zoo.loss_utils.unsloth_fused_ce_loss`` -- the entry
  point callers bind by value;
* ``adapter``: ``unsloth_zoo.fused_losses.forward_adapter.unsloth_fused_lm_head_loss``
  -- the HF-convention adapter used by generated forwards.

On CPU the kernel needs ``target_gb`` (otherwise it asks CUDA for free
memory), so every route passes one unless told otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

CE_MODULE = "unsloth_zoo.fused_losses.cross_entropy_loss"
FUNCTION_NAME = "UnslothFusedLoss"
IGNORE = -100
ROUTES = ("function", "public", "adapter")
# Small enough to be instant, large enough to have several positions and a
# vocabulary larger than the hidden size.
BSZ, QLEN, HIDDEN, VOCAB = 2, 6, 8, 16
TARGET_GB = 1.0


@dataclass
class Batch:
    """One microbatch: hidden states, lm_head, labels, optional mask and n_items."""

    hidden: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    labels: torch.Tensor
    mask: torch.Tensor | None = None
    n_items: torch.Tensor | None = None
    shift_labels: bool = True

    def fresh(self) -> Batch:
        """A copy with new leaf tensors, so two calls never share gradients."""

        def leaf(t: torch.Tensor | None) -> torch.Tensor | None:
            if t is None:
                return None
            return t.detach().clone().requires_grad_(t.requires_grad)

        hidden = leaf(self.hidden)
        weight = leaf(self.weight)
        assert hidden is not None and weight is not None
        return Batch(
            hidden=hidden,
            weight=weight,
            bias=leaf(self.bias),
            labels=self.labels.clone(),
            mask=None if self.mask is None else self.mask.clone(),
            n_items=None if self.n_items is None else self.n_items.clone(),
            shift_labels=self.shift_labels,
        )


def make_batch(
    kind: str = "all_masked",
    *,
    seed: int = 0,
    device: str = "cpu",
    bias: bool = False,
    n_items: bool = False,
    mask: bool = False,
    shift_labels: bool = True,
) -> Batch:
    """Build a seeded float32 batch.

    ``kind`` is one of ``all_masked`` (every label ignored), ``dense`` (every
    label trainable), ``sparse`` (about a third trainable), ``first_only``
    (only position 0 trainable, so nothing is left after the causal shift).
    ``mask=True`` keeps dense labels but passes an all-zero ``mask``, so the
    emptiness comes from the mask alone.
    """
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(BSZ, QLEN, HIDDEN, generator=gen).to(device)
    weight = (torch.randn(VOCAB, HIDDEN, generator=gen) * 0.5).to(device)
    b = (torch.randn(VOCAB, generator=gen) * 0.1).to(device) if bias else None
    labels = torch.randint(0, VOCAB, (BSZ, QLEN), generator=gen).to(device)
    if kind == "all_masked":
        labels.fill_(IGNORE)
    elif kind == "sparse":
        keep = torch.rand(BSZ, QLEN, generator=gen).to(device) < 0.35
        keep[0, 2] = True  # never empty after the shift
        labels = torch.where(keep, labels, torch.full_like(labels, IGNORE))
    elif kind == "first_only":
        labels[:, 1:] = IGNORE
    elif kind != "dense":
        raise ValueError(f"unknown batch kind {kind!r}")
    m = torch.zeros(BSZ, QLEN, dtype=torch.long, device=device) if mask else None
    count = None
    if n_items:
        count = torch.tensor(float(max(int((labels != IGNORE).sum()), 1)), device=device)
    hidden.requires_grad_(True)
    weight.requires_grad_(True)
    if b is not None:
        b.requires_grad_(True)
    return Batch(hidden, weight, b, labels, m, count, shift_labels)


def ce_module() -> Any:
    import importlib

    return importlib.import_module(CE_MODULE)


def call(
    batch: Batch,
    route: str = "function",
    *,
    torch_compile: bool = False,
    target_gb: float | None = TARGET_GB,
) -> torch.Tensor:
    """Run the kernel on ``batch`` through ``route`` and return the loss."""
    if route == "function":
        m = ce_module()
        return m.apply_autograd_function(
            getattr(m, FUNCTION_NAME),
            dict(
                loss_function=m.compute_fused_ce_loss,
                hidden_states=batch.hidden,
                lm_head_weight=batch.weight,
                lm_head_bias=batch.bias,
                labels=batch.labels,
                mask=batch.mask,
                n_items=batch.n_items,
                scaling=None,
                shift_labels=batch.shift_labels,
                target_gb=target_gb,
                torch_compile=torch_compile,
                overwrite=False,
                extra_kwargs={},
            ),
        )
    if route == "public":
        from unsloth_zoo.loss_utils import unsloth_fused_ce_loss

        return unsloth_fused_ce_loss(
            None,
            batch.hidden,
            batch.weight,
            batch.bias,
            batch.labels,
            mask=batch.mask,
            n_items=batch.n_items,
            target_gb=target_gb,
            torch_compile=torch_compile,
            shift_labels=batch.shift_labels,
        )
    if route == "adapter":
        from unsloth_zoo.fused_losses.forward_adapter import unsloth_fused_lm_head_loss

        head = torch.nn.Linear(HIDDEN, VOCAB, bias=batch.bias is not None)
        # Parameters are new leaves: point the batch at them so that
        # ``outcome`` reads the gradients the adapter really produced.
        head.weight = torch.nn.Parameter(batch.weight.detach().clone())
        batch.weight = head.weight
        if batch.bias is not None:
            head.bias = torch.nn.Parameter(batch.bias.detach().clone())
            batch.bias = head.bias
        kwargs: dict[str, Any] = dict(target_gb=target_gb, torch_compile=torch_compile)
        if batch.n_items is not None:
            kwargs["num_items_in_batch"] = batch.n_items
        if batch.mask is not None:
            kwargs["mask"] = batch.mask
        if not batch.shift_labels:
            kwargs["shift_labels"] = False
        return unsloth_fused_lm_head_loss(batch.hidden, head, batch.labels, **kwargs)
    raise ValueError(f"unknown route {route!r}; valid: {', '.join(ROUTES)}")


def reference_loss(batch: Batch) -> torch.Tensor:
    """Unchunked ``F.cross_entropy`` reference for a non-empty batch."""
    labels = batch.labels.clone()
    if batch.mask is not None:
        labels = torch.where(batch.mask == 0, torch.full_like(labels, IGNORE), labels)
    hidden = batch.hidden
    if batch.shift_labels:
        labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE)], dim=1)
    logits = torch.nn.functional.linear(hidden, batch.weight, batch.bias).float()
    flat = logits.reshape(-1, logits.shape[-1])
    target = labels.reshape(-1)
    if batch.n_items is not None:
        total = torch.nn.functional.cross_entropy(flat, target, ignore_index=IGNORE, reduction="sum")
        return total / batch.n_items
    return torch.nn.functional.cross_entropy(flat, target, ignore_index=IGNORE)


def outcome(loss: torch.Tensor, batch: Batch) -> dict[str, Any]:
    """Backward through ``loss`` and describe loss and each gradient separately.

    The vulnerable kernel gives a NaN *loss* with finite, zero gradients on
    CPU (DESIGN.md section 8), so loss and gradients are reported apart.
    """
    value = float(loss.detach().float().cpu())
    result: dict[str, Any] = {
        "loss": value if math.isfinite(value) else repr(value),
        "loss_finite": math.isfinite(value),
        "grad_fn": type(loss.grad_fn).__name__ if loss.grad_fn is not None else None,
        "grads": {},
    }
    if loss.requires_grad:
        loss.backward()
    for name, t in (("hidden", batch.hidden), ("weight", batch.weight), ("bias", batch.bias)):
        if t is None or not t.requires_grad:
            continue
        g = t.grad
        if g is None:
            result["grads"][name] = {"present": False}
            continue
        result["grads"][name] = {
            "present": True,
            "finite": bool(torch.isfinite(g).all()),
            "all_zero": bool((g == 0).all()),
            "abs_sum": float(g.abs().sum()) if bool(torch.isfinite(g).all()) else "nan",
        }
    result["grads_finite"] = all(g.get("finite", True) for g in result["grads"].values())
    return result
