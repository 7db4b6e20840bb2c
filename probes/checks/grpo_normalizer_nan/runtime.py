"""The runtime detector: zoo's own ``grpo_compute_loss`` on a batch whose completions are all masked.

Runs in a process that never imported unsloth (a cell's raw probe process,
or ``nox -s scan -- --confirm``'s throwaway env). Per loss type it first
asks whether the loss depends on the count at all (two positive counts on
a batch with tokens give two losses): the loss types that do are judged,
the others are the controls. Each judged type then gets every completion
masked with the zero counts a trainer sends (``tensor(0.)`` and ``0``); the
loss and the gradient of ``new`` are recorded separately (they can differ).
The KL sibling: ``beta`` on, one completion masked out of two, the count of
the other's tokens: is the logged KL finite?

``vulnerable`` when a judged type gives a non-finite loss or gradient at a
zero count, ``fixed`` when none does, ``absent`` when zoo has no such
function or no loss type depends on the count.
"""

from __future__ import annotations

import sys
import time
import traceback
from typing import Any

from probes.common import dist_version, import_raw_kernel

from .judge import judge


def _try(fn: Any) -> dict[str, Any]:
    try:
        return fn()  # type: ignore[no-any-return]
    except Exception as exc:  # a loss type this zoo refuses is evidence about that type, not a probe crash
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}


def probe(fn: Any = None) -> dict[str, Any]:
    """Every loss type through ``fn`` (zoo's function by default): dependence, zero forms, and the KL sibling."""
    import torch

    from . import kernel

    types: dict[str, Any] = {}
    for lt in kernel.LOSS_TYPES:
        def depends(lt: str = lt) -> dict[str, Any]:
            a = kernel.outcome(kernel.make_batch(lt, (True, True), torch.tensor(4.0), seed=3), fn)
            b = kernel.outcome(kernel.make_batch(lt, (True, True), torch.tensor(8.0), seed=3), fn)
            return {"count_4": a["loss"], "count_8": b["loss"], "depends": a["loss_hex"] != b["loss_hex"]}

        entry: dict[str, Any] = {"dependence": _try(depends)}
        entry["zero"] = {name: _try(lambda lt=lt, value=value: kernel.outcome(
            kernel.make_batch(lt, (False, False), value, seed=4), fn)) for name, value in kernel.count_forms().items()}
        types[lt] = entry
    left = torch.tensor(float(kernel.tokens(kernel.make_batch("grpo", (True, False)))))
    kl = _try(lambda: kernel.outcome(kernel.make_batch("grpo", (True, False), None, seed=5, beta=0.04), fn, count=left))
    return {"loss_types": types, "kl_one_masked": kl}


def run(device: str = "cpu") -> dict[str, Any]:
    if "unsloth" in sys.modules:  # pragma: no cover - a wiring bug, not a finding
        raise RuntimeError("the runtime detector must run in a process that never imported unsloth")
    import torch

    from . import kernel

    result: dict[str, Any] = {"zoo_version": dist_version("unsloth_zoo"), "torch_version": torch.__version__,
                              "device": device}
    start = time.perf_counter()
    if import_raw_kernel(result, kernel.MODULE, kernel.module, kernel.FUNCTION) is None:
        return result
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result["probe"] = probe()
    except Exception:
        result.update(verdict="unknown", reason="the probe crashed: " + traceback.format_exc(limit=5)[-600:])
        return result
    finally:
        torch.set_num_threads(threads)
    verdict, reason = judge(result["probe"])
    result.update(verdict=verdict, reason=reason, seconds=round(time.perf_counter() - start, 3))
    return result
