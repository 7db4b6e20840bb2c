"""Test ``c6-faults-propagate``: zoo's CPU kernel made to raise below whatever replaced it; the call must raise alike.

The fault (``probes.checks.faults``: an out-of-memory ``RuntimeError``, a
``TypeError``) is injected into what the kernel itself calls at call time,
never into ``chunked_linear_cross_entropy``, which a guard may have captured
at import. ``TARGETS`` in order: zoo's ``_softmax_without_collapse``, a global
of ``unsloth_zoo.cpu.ops`` that the autograd Function's forward calls for every
chunk (zoo 2026.10.9), then ``torch.nn.functional.softplus``, which that helper
calls. The raw process (``raw_step``) takes the first target at which zoo's own
kernel raises and records zoo's answer per case; the behaviour suite in the
unsloth process injects there and calls the kernel through the module attribute
callers resolve (``test``). Cases: labels left with no count and with their
count; every label masked with the count None and ``tensor(0)``.
"""

from __future__ import annotations

import time
from typing import Any

from probes.checks import PhaseContext, faults

SHARED_KEY = "faults"
TEST_ID = "c6-faults-propagate"
TITLE = ("zoo's kernel made to raise below the guard (an OOM, a TypeError): the call raises the same, and "
         "answers only an empty batch it never handed to zoo")
TARGETS = ("unsloth_zoo.cpu.ops:_softmax_without_collapse", "torch.nn.functional:softplus")
# name -> (batch kind, count: None, "true" (the batch's own label count) or 0)
CASES: dict[str, tuple[str, Any]] = {
    "labels left, no count": ("dense", None),
    "labels left, their count": ("sparse", "true"),
    "all masked, count None": ("all_masked", None),
    "all masked, count tensor(0)": ("all_masked", 0),
}


def _batch(kind: str, count: Any) -> Any:
    import torch

    from . import kernel

    b = kernel.make_batch(kind, seed=3)
    if count == "true":
        shifted = b.labels[:, 1:]
        b.num_items = (shifted != kernel.IGNORE).sum()
    elif count is not None:
        b.num_items = torch.tensor(count)
    return b


def record(name: str, target: str, kind: str) -> dict[str, Any]:
    """One call with fault ``kind`` injected at ``target``: what it did, and whether the fault fired."""
    from . import kernel

    batch_kind, count = CASES[name]
    b = _batch(batch_kind, count)
    out: dict[str, Any] = {"empty": batch_kind == "all_masked" and count in (None, 0)}
    with faults.injected(target, kind) as fired:
        try:
            run = kernel.outcome(kernel.call(b), b)
        except Exception as exc:
            out["e"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:100]}"
        else:
            grads = [g for g in run["grads"].values() if g is not None]
            out["loss"] = run["loss"]
            out["defined_zero"] = run["loss"] == 0.0 and all(g["finite"] and g["all_zero"] for g in grads)
    out["fired"] = fired.count
    return out


def raw_step(ctx: PhaseContext) -> dict[str, Any]:
    """zoo's own records (raw process), at the first target where the injection makes its kernel raise."""
    from . import kernel

    try:
        kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        ctx.shared[SHARED_KEY] = {"absent": f"{type(exc).__name__}: {exc}"}
        return ctx.shared[SHARED_KEY]  # type: ignore[no-any-return]
    got = faults.first_raising(TARGETS, lambda target: {f"{name}|{kind}": record(name, target, kind)
                                                        for name in CASES for kind in faults.FAULTS})
    ctx.shared[SHARED_KEY] = got
    return {"target": got["target"], "tried": got["tried"], "cases": len(got["records"]),
            "zoo_raised": sum("e" in r for r in got["records"].values()), "seconds": got["seconds"]}


def test(ctx: PhaseContext) -> dict[str, Any]:
    """The behaviour test (unsloth process): the calls at zoo's target, judged case by case."""
    start = time.perf_counter()
    zoo = (ctx.raw or {}).get(SHARED_KEY) or {}
    if "absent" in zoo or not zoo:
        why = zoo.get("absent") or "the raw process left no records"
        return {"id": TEST_ID, "title": TITLE, "outcome": "n/a" if zoo else "fail",
                "reason": f"n/a: {why}" if zoo else why, "duration_s": 0.0, "details": {}}
    target, records = zoo.get("target"), zoo.get("records") or {}
    rows = []
    for name in CASES:  # in this order, whatever order the records came back in (labels left first)
        for kind in faults.FAULTS:
            z = records.get(f"{name}|{kind}")
            if z is not None:
                g = record(name, target, kind) if target else {}
                rows.append({"case": name, "kind": kind, "empty": z["empty"], "zoo": z, "guarded": g})
    outcome, reason, details = faults.summarize(target, list(zoo.get("tried") or ()), rows)
    return {"id": TEST_ID, "title": TITLE, "outcome": outcome, "reason": reason,
            "duration_s": round(time.perf_counter() - start, 4), "details": details}
