"""Small, seeded inputs and the calls into zoo's fused cross-entropy kernel.

Shared by the runtime detector, the guard probe and the behaviour suite so
that every probe exercises the kernel the same way. Importing this module
imports torch only; zoo is imported lazily by the functions that need it.

Three routes reach ``UnslothFusedLoss`` (plus ``function_defaults``, the
Function applied with its trailing arguments left to their defaults):

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
    """One microbatch and every forward argument that can change the result.

    ``n_items`` is whatever the caller hands zoo (None, a Python number or a
    tensor); ``ignore_index`` other than -100 travels in ``extra_kwargs``;
    ``target_gb`` None asks zoo for its default (a CUDA memory query on
    older releases).
    """

    hidden: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    labels: torch.Tensor
    mask: torch.Tensor | None = None
    n_items: Any = None
    shift_labels: bool = True
    scaling: float | None = None
    overwrite: bool = False
    ignore_index: int = IGNORE
    target_gb: float | None = TARGET_GB

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
            n_items=self.n_items.clone() if torch.is_tensor(self.n_items) else self.n_items,
            shift_labels=self.shift_labels,
            scaling=self.scaling,
            overwrite=self.overwrite,
            ignore_index=self.ignore_index,
            target_gb=self.target_gb,
        )

    def extra_kwargs(self) -> dict[str, Any]:
        return {} if self.ignore_index == IGNORE else {"ignore_index": self.ignore_index}

    def tensors(self) -> dict[str, torch.Tensor]:
        """The caller's tensors, by argument name (to check that a call left them alone)."""
        named = {"hidden_states": self.hidden, "lm_head_weight": self.weight, "lm_head_bias": self.bias,
                 "labels": self.labels, "mask": self.mask, "n_items": self.n_items}
        return {k: v for k, v in named.items() if torch.is_tensor(v)}


SHAPES = {"small": (BSZ, QLEN, HIDDEN, VOCAB), "odd": (3, 5, 12, 40), "one_row": (1, QLEN, HIDDEN, VOCAB)}


def make_batch(
    kind: str = "all_masked",
    *,
    seed: int = 0,
    device: str = "cpu",
    bias: bool = False,
    n_items: bool = False,
    mask: bool = False,
    shift_labels: bool = True,
    dtype: torch.dtype = torch.float32,
    shape: str = "small",
    ignore_index: int = IGNORE,
) -> Batch:
    """Build a seeded batch (values drawn in float32, then cast to ``dtype``).

    ``kind`` is one of ``all_masked`` (every label ignored), ``dense`` (every
    label trainable), ``sparse`` (about a third trainable), ``first_only``
    (only position 0 trainable, so nothing is left after the causal shift),
    ``mixed_rows`` (row 0 fully ignored, the other rows dense: rows differ in
    emptiness). ``mask=True`` keeps the labels but passes an all-zero
    ``mask``, so the emptiness comes from the mask alone. ``n_items=True``
    passes the count of trainable labels (at least 1) as a 0-d tensor.
    """
    bsz, qlen, hidden_size, vocab = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(bsz, qlen, hidden_size, generator=gen).to(device=device, dtype=dtype)
    weight = (torch.randn(vocab, hidden_size, generator=gen) * 0.5).to(device=device, dtype=dtype)
    b = (torch.randn(vocab, generator=gen) * 0.1).to(device=device, dtype=dtype) if bias else None
    labels = torch.randint(0, vocab, (bsz, qlen), generator=gen).to(device)
    if kind == "all_masked":
        labels.fill_(ignore_index)
    elif kind == "sparse":
        keep = torch.rand(bsz, qlen, generator=gen).to(device) < 0.35
        keep[0, 2] = True  # never empty after the shift
        labels = torch.where(keep, labels, torch.full_like(labels, ignore_index))
    elif kind == "first_only":
        labels[:, 1:] = ignore_index
    elif kind == "mixed_rows":
        labels[0] = ignore_index
    elif kind != "dense":
        raise ValueError(f"unknown batch kind {kind!r}")
    m = torch.zeros(bsz, qlen, dtype=torch.long, device=device) if mask else None
    count = None
    if n_items:
        left = labels[:, 1:] if shift_labels else labels
        count = torch.tensor(float(max(int((left != ignore_index).sum()), 1)), device=device)
    hidden.requires_grad_(True)
    weight.requires_grad_(True)
    if b is not None:
        b.requires_grad_(True)
    return Batch(hidden, weight, b, labels, m, count, shift_labels, ignore_index=ignore_index)


def ce_module() -> Any:
    import importlib

    return importlib.import_module(CE_MODULE)


