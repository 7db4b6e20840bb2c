"""The drill-down of this check's own step payloads, for every report format (contract: ``StepRenderer``).

Stdlib only (``reports/`` imports it). From the ``guard`` step: whether
zoo's forward was replaced after ``import unsloth`` and whether the
all-masked call was finite, with the call's outcome by route. From the
``train`` step: the evaluation run after training, by eval batch, with a NaN
``eval_loss`` that is not the kernel's named a stack hazard on its own line.
"""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import StepDetails, as_dict, guard_then_evaluation, yes_no

# The count a trainer hands the loss, as this check's training steps record it (``train.py``).
TRAIN_COUNT = "num_items_in_batch"


def _guard_line(g: dict[str, Any]) -> str:
    original = as_dict(g.get("forward")).get("original")
    replaced = "unknown" if original is None else ("no (zoo's own)" if original else "yes")
    return (f"forward replaced after `import unsloth`: {replaced}; "
            f"all-masked call finite: {yes_no(g.get('all_masked_finite'))}")


def details(section: dict[str, Any]) -> StepDetails:
    """See ``StepRenderer.details``."""
    return guard_then_evaluation(section, TRAIN_COUNT, _guard_line)
