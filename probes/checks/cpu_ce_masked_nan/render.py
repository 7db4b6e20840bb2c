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

from probes.checks.capabilities import StepDetails, guard_then_evaluation

# The count the CPU backend's trainer hands the kernel, as this check's training steps record it (``train.py``).
TRAIN_COUNT = "num_items_in_batch"


def _guard_line(g: dict[str, Any]) -> str:
    if g.get("kernel") == "absent":
        return f"no kernel after `import unsloth`: {g.get('reason')}"
    original = g.get("original")
    replaced = "unknown (no raw fingerprint)" if original is None else ("no (zoo's own)" if original else "yes")
    return f"kernel replaced after `import unsloth`: {replaced}"


def details(section: dict[str, Any]) -> StepDetails:
    """See ``StepRenderer.details``."""
    return guard_then_evaluation(section, TRAIN_COUNT, _guard_line)
