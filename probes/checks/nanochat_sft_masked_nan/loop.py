"""The tree's own micro-step loop and optimizer step (lifted from ``scripts/chat_sft.py``), run on a tiny model.

A fix in the loop (skip, scale, count) cannot be imported: it is top-level
script code. So the suite compiles the script's own statements -- the
``for micro_step in range(grad_accum_steps)`` loop (:func:`static_loop.find_loop`)
and the statements after it up to ``model.zero_grad(...)`` (learning-rate
schedule, ``optimizer.step()``) -- and executes them in a namespace that
provides what the script defines around them: the tiny model (wrapped to
count its calls), a loader over the given micro-batches, nanochat's own
optimizer from ``model.setup_optimizer()``, a constant schedule, no
GradScaler (fp32 on CPU), no process group. A name the lifted code uses that
the harness does not provide is a :class:`NotLiftable` error naming it.
"""

from __future__ import annotations

import builtins
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from . import model as tiny
from .static_loop import Lifted, NotLiftable, lift, lift_source

__all__ = ["Lifted", "NotLiftable", "lift", "lift_source", "run"]


class Counted:
    """The model as the loop sees it: every call counted with the targets it got and whether a backward() later
    reached its loss; everything else delegated."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.calls: list[dict[str, Any]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.module(*args, **kwargs)
        targets = args[1] if len(args) > 1 else kwargs.get("targets")
        call = {"valid_targets": None if targets is None else int((targets != tiny.IGNORE).sum()),
                "loss": tiny.describe(out), "backward": False}
        if isinstance(out, torch.Tensor) and out.requires_grad:  # noted when a backward() flows through this loss
            out.register_hook(lambda grad: call.update(backward=True))
        self.calls.append(call)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


def optimizer(module: Any) -> Any:
    opt = module.setup_optimizer(weight_decay=0.0)
    for group in opt.param_groups:
        group["initial_lr"] = group["lr"]
    return opt


def namespace(wrapped: Counted, batches: list[tuple[torch.Tensor, torch.Tensor]], opt: Any,
              printed: list[str]) -> dict[str, Any]:
    extra = batches[0]  # the loop prefetches one micro-batch past the step; what it is does not matter
    return {
        "__builtins__": builtins, "torch": torch, "time": time, "dist": torch.distributed, "model": wrapped,
        "orig_model": wrapped.module, "x": batches[0][0], "y": batches[0][1],
        "train_loader": iter([*batches[1:], extra]), "grad_accum_steps": len(batches), "scaler": None,
        "progress": 0.0, "approx_progress": 0.0, "step": 0, "device": torch.device("cpu"), "device_type": "cpu",
        "print0": lambda *a, **k: printed.append(" ".join(str(v) for v in a)), "skipped_batches": 0,
        "warned_about_skips": False, "optimizer": opt, "get_lr_multiplier": lambda progress: 1.0,
        "get_muon_momentum": lambda it: 0.95, "synchronize": lambda: None, "is_ddp_initialized": lambda: False,
        "t0": time.time(), "ddp": False, "ddp_rank": 0, "ddp_world_size": 1, "master_process": True,
        "train_loss": None,
    }


def _error(where: str, exc: BaseException) -> dict[str, Any]:
    tb = traceback.extract_tb(exc.__traceback__)
    frame = tb[-1] if tb else None
    return {"where": where, "type": type(exc).__name__, "message": str(exc).splitlines()[0] if str(exc) else "",
            "at": f"{Path(frame.filename).name}:{frame.lineno}" if frame else None}


def run(lifted: Lifted, module: Any, batches: list[tuple[torch.Tensor, torch.Tensor]],
        step_optimizer: bool = True) -> dict[str, Any]:
    """One optimizer step of the script's own code over ``batches`` (one per micro-step: GA = len(batches))."""
    wrapped = Counted(module)
    module.zero_grad(set_to_none=True)
    opt = optimizer(module)
    printed: list[str] = []
    ns = namespace(wrapped, batches, opt, printed)
    missing = sorted(n for n in lifted.names if n not in ns)
    if missing:
        raise NotLiftable(f"the lifted loop uses names the harness does not provide: {', '.join(missing)}")
    out: dict[str, Any] = {"grad_accum_steps": len(batches), "error": None,
                           "masked_micro_batches": [i for i, (_, y) in enumerate(batches)
                                                    if int((y != tiny.IGNORE).sum()) == 0]}
    try:
        exec(lifted.loop, ns)
    except Exception as exc:
        out["error"] = _error("micro-step loop", exc)
    out["model_calls"] = wrapped.calls
    out["logged"] = tiny.describe(ns.get(lifted.logged))
    out["grads"] = tiny.grads(module)
    out["printed"] = printed[-4:]
    if out["error"] is None and step_optimizer:
        try:
            exec(lifted.after, ns)
        except Exception as exc:
            out["error"] = _error("optimizer step", exc)
    out["nonfinite_params"] = tiny.nonfinite_params(module)
    return out