_FROM_BATCH: Any = object()


def call(
    batch: Batch,
    route: str = "function",
    *,
    torch_compile: bool = False,
    target_gb: float | None = _FROM_BATCH,
) -> torch.Tensor:
    """Run the kernel on ``batch`` through ``route`` and return the loss.

    ``target_gb`` defaults to the batch's own; pass None for zoo's default.
    """
    if target_gb is _FROM_BATCH:
        target_gb = batch.target_gb
    if route == "function":
        m = ce_module()
        return m.apply_autograd_function(  # type: ignore[no-any-return]
            getattr(m, FUNCTION_NAME),
            dict(
                loss_function=m.compute_fused_ce_loss,
                hidden_states=batch.hidden,
                lm_head_weight=batch.weight,
                lm_head_bias=batch.bias,
                labels=batch.labels,
                mask=batch.mask,
                n_items=batch.n_items,
                scaling=batch.scaling,
                shift_labels=batch.shift_labels,
                target_gb=target_gb,
                torch_compile=torch_compile,
                overwrite=batch.overwrite,
                extra_kwargs=batch.extra_kwargs(),
            ),
        )
    if route == "function_defaults":
        # The Function applied with its trailing arguments omitted (apply takes no keywords):
        # zoo's defaults decide mask, n_items, scaling, shift_labels, target_gb, torch_compile, ...
        m = ce_module()
        return getattr(m, FUNCTION_NAME).apply(  # type: ignore[no-any-return]
            m.compute_fused_ce_loss, batch.hidden, batch.weight, batch.bias, batch.labels)
    if route == "public":
        from unsloth_zoo.loss_utils import unsloth_fused_ce_loss

        return unsloth_fused_ce_loss(  # type: ignore[no-any-return]
            None,
            batch.hidden,
            batch.weight,
            batch.bias,
            batch.labels,
            mask=batch.mask,
            n_items=batch.n_items,
            scaling=batch.scaling,
            target_gb=target_gb,
            torch_compile=torch_compile,
            overwrite=batch.overwrite,
            shift_labels=batch.shift_labels,
            **batch.extra_kwargs(),
        )
    if route == "adapter":
        from unsloth_zoo.fused_losses.forward_adapter import unsloth_fused_lm_head_loss

        vocab, hidden_size = batch.weight.shape
        head = torch.nn.Linear(hidden_size, vocab, bias=batch.bias is not None)
        # Parameters are new leaves: point the batch at them so that
        # ``outcome`` reads the gradients the adapter really produced.
        head.weight = torch.nn.Parameter(batch.weight.detach().clone())
        batch.weight = head.weight
        if batch.bias is not None:
            head.bias = torch.nn.Parameter(batch.bias.detach().clone())
            batch.bias = head.bias
        kwargs: dict[str, Any] = dict(target_gb=target_gb, torch_compile=torch_compile, **batch.extra_kwargs())
        if batch.n_items is not None:
            kwargs["num_items_in_batch"] = batch.n_items
        if batch.mask is not None:
            kwargs["mask"] = batch.mask
        if not batch.shift_labels:
            kwargs["shift_labels"] = False
        return unsloth_fused_lm_head_loss(batch.hidden, head, batch.labels, **kwargs)  # type: ignore[no-any-return]
    raise ValueError(f"unknown route {route!r}; valid: {', '.join(ROUTES)}")


def reference_loss(batch: Batch) -> torch.Tensor:
    """Unchunked ``F.cross_entropy`` reference for a non-empty batch (the loss zoo returns is unscaled)."""
    ignore = batch.ignore_index
    labels = batch.labels.clone()
    if batch.shift_labels:
        # zoo folds the mask in only when it shifts (shift_labels=False: the caller did both).
        if batch.mask is not None:
            labels = torch.where(batch.mask == 0, torch.full_like(labels, ignore), labels)
        labels = torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], ignore)], dim=1)
    logits = torch.nn.functional.linear(batch.hidden, batch.weight, batch.bias).float()
    flat = logits.reshape(-1, logits.shape[-1])
    target = labels.reshape(-1)
    if batch.n_items is not None:
        total = torch.nn.functional.cross_entropy(flat, target, ignore_index=ignore, reduction="sum")
        return total / batch.n_items
    return torch.nn.functional.cross_entropy(flat, target, ignore_index=ignore)


def outcome(loss: torch.Tensor, batch: Batch) -> dict[str, Any]:
    """Backward through ``loss`` and describe loss and each gradient separately.

    The vulnerable kernel gives a NaN *loss* with finite, zero gradients on
    CPU (docs/design.md#measured-facts), so loss and gradients are reported apart.
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
