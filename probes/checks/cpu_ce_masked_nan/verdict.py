"""From this check's evidence in a cell to its states. Stdlib only (``reports/`` imports it).

No guard for this kernel exists today, so a vulnerable zoo is ``missing``
unless something replaced zoo's function after ``import unsloth`` (then the
suite decides between ``activates`` and ``broken``).
"""

from __future__ import annotations

from typing import Any

from probes.checks.vocabulary import (
    GuardState,
    Verdict,
    ZooState,
    behavior_counts,
    precondition,
    step_result,
    zoo_state,
)


def classify(check: dict[str, Any], cell: dict[str, Any]) -> Verdict:
    zoo, zoo_reason, static, runtime = zoo_state(check)
    counts, _ = behavior_counts(check)

    def out(state: GuardState, reason: str, symptom: str = "") -> Verdict:
        return Verdict(zoo, zoo_reason, static, runtime, state, reason, counts, None, symptom)

    blocked = precondition(check, zoo, zoo_reason)
    if blocked is not None:
        return out(*blocked)
    g = step_result(check, "guard") or {}
    if zoo is ZooState.ABSENT:
        return out(GuardState.NOT_NEEDED, "no CPU-backend kernel in this zoo")
    if g.get("original") is None:
        return out(GuardState.ERROR, "cannot tell whether the kernel was replaced (no raw fingerprint)")
    replaced = not g["original"]
    route = (g.get("routes") or {}).get("module-attribute") or {}
    finite = bool(route.get("loss_finite")) and bool(route.get("grads_finite"))
    fails = ", ".join(counts.failing)
    if zoo is ZooState.VULNERABLE:
        if not replaced:
            symptom = (f"an all-masked batch with num_items_in_batch None gives loss {route.get('loss')} on the CPU "
                       "backend's kernel")
            return out(GuardState.MISSING, "nothing replaced zoo's kernel; " + symptom, symptom)
        if not finite or counts.failed:
            return out(GuardState.BROKEN, "the kernel was replaced but "
                       + ("the all-masked call is not finite" if not finite else f"behaviour tests failing: {fails}"))
        return out(GuardState.ACTIVATES, f"the kernel was replaced; the all-masked loss is finite; {counts.label()}")
    if replaced:
        if counts.failed:
            return out(GuardState.BROKEN, f"the kernel was replaced on a fixed zoo; behaviour tests failing: {fails}")
        return out(GuardState.NO_OPS, "the kernel was replaced on a fixed zoo and behaves like it")
    if counts.failed:
        return out(GuardState.ERROR, f"no replacement, zoo fixed, yet behaviour tests fail: {fails}")
    return out(GuardState.NOT_NEEDED, "zoo's CPU kernel answers an all-masked batch with a finite loss")
