"""The guard-presence probe: after ``import unsloth``, who owns the forward?

Run first in the unsloth phase (``probes.phases``). Black-box, so a guard written
by anyone is recognised: after ``import unsloth`` it checks whether
``UnslothFusedLoss.forward`` is still zoo's own function (its code object
lives in zoo's module file at the ``def`` the source has), and runs an
all-masked batch through the public entry points (``public``:
``unsloth_zoo.loss_utils.unsloth_fused_ce_loss``; ``adapter``:
``forward_adapter.unsloth_fused_lm_head_loss``; and ``function``, the
autograd Function itself), each with the probes' small ``target_gb`` and with
zoo's default ``target_gb=None`` (on zoo 2026.10.9 the default routes to
another autograd Function; on older zoo it asks CUDA for free memory, which a
driverless host answers with an error: recorded as ``n/a`` with the reason),
recording the loss, each gradient and which autograd node produced the loss.
"""

from __future__ import annotations

import ast
import importlib
import os
import time
from pathlib import Path
from typing import Any

from probes.common import dist_version, error_text

from . import kernel


def forward_identity(cls: Any, module: Any) -> dict[str, Any]:
    """Describe ``cls.forward`` and decide whether it is zoo's original function."""
    raw = cls.__dict__.get("forward")
    fn = getattr(raw, "__func__", raw)
    code = getattr(fn, "__code__", None)
    info: dict[str, Any] = {
        "type": type(raw).__name__,
        "qualname": getattr(fn, "__qualname__", None),
        "module": getattr(fn, "__module__", None),
        "file": code.co_filename if code else None,
        "line": code.co_firstlineno if code else None,
    }
    module_file = getattr(module, "__file__", None)
    def_lines: set[int] = set()
    if module_file and Path(module_file).is_file():
        tree = ast.parse(Path(module_file).read_text(encoding="utf-8", errors="replace"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == kernel.FUNCTION_NAME:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "forward":
                        def_lines.add(item.lineno)
                        def_lines.update(d.lineno for d in item.decorator_list)
    same_file = bool(code and module_file and os.path.realpath(code.co_filename) == os.path.realpath(module_file))
    info["original"] = bool(same_file and code and code.co_name == "forward" and code.co_firstlineno in def_lines)
    return info


def _needs_a_device(error: str) -> bool:
    low = error.lower()
    return any(w in low for w in ("cuda", "nvidia", "driver", "mem_get_info", "no gpu", "accelerator"))


def run(device: str, torch_compile: bool) -> dict[str, Any]:
    import torch

    result: dict[str, Any] = {"device": device, "torch_compile": torch_compile,
                              "cpu_mode": "allow-cpu" if os.environ.get("UNSLOTH_ALLOW_CPU") == "1" else "cpu-backend",
                              "torch_version": torch.__version__, "cuda": torch.version.cuda}
    start = time.perf_counter()
    import unsloth  # noqa: F401 -- the import under test

    result["import_unsloth_s"] = round(time.perf_counter() - start, 3)
    result["unsloth_version"] = dist_version("unsloth")
    result["zoo_version"] = dist_version("unsloth_zoo")
    try:
        module = importlib.import_module(kernel.CE_MODULE)
    except ModuleNotFoundError:
        result.update(kernel="absent", reason=f"no module {kernel.CE_MODULE}")
        return result
    cls = getattr(module, kernel.FUNCTION_NAME, None)
    if cls is None:
        result.update(kernel="absent", reason=f"{kernel.CE_MODULE} has no {kernel.FUNCTION_NAME}")
        return result
    result["kernel"] = "present"
    result["forward"] = forward_identity(cls, module)
    routes: dict[str, Any] = {}
    for route in kernel.ROUTES:
        for suffix, target_gb in (("", kernel.TARGET_GB), ("-default-target-gb", None)):
            batch = kernel.make_batch("all_masked", device=device)
            try:
                loss = kernel.call(batch, route, torch_compile=torch_compile, target_gb=target_gb)
                routes[route + suffix] = kernel.outcome(loss, batch)
            except Exception as exc:  # a route that fails is evidence, not a probe crash
                text = error_text(exc, limit=3)
                entry: dict[str, Any] = {"error": text}
                if isinstance(exc, ImportError):
                    entry["n/a"] = f"this route does not exist in this zoo ({type(exc).__name__})"
                elif target_gb is None and device == "cpu" and _needs_a_device(text):
                    # zoo's default sizing asks the accelerator for free memory: this host cannot run the route
                    entry["n/a"] = "zoo's default target_gb asks CUDA for free memory; no CUDA device here"
                routes[route + suffix] = entry
    result["routes"] = routes
    public = routes.get("public", {})
    result["all_masked_finite"] = bool(public.get("loss_finite")) and bool(public.get("grads_finite"))
    return result

