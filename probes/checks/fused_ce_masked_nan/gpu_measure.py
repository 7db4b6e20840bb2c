"""This check's GPU measurement: loss, each gradient, weights after an optimizer step, the GradScaler, per dtype.

Runs inside a case's interpreter (the GPU image's Python with the case's
wheels on ``PYTHONPATH``), in a working directory of its own, after
``import unsloth`` -- so a guard that a build wires into the import is live,
as in a real run. For each compile mode (``torch_compile`` of zoo's chunk
loop), dtype (``fp32``; ``bf16`` parameters; ``fp16+scaler``: fp32 master
parameters, an fp16 autocast forward and a ``torch.amp.GradScaler``), batch
(``all_masked`` with ``n_items=None``: the bug; ``all_masked_n0``: the count
0 zoo's trainer patch passes; ``dense``: the control), route (``function``:
``UnslothFusedLoss`` itself; ``public``: ``unsloth_zoo.loss_utils.unsloth_fused_ce_loss``,
the entry generated forwards bind) and optimizer (``adamw``: ``torch.optim.AdamW``;
``default``: unsloth's SFT default ``adamw_8bit`` from bitsandbytes, where it
imports) it records separately: the loss, each gradient, the weights and
optimizer state after one step, and for the scaler whether it skipped the
step. ``hidden`` stands for everything upstream of the lm_head (its gradient
is what reaches the model), ``weight`` is the lm_head.

Without a CUDA device every entry is ``n/a: no CUDA device`` (the CPU dry
run still imports unsloth, which proves the wheelhouse is complete; with
``--cpu-check`` it also measures on CPU, under ``cpu_check``, apart). The
result file is rewritten after every entry, so a run stopped at its time
limit keeps what it measured.

    python -m probes.checks.fused_ce_masked_nan.gpu_measure --out F.json --device cuda --compile off,on

Inputs come from ``kernel.py`` of this check (seeded batch builders, the
kernel routes), so the numbers are comparable with the probes'. The harness
runs it through the check's GPU capability (``gpu.py``, ``matrix/gpu``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

from . import GUARD_MODULE

SCHEMA = "skewmatrix.gpu-measure/1"
DTYPES = ("fp32", "bf16", "fp16+scaler")
BATCHES = ("all_masked", "all_masked_n0", "dense")
ROUTES = ("function", "public")
OPTIMIZERS = ("adamw", "default")
DEFAULT_OPTIMIZER = "adamw_8bit"  # unsloth's SFT config default (unsloth/models/rl.py)
LR = 1e-2
# No weight decay: a weight that moves after the step moved because of its gradient.
WEIGHT_DECAY = 0.0
NO_CUDA = "n/a: no CUDA device"


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else repr(x)


def write(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def tensor_summary(t: Any) -> dict[str, Any]:
    import torch

    if t is None:
        return {"present": False}
    t = t.detach()
    finite = bool(torch.isfinite(t).all())
    return {"present": True, "dtype": str(t.dtype).replace("torch.", ""), "finite": finite,
            "nonfinite_count": int((~torch.isfinite(t)).sum()), "all_zero": bool((t == 0).all()),
            "abs_sum": _num(float(t.float().abs().sum())) if finite else "non-finite"}


def default_optimizer_class() -> tuple[Any, str | None]:
    """bitsandbytes' AdamW8bit (unsloth's default), or None with the reason it is not here."""
    try:
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit, None
    except Exception as exc:
        return None, (f"n/a: unsloth's default optimizer {DEFAULT_OPTIMIZER} needs bitsandbytes, "
                      f"which does not import here ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")


def leaves(dtype: str, batch_kind: str, device: str) -> tuple[dict[str, Any], Any]:
    """The trainable leaves (hidden, weight) in the parameter dtype, and the batch they feed."""
    import torch

    from . import kernel

    b = kernel.make_batch("all_masked" if batch_kind.startswith("all_masked") else "dense", device=device)
    param_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    params = {"hidden": b.hidden.detach().to(param_dtype).requires_grad_(True),
              "weight": b.weight.detach().to(param_dtype).requires_grad_(True)}
    if batch_kind == "all_masked_n0":
        # What zoo's trainer patch passes when no label of the step survives (README.md#the-evidence).
        b.n_items = torch.tensor(0, device=device)
    return params, b


def one_entry(dtype: str, batch_kind: str, route: str, optimizer: str, torch_compile: bool,
              device: str) -> dict[str, Any]:
    import torch

    from . import kernel

    entry: dict[str, Any] = {"dtype": dtype, "batch": batch_kind, "route": route, "optimizer": optimizer}
    if optimizer == "default":
        opt_cls, why = default_optimizer_class()
        if opt_cls is None:
            return {**entry, "status": "n/a", "reason": why}
        entry["optimizer_class"] = f"{opt_cls.__module__}.{opt_cls.__name__}"
    else:
        opt_cls = torch.optim.AdamW
        entry["optimizer_class"] = "torch.optim.AdamW"
    params, batch = leaves(dtype, batch_kind, device)
    before = {k: v.detach().clone() for k, v in params.items()}
    opt = opt_cls(list(params.values()), lr=LR, weight_decay=WEIGHT_DECAY)
    scaler = torch.amp.GradScaler(device) if dtype == "fp16+scaler" else None
    # On cuda the kernel sizes its chunks from free GPU memory (target_gb=None, zoo's default); on CPU it must be told.
    target_gb = None if device == "cuda" else kernel.TARGET_GB
    if scaler is not None:
        # fp32 master weights, fp16 compute: the casts are part of the graph, so gradients reach the fp32 leaves.
        with torch.autocast(device, dtype=torch.float16):
            batch.hidden, batch.weight = params["hidden"].half(), params["weight"].half()
            loss = kernel.call(batch, route, torch_compile=torch_compile, target_gb=target_gb)
    else:
        batch.hidden, batch.weight = params["hidden"], params["weight"]
        loss = kernel.call(batch, route, torch_compile=torch_compile, target_gb=target_gb)
    value = float(loss.detach().float().cpu())
    entry["loss"] = {"value": _num(value), "finite": math.isfinite(value),
                     "dtype": str(loss.dtype).replace("torch.", ""),
                     "grad_fn": type(loss.grad_fn).__name__ if loss.grad_fn is not None else None}
    if scaler is not None:
        scale_before = float(scaler.get_scale())
        scaler.scale(loss).backward()
        entry["grads_scaled"] = {k: tensor_summary(v.grad) for k, v in params.items()}
        scaler.unscale_(opt)
        entry["grads"] = {k: tensor_summary(v.grad) for k, v in params.items()}
        scaler.step(opt)
        scaler.update()
        scale_after = float(scaler.get_scale())
        # GradScaler skips optimizer.step() exactly when it found inf/NaN in the unscaled gradients, and then
        # backs its scale off; an unchanged or grown scale means the step ran.
        entry["scaler"] = {"scale_before": scale_before, "scale_after": scale_after,
                           "skipped_step": scale_after < scale_before}
    else:
        if loss.requires_grad:
            loss.backward()
        entry["grads"] = {k: tensor_summary(v.grad) for k, v in params.items()}
        opt.step()
        entry["scaler"] = None
    weights = {}
    for k, v in params.items():
        w = v.detach()
        changed = bool((w != before[k]).any()) if bool(torch.isfinite(w).all()) else True
        delta = (w.float() - before[k].float()).abs()
        weights[k] = {**tensor_summary(w), "changed": changed,
                      "max_abs_delta": _num(float(delta.max())) if bool(torch.isfinite(delta).all()) else "non-finite"}
    entry["weights_after_step"] = weights
    state_finite = True
    for st in opt.state.values():
        for t in st.values():
            if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                state_finite = False
    entry["optimizer_state_finite"] = state_finite
    entry["status"] = "ok"
    return entry


def summary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What went non-finite, per dtype: loss, gradients, weights, and scaler skips (the README table's cells)."""
    out: dict[str, Any] = {}
    for dtype in DTYPES:
        rows = [e for e in entries if e["dtype"] == dtype and e.get("status") == "ok"]
        if not rows:
            continue
        masked = [e for e in rows if e["batch"].startswith("all_masked")]
        out[dtype] = {
            "entries": len(rows),
            "nonfinite_loss": sorted({f"{e['batch']}/{e['route']}" for e in rows if not e["loss"]["finite"]}),
            "nonfinite_grads": sorted({f"{e['batch']}/{e['route']}" for e in rows
                                       if not all(g.get("finite", True) for g in e["grads"].values())}),
            "nonfinite_weights": sorted({f"{e['batch']}/{e['route']}/{e['optimizer']}" for e in rows
                                         if not all(w["finite"] for w in e["weights_after_step"].values())}),
            "masked_weights_moved": sorted({f"{e['batch']}/{e['route']}/{e['optimizer']}" for e in masked
                                            if any(w["changed"] for w in e["weights_after_step"].values())}),
            "scaler_skipped": sorted({f"{e['batch']}/{e['route']}/{e['optimizer']}" for e in rows
                                      if (e.get("scaler") or {}).get("skipped_step")}),
        }
    return out


