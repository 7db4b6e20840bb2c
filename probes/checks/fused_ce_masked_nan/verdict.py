"""From this check's evidence in a cell to its zoo state and guard state (docs/design.md#states).

Stdlib only (``reports/`` imports it). Zoo state: the static reading and the
raw-kernel run must agree. Guard state, after ``import unsloth``: was the
forward replaced (black-box identity), is the all-masked call finite through
*every* route the host could run, was a guard module found, what did the
behaviour suite and the training run say. A guard that is present (module
found or forward replaced) and fails anything -- a test, a route, the
training run, or patched the wrong object -- is ``broken``.
"""

from __future__ import annotations

from typing import Any

from probes.checks.judging import opening
from probes.checks.vocabulary import (
    GuardState,
    Verdict,
    ZooState,
    reach,
    replaced_on_fixed_zoo,
)

# The input on which a vulnerable kernel answers NaN, and who sends it (reach's plain words).
FAULT = ("a fully masked micro-batch whose count is None or 0 (zoo's trainer patch sends 0 when a whole "
         "accumulation step is masked; a custom loop sends None)")
SENT = "num_items_in_batch={}"


def _routes(g: dict[str, Any]) -> tuple[bool, list[str], list[str]]:
    """(all-masked finite on every route that ran, routes not finite or failing, routes the host cannot run).

    A route marked ``n/a`` (zoo lacks it, or it needs a device this host lacks) does not count; a route that
    raised for any other reason counts as failing: a guard that crashes a caller protects nobody.
    """
    routes = g.get("routes") or {}
    bad, skipped = [], []
    for name, r in routes.items():
        if not isinstance(r, dict) or r.get("n/a"):
            skipped.append(name)
        elif "error" in r:
            bad.append(f"{name} (raised {str(r['error']).splitlines()[0][:120]})")
        elif not (r.get("loss_finite") and r.get("grads_finite", True)):
            bad.append(f"{name} (loss {r.get('loss')})")
    ran = [n for n in routes if n not in skipped]
    return bool(ran) and not bad, bad, skipped


def classify(check: dict[str, Any], cell: dict[str, Any]) -> Verdict:
    """Classify this check's section of one cell JSON. Pure."""
    j = opening(check, lambda state, train: reach(state, train, FAULT, SENT))
    zoo, counts, behavior, train, out, g = j.zoo, j.counts, j.behavior, j.train, j.out, j.guard
    if j.blocked is not None:
        return out(*j.blocked)
    replaced = not (g.get("forward") or {}).get("original", True)
    module_found = bool(behavior and behavior.get("guard_found"))
    present = replaced or module_found
    finite, bad_routes, _ = _routes(g)
    fails = j.fails
    train_failed = train is not None and train.failed
    train_text = j.train_text

    if zoo is ZooState.ABSENT:
        if replaced:
            return out(GuardState.BROKEN, "a guard replaced a forward in a zoo without the fused kernel")
        if present and counts.failed:
            return out(GuardState.BROKEN, f"a guard is present in a zoo without the fused kernel and its tests "
                                          f"fail: {fails}")
        return out(GuardState.NOT_NEEDED, "no fused cross-entropy kernel in this zoo")
    if zoo is ZooState.VULNERABLE:
        if not replaced:
            if module_found:
                return out(GuardState.BROKEN, "a guard module is present but zoo's forward was not replaced "
                           "(it patched the wrong object)"
                           + (f"; all-masked not finite on {', '.join(bad_routes)}" if bad_routes else "")
                           + (f"; {train_text}" if train_text else ""), train_text)
            if finite and not train_failed:
                return out(GuardState.BROKEN, "the forward is zoo's own yet the all-masked call is finite on every "
                           "route: something other than a forward guard changed the kernel")
            symptom = (f"{train_text}" if train_text else
                       f"the all-masked loss is NaN on {', '.join(bad_routes) or 'the kernel'}")
            return out(GuardState.MISSING, "no guard replaced the forward; " + symptom, symptom)
        problems = []
        if not finite:
            problems.append("the all-masked call is still not finite on " + ", ".join(bad_routes or ["every route"]))
        if counts.failed:
            problems.append(f"behaviour tests failing: {fails}")
        if train_failed:
            problems.append(train_text)
        if problems:
            return out(GuardState.BROKEN, "a guard replaced the forward but " + "; ".join(problems), train_text)
        extra = f"; behaviour {counts.label()}" if counts.total else ""
        if train is not None:
            extra += f"; training {train.label()}"
        return out(GuardState.ACTIVATES, "a guard replaced the forward; the all-masked loss is finite on every route"
                   + extra)
    # zoo fixed
    if replaced:
        return out(*replaced_on_fixed_zoo("zoo's forward", f"behaviour tests failing: {fails}" if fails else ""))
    if not finite or train_failed:
        why = ("the all-masked call after import unsloth is not finite on " + ", ".join(bad_routes)
               if not finite else train_text)
        return out(GuardState.BROKEN if present else GuardState.ERROR,
                   f"the zoo is fixed by both detectors but {why}", train_text)
    if present:
        if counts.failed:
            return out(GuardState.BROKEN, f"behaviour tests failing: {fails}")
        return out(GuardState.NO_OPS, "a guard is present and left zoo's forward untouched")
    if counts.failed:
        return out(GuardState.ERROR, f"no guard, zoo fixed, yet behaviour tests fail: {fails}")
    return out(GuardState.NOT_NEEDED, "zoo carries the fix; no guard")
