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
from .static_loop import PRINTED, Lifted, NotLiftable, lift, lift_source

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


def optimizer(module: Any, seen: list[dict[str, torch.Tensor | None]]) -> Any:
    """nanochat's own optimizer; each ``step()`` notes the gradients it steps with (in ``seen``)."""
    opt = module.setup_optimizer(weight_decay=0.0)
    for group in opt.param_groups:
        group["initial_lr"] = group["lr"]
    stepper = opt.step

    def step(*args: Any, **kwargs: Any) -> Any:
        seen.append(tiny.grads(module))
        return stepper(*args, **kwargs)

    opt.step = step
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


def _step(lifted: Lifted, ns: dict[str, Any], out: dict[str, Any], step_optimizer: bool, wrapped: Counted,
          module: Any) -> None:
    """One step of the script's code in ``ns``: the statements before the loop, the loop, the optimizer step and
    what the printed loss is made of (that last part runs whenever the loop did: n7 judges it on its own)."""
    calls = len(wrapped.calls)
    try:
        exec(lifted.pre, ns)
        exec(lifted.loop, ns)
    except Exception as exc:
        out["error"] = _error("micro-step loop", exc)
    out["model_calls"] = wrapped.calls[calls:]
    out["logged"] = tiny.describe(ns.get(lifted.logged))
    out["grads"] = tiny.grads(module)
    if out["error"] is None and step_optimizer:
        try:
            exec(lifted.after, ns)
        except Exception as exc:
            out["error"] = _error("optimizer step", exc)
    if (out["error"] is None or out["error"]["where"] != "micro-step loop") and lifted.printed is not None:
        try:
            exec(lifted.log, ns)
            out["printed_loss"] = tiny.describe(ns.get(PRINTED))
        except Exception as exc:
            out["log_error"] = _error("logging", exc)


def run(lifted: Lifted, module: Any, batches: list[tuple[torch.Tensor, torch.Tensor]],
        step_optimizer: bool = True, previous: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
        ) -> dict[str, Any]:
    """One optimizer step of the script's own code over ``batches`` (one per micro-step: GA = len(batches)),
    after a whole step over ``previous`` (same GA) when given. What is recorded is the last step's."""
    wrapped = Counted(module)
    module.zero_grad(set_to_none=True)
    stepped: list[dict[str, torch.Tensor | None]] = []
    opt = optimizer(module, stepped)
    printed: list[str] = []
    ns = namespace(wrapped, [*(previous or []), *batches], opt, printed)
    ns["grad_accum_steps"] = len(batches)
    ns.update({k: v for k, v in (lifted.constants or {}).items() if k not in ns})
    missing = sorted(n for n in lifted.names if n not in ns)
    if missing:
        raise NotLiftable(f"the lifted loop uses names the harness does not provide: {', '.join(missing)}")
    out: dict[str, Any] = {"grad_accum_steps": len(batches), "error": None, "printed_loss": None,
                           "masked_micro_batches": [i for i, (_, y) in enumerate(batches)
                                                    if int((y != tiny.IGNORE).sum()) == 0]}
    if previous:
        _step(lifted, ns, out, True, wrapped, module)
        if out["error"] is not None or out.get("log_error"):
            out["error"] = {**(out["error"] or out["log_error"]), "where": "the step before"}
            out.update(model_calls=[], grads={}, stepped_grads=None, printed=printed[-4:],
                       nonfinite_params=tiny.nonfinite_params(module))
            return out
        stepped.clear()
    _step(lifted, ns, out, step_optimizer, wrapped, module)
    out["stepped_grads"] = stepped[-1] if stepped else None
    out["printed"] = printed[-4:]
    out["nonfinite_params"] = tiny.nonfinite_params(module)
    return out