def run_entry(dtype: str, batch_kind: str, route: str, optimizer: str, torch_compile: bool,
              device: str) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        entry = one_entry(dtype, batch_kind, route, optimizer, torch_compile, device)
    except Exception as exc:  # a failing combination is a finding; the others still run
        entry = {"dtype": dtype, "batch": batch_kind, "route": route, "optimizer": optimizer, "status": "error",
                 "reason": f"{type(exc).__name__}: {str(exc)[:300]}", "traceback": traceback.format_exc(limit=6)}
    entry["seconds"] = round(time.perf_counter() - start, 3)
    return entry


def measure_mode(torch_compile: bool, device: str, doc: dict[str, Any], out: Path, key: str) -> None:
    mode: dict[str, Any] = {"torch_compile": torch_compile, "entries": [], "started": time.time()}
    doc["modes"][key] = mode
    for dtype in DTYPES:
        for batch_kind in BATCHES:
            for route in ROUTES:
                for optimizer in OPTIMIZERS:
                    mode["entries"].append(run_entry(dtype, batch_kind, route, optimizer, torch_compile, device))
                    write(out, doc)
    mode["summary"] = summary(mode["entries"])
    mode["seconds"] = round(time.time() - mode.pop("started"), 3)
    write(out, doc)


def na_mode(torch_compile: bool, reason: str) -> dict[str, Any]:
    return {"torch_compile": torch_compile, "summary": {}, "seconds": 0.0,
            "entries": [{"dtype": d, "batch": b, "route": r, "optimizer": o, "status": "n/a", "reason": reason}
                        for d in DTYPES for b in BATCHES for r in ROUTES for o in OPTIMIZERS]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {__package__}.gpu_measure", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    # cpu: a plumbing check of this module on a host without a GPU (the tests use it); the device check runs cuda.
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--compile", default="off,on", help="comma-separated compile modes: off, on")
    ap.add_argument("--cpu-check", action="store_true",
                    help="without CUDA, also measure on CPU (compile off) under cpu_check: the dry run's self-test")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.compile.split(",") if m.strip()]
    if not modes or any(m not in ("on", "off") for m in modes):
        ap.error(f"--compile {args.compile!r}: give off, on or off,on")
    import torch

    cuda = torch.cuda.is_available()
    runnable = cuda or args.device == "cpu"
    doc: dict[str, Any] = {
        "schema": SCHEMA, "device": args.device, "cuda_available": cuda, "python": sys.version.split()[0],
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(0) if cuda else None,
        "versions": {n: _version(n) for n in ("unsloth", "unsloth_zoo", "transformers", "trl", "peft", "accelerate",
                                              "triton", "datasets", "bitsandbytes")},
        "settings": {"lr": LR, "weight_decay": WEIGHT_DECAY,
                     "target_gb": None if args.device == "cuda" else "kernel.TARGET_GB",
                     "default_optimizer": DEFAULT_OPTIMIZER},
        "modes": {},
    }
    start = time.perf_counter()
    try:
        import unsloth  # noqa: F401 -- the import under test: it may install a guard
    except Exception as exc:
        doc["import_unsloth"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                                 "traceback": traceback.format_exc(limit=8)}
        reason = f"n/a: import unsloth failed: {type(exc).__name__}: {str(exc)[:200]}"
        doc["modes"] = {m: na_mode(m == "on", reason) for m in modes}
        write(args.out, doc)
        return 0
    doc["import_unsloth"] = {"ok": True, "seconds": round(time.perf_counter() - start, 3)}
    guard = sys.modules.get(GUARD_MODULE)
    doc["guard_module"] = None if guard is None else {
        "file": getattr(guard, "__file__", None),
        "is_installed": bool(guard.is_installed()) if callable(getattr(guard, "is_installed", None)) else None}
    if not runnable:
        doc["modes"] = {m: na_mode(m == "on", NO_CUDA) for m in modes}
        if args.cpu_check:
            # The dry run's proof that this module works end to end, in the process that already paid for
            # import unsloth: CPU numbers, kept apart from the (n/a) cuda modes and never read as GPU results.
            check: dict[str, Any] = {"device": "cpu", "torch_compile": False, "entries": []}
            doc["cpu_check"] = check
            for dtype in DTYPES:
                for batch_kind in BATCHES:
                    for route in ROUTES:
                        for optimizer in OPTIMIZERS:
                            check["entries"].append(run_entry(dtype, batch_kind, route, optimizer, False, "cpu"))
            check["summary"] = summary(check["entries"])
        write(args.out, doc)
        return 0
    for m in modes:
        measure_mode(m == "on", args.device, doc, args.out, m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
