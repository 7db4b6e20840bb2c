"""The drill-down of this check's own step payloads, for every report format (contract: ``StepRenderer``).

Stdlib only (``reports/`` imports it). From the ``guard`` step: whether
zoo's CPU kernel was replaced after ``import unsloth`` (its fingerprint
against the raw process's), and the all-masked call through the module
attribute callers resolve. From the ``train`` step: the evaluation run after
training, by eval batch, with a NaN ``eval_loss`` that is not the kernel's
named a stack hazard on its own line.
"""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import StepDetails, evaluation_details, routes_table, step_payload

# The count the CPU backend's trainer hands the kernel, as this check's training steps record it (``train.py``).
TRAIN_COUNT = "num_items_in_batch"


def details(section: dict[str, Any]) -> StepDetails:
    """See ``StepRenderer.details``."""
    evaluated = evaluation_details(step_payload(section, "train"), TRAIN_COUNT)
    g = step_payload(section, "guard")
    if not g:
        return evaluated
    if g.get("kernel") == "absent":
        return StepDetails(items=(("guard probe", f"no kernel after `import unsloth`: {g.get('reason')}"),
                                  *evaluated.items), tables=evaluated.tables)
    original = g.get("original")
    replaced = "unknown (no raw fingerprint)" if original is None else ("no (zoo's own)" if original else "yes")
    tables = routes_table(g.get("routes"))
    return StepDetails(items=(("guard probe", f"kernel replaced after `import unsloth`: {replaced}"),
                              *evaluated.items), tables=(*tables, *evaluated.tables))
