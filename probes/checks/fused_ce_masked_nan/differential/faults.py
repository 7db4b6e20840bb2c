"""``d10-faults-propagate``: zoo's kernel made to raise below the guard; the guarded call must raise the same.

Both processes inject the same fault at the same place (``probes.checks.faults``):
something ``UnslothFusedLoss.forward`` itself calls at call time, never the
forward, which a guard captured at import. ``TARGETS`` in order: zoo's forward
calls ``torch.func.grad_and_value`` for every chunk (zoo 2026.9.3 and
2026.10.9 alike); the inner loss's ``torch.nn.functional.cross_entropy``
(2026.9.3) and zoo's ``smoothed_nll`` global (2026.10.9) are the fallbacks.
The raw process takes the first target at which zoo's own kernel raises the
injected fault, and records zoo's record per case; the unsloth process injects
there and calls the guarded routes. Faults: an out-of-memory
``RuntimeError`` and a ``TypeError``. Cases: labels left with no count and
with their count; every label masked with the count None and ``tensor(0)``
(what the trainer sends); each through the autograd Function and through
``unsloth_fused_ce_loss`` bound by value, with an explicit ``target_gb``
(zoo's default would ask the accelerator).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from probes.checks import faults

from . import PROPERTIES
from . import spec as specs

PROPERTY = "d10-faults-propagate"
SHARED_KEY = "faults"
TARGETS = ("torch.func:grad_and_value", "torch.nn.functional:cross_entropy",
           "unsloth_zoo.fused_losses.cross_entropy_loss:smoothed_nll")
CASES: dict[str, dict[str, Any]] = {
    "labels left, no count": {"labels": "dense"},
    "labels left, their count": {"labels": "sparse", "n_items": "t0", "count": "true"},
    "all masked, count None": {"labels": "all_masked", "n_items": "none"},
    "all masked, count tensor(0)": {"labels": "all_masked", "n_items": "tlong", "count": "zero"},
}
ROUTES = ("function", "public")


def cases(has_compute_gradients: bool, cuda: bool) -> list[tuple[str, dict[str, Any]]]:
    """(name, spec) per case and route, at a small shape with labels in every row."""
    out = []
    for name, fields in CASES.items():
        for route in ROUTES:
            s = specs.normalize({"shape": 1, "seed": 1, "route": route, **fields},
                                has_compute_gradients=has_compute_gradients, cuda=cuda)
            out.append((f"{name}, route {route}", s))
    return out


def record(kernel: Any, s: dict[str, Any], target: str, kind: str) -> dict[str, Any]:
    """One call with fault ``kind`` injected at ``target``: what the call did, and whether the fault fired.
    ``answer``: the compact answer (``inputs.run``) when the call answered."""
    from .inputs import materialize

    call = materialize(s, "cpu")
    with faults.injected(target, kind) as fired:
        ans = kernel.answer(s)
    out: dict[str, Any] = {"fired": fired.count, "empty": bool(call.empty and call.zero_count)}
    if "e" in ans:
        out["e"] = ans["e"]
    else:
        out["answer"] = {k: ans[k] for k in ("m", "l", "f", "z", "g", "b") if k in ans}
    return out


def raw(kernel: Any, has_compute_gradients: bool, cuda: bool) -> dict[str, Any]:
    """zoo's own records, at the first target where the injection makes zoo's kernel raise."""
    return faults.first_raising(TARGETS, lambda target: {
        f"{name}|{kind}": record(kernel, s, target, kind)
        for name, s in cases(has_compute_gradients, cuda) for kind in faults.FAULTS})


def judged(zoo: dict[str, Any], kernel: Any, has_compute_gradients: bool, cuda: bool,
           words: Callable[[dict[str, Any]], tuple[str, bool]]) -> dict[str, Any]:
    """The property's test: the guarded records at zoo's target, judged case by case. ``words``: a compact
    answer's loss in words and whether it is the defined zero (``properties``; passed in, which keeps this
    module, which the raw side imports, clear of the judging modules)."""
    start = time.perf_counter()
    if not zoo:
        return {"id": PROPERTY, "title": PROPERTIES[PROPERTY], "outcome": "n/a", "duration_s": 0.0, "details": {},
                "reason": "n/a: the raw process recorded no fault injection"}
    target, tried, records = zoo.get("target"), list(zoo.get("tried") or ()), zoo.get("records") or {}
    rows = []
    for name, s in cases(has_compute_gradients, cuda):
        for kind in faults.FAULTS:
            z = records.get(f"{name}|{kind}")
            if z is None:
                continue
            g = record(kernel, s, target, kind) if target else {}
            for r in (z, g):
                if "answer" in r:
                    r["loss"], r["defined_zero"] = words(r["answer"])
            rows.append({"case": name, "kind": kind, "empty": z["empty"], "zoo": z, "guarded": g})
    outcome, reason, details = faults.summarize(target, tried, rows)
    if outcome == "fail":
        reason = f'property "{PROPERTY.split("-", 1)[1]}": {reason}'
    details["raw_seconds"] = zoo.get("seconds")
    return {"id": PROPERTY, "title": PROPERTIES[PROPERTY], "outcome": outcome, "reason": reason,
            "duration_s": round(time.perf_counter() - start, 4), "details": details}
