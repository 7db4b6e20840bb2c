"""nanochat's own ``GPT`` at a tiny ``GPTConfig``, imported from the tree under test, and seeded batches for it.

Importing this module imports torch only; nanochat is imported from the tree
by :func:`nanochat` (the tree put first on ``sys.path``, and refused when a
``nanochat`` from elsewhere is already imported).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

IGNORE = -1  # nanochat's ignore_index
SEED = 0
# The smallest config that runs every block of the model: n_embd >= 24 (the smear gate reads 24 channels),
# two layers (value embeddings, the backout at n_layer // 2), full context windows.
TINY = {"sequence_len": 16, "vocab_size": 64, "n_layer": 2, "n_head": 2, "n_kv_head": 2, "n_embd": 32,
        "window_pattern": "L"}
BATCH, SEQ = 2, 12


def nanochat(root: Path) -> ModuleType:
    """``nanochat.gpt`` from ``root``."""
    root = root.resolve()
    loaded = sys.modules.get("nanochat")
    if loaded is not None:
        where = Path(next(iter(getattr(loaded, "__path__", [""])))).resolve().parent
        if where != root:
            raise RuntimeError(f"a nanochat from {where} is already imported; the tree under test is {root}")
    elif str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("nanochat.gpt")


def config(gpt: ModuleType, **over: Any) -> Any:
    fields = {f.name for f in dataclasses.fields(gpt.GPTConfig)}
    return gpt.GPTConfig(**{k: v for k, v in {**TINY, **over}.items() if k in fields})


def build(root: Path, seed: int = SEED) -> Any:
    """A tiny GPT built the way nanochat builds one (meta device, ``to_empty``, ``init_weights``), float32 on CPU,
    then seeded noise on every parameter: the init zeroes the output projections, which would zero most gradients
    and make the gradient comparisons of the suite vacuous."""
    gpt = nanochat(root)
    cfg = config(gpt)
    torch.manual_seed(seed)  # init_weights draws from the global generator: same seed, same model
    with torch.device("meta"):
        model = gpt.GPT(cfg)
    model.to_empty(device="cpu")
    zero_fill(model)
    model.init_weights()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p.dtype) * 0.02)
    model.float()
    model.train()
    return model


def zero_fill(model: Any) -> None:
    """Zero every parameter after ``to_empty``: what a ref's ``init_weights`` leaves out is 0, not leftover memory
    (5019acc's, under PR #662, leaves ``smear_lambda``, ``backout_lambda`` and ``smear_gate`` uninitialised)."""
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()


def batch(kind: str, seed: int = SEED) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs int32, targets int64) as chat_sft's loader makes them: ``all_masked`` (every target -1),
    ``partial`` (the first half of each row -1, as a user turn), ``dense`` (no -1)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, TINY["vocab_size"], (BATCH, SEQ), generator=gen).to(torch.int32)
    y = torch.randint(0, TINY["vocab_size"], (BATCH, SEQ), generator=gen).to(torch.int64)
    if kind == "all_masked":
        y.fill_(IGNORE)
    elif kind == "partial":
        y[:, : SEQ // 2] = IGNORE
    elif kind != "dense":
        raise ValueError(f"unknown batch kind {kind!r}")
    return x, y


def reference(model: Any, x: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """The plain loss from the model's own logits: torch's cross-entropy, ignore_index -1."""
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1),
                                             ignore_index=IGNORE, reduction=reduction)


def describe(t: Any) -> dict[str, Any]:
    """A loss as JSON: value(s), shape, finiteness, grad_fn (a plain number, as a script prints it: value and
    finiteness)."""
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        v = float(t)
        return {"type": type(t).__name__, "finite": math.isfinite(v), "value": v if math.isfinite(v) else str(v)}
    if not isinstance(t, torch.Tensor):
        return {"type": type(t).__name__}
    d = t.detach().float()
    out: dict[str, Any] = {"shape": list(d.shape), "finite": bool(torch.isfinite(d).all()),
                           "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
                           "requires_grad": bool(t.requires_grad)}
    if d.numel() == 1:
        v = float(d.reshape(()))
        out["value"] = v if out["finite"] else str(v)
    else:
        out["sum"] = float(d.sum()) if out["finite"] else str(float(d.sum()))
    return out


def grads(model: Any) -> dict[str, torch.Tensor | None]:
    return {n: (None if p.grad is None else p.grad.detach().clone()) for n, p in model.named_parameters()}


def nonfinite_params(model: Any) -> int:
    return sum(int((~torch.isfinite(p.detach())).sum()) for p in model.parameters())
