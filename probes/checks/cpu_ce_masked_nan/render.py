"""The drill-down of this check's own step payloads, for every report format (contract: ``StepRenderer``).

Stdlib only (``reports/`` imports it). From the ``guard`` step: whether
zoo's CPU kernel was replaced after ``import unsloth`` (its fingerprint
against the raw process's), and the all-masked call through the module
attribute callers resolve.
"""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import DetailTable, StepDetails, as_dict, step_payload, yes_no

# The count the CPU backend's trainer hands the kernel, as this check's training steps record it (``train.py``).
TRAIN_COUNT = "num_items_in_batch"


def details(section: dict[str, Any]) -> StepDetails:
    """See ``StepRenderer.details``."""
    g = step_payload(section, "guard")
    if not g:
        return StepDetails()
    if g.get("kernel") == "absent":
        return StepDetails(items=(("guard probe", f"no kernel after `import unsloth`: {g.get('reason')}"),))
    original = g.get("original")
    replaced = "unknown (no raw fingerprint)" if original is None else ("no (zoo's own)" if original else "yes")
    rows, bad = [], set()
    for i, (route, raw) in enumerate(as_dict(g.get("routes")).items()):
        r = as_dict(raw)
        rows.append((str(route), str(r.get("loss")), yes_no(r.get("grads_finite")), str(r.get("grad_fn"))))
        if r.get("loss_finite") is False:
            bad.add((i, 1))
    tables = (DetailTable("All-masked call after import, by route", ("route", "loss", "gradients finite",
                                                                     "autograd node"),
                          tuple(rows), code=frozenset({3}), bad=frozenset(bad)),) if rows else ()
    return StepDetails(items=(("guard probe", f"kernel replaced after `import unsloth`: {replaced}"),),
                       tables=tables)
