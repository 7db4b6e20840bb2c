"""From this check's evidence in a cell to its states. Stdlib only (``reports/`` imports it).

No guard for this kernel exists today, so a vulnerable zoo is ``missing``
unless something replaced zoo's function after ``import unsloth`` (then the
suite decides between ``activates`` and ``broken``).
"""

from __future__ import annotations

from typing import Any

from probes.checks.judging import opening
from probes.checks.vocabulary import GuardState, Verdict, ZooState, reach, replaced_on_fixed_zoo

# The input on which the vulnerable kernel answers NaN, and who sends it (reach's plain words).
FAULT = ("an all-masked batch with num_items_in_batch=None: a custom loop that calls the model without a "
         "count, or a trainer that passes none")
SENT = "num_items_in_batch={}"


def classify(check: dict[str, Any], cell: dict[str, Any]) -> Verdict:
    j = opening(check, lambda state, train: reach(state, train, FAULT, SENT))
    zoo, counts, train_text, out, g = j.zoo, j.counts, j.train_text, j.out, j.guard
    if (early := j.settled("no CPU-backend kernel in this zoo", "the kernel")) is not None:
        return early
    replaced = not g["original"]
    route = (g.get("routes") or {}).get("module-attribute") or {}
    finite = bool(route.get("loss_finite")) and bool(route.get("grads_finite"))
    fails = j.fails
    if zoo is ZooState.VULNERABLE:
        if not replaced:
            symptom = train_text or (f"an all-masked batch with num_items_in_batch None gives loss "
                                     f"{route.get('loss')} on the CPU backend's kernel")
            return out(GuardState.MISSING, "nothing replaced zoo's kernel; " + symptom, symptom)
        problems = (["the all-masked call is not finite"] if not finite else []) + (
            [f"behaviour tests failing: {fails}"] if counts.failed else []) + ([train_text] if train_text else [])
        if problems:
            return out(GuardState.BROKEN, "the kernel was replaced but " + "; ".join(problems), train_text)
        return out(GuardState.ACTIVATES, f"the kernel was replaced; the all-masked loss is finite; {counts.label()}")
    if replaced:
        extra = "; ".join(x for x in (f"behaviour tests failing: {fails}" if fails else "", train_text) if x)
        return out(*replaced_on_fixed_zoo("zoo's CPU kernel", extra), train_text)
    if train_text:
        return out(GuardState.ERROR, f"the zoo is fixed by both detectors but {train_text}", train_text)
    if counts.failed:
        return out(GuardState.ERROR, f"no replacement, zoo fixed, yet behaviour tests fail: {fails}")
    return out(GuardState.NOT_NEEDED, "zoo's CPU kernel answers an all-masked batch with a finite loss")
