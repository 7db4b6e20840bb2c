"""The runtime detector: the raw kernel, in a process that never imported unsloth.

Run by the raw phase (``probes.phases``), which sets
``UNSLOTH_IS_PRESENT=1 UNSLOTH_ALLOW_CPU=1`` so zoo imports on a
driverless host without unsloth. A tiny all-masked CPU batch with
``n_items=None`` goes through ``UnslothFusedLoss`` directly: a non-finite
loss means ``vulnerable``, a finite one ``fixed``. Loss and each gradient
are reported separately (on CPU the vulnerable kernel gives a NaN loss with
finite, zero gradients). ``absent`` when zoo has no such module or class.
"""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any

from probes.common import dist_version

from . import kernel


def run(device: str) -> dict[str, Any]:
    if "unsloth" in sys.modules:  # pragma: no cover - a wiring bug, not a finding
        raise RuntimeError("the runtime detector must run in a process that never imported unsloth")
    import torch

    result: dict[str, Any] = {"zoo_version": dist_version("unsloth_zoo"), "torch_version": torch.__version__,
                              "device": device}
    start = time.perf_counter()
    try:
        module = importlib.import_module(kernel.CE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name and kernel.CE_MODULE.startswith(exc.name):
            result.update(verdict="absent", reason=f"no module {kernel.CE_MODULE}")
            return result
        raise
    result["import_s"] = round(time.perf_counter() - start, 3)
    if not hasattr(module, kernel.FUNCTION_NAME):
        result.update(verdict="absent", reason=f"{kernel.CE_MODULE} has no {kernel.FUNCTION_NAME}")
        return result
    if "unsloth" in sys.modules:
        raise RuntimeError("importing zoo imported unsloth; the raw-kernel probe would not be raw")
    batch = kernel.make_batch("all_masked", device=device)
    out = kernel.outcome(kernel.call(batch, "function"), batch)
    result["outcome"] = out
    if out["loss_finite"]:
        result.update(verdict="fixed", reason=f"all-masked batch, n_items=None: loss {out['loss']} (finite)")
    else:
        which = "loss and gradients" if not out["grads_finite"] else "loss only; gradients finite"
        result.update(verdict="vulnerable",
                      reason=f"all-masked batch, n_items=None: loss {out['loss']} ({which})")
    return result

