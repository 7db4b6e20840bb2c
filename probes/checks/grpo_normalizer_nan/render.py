"""The drill-down of this check's own step payloads, for every report format (contract: ``StepRenderer``).

Stdlib only (``reports/`` imports it). From the ``guard`` step: how unsloth
hands the count to zoo (as read, or changed by a guard), whether zoo's
function is still its own, and the all-masked call on that route; from
``unsloth_train``: the GRPO steps through unsloth's generated trainer.
"""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import StepDetails, routes_table, step_payload

# The count GRPO's trainer hands zoo's loss, as this check's training run records it (``train.py``).
TRAIN_COUNT = "num_items_in_batch"


def details(section: dict[str, Any]) -> StepDetails:
    """See ``StepRenderer.details``."""
    g = step_payload(section, "guard")
    if not g:
        return StepDetails()
    if g.get("kernel") == "absent":
        return StepDetails(items=(("guard probe", f"no grpo_compute_loss after `import unsloth`: {g.get('reason')}"),))
    h = g.get("handoff") if isinstance(g.get("handoff"), dict) else {}
    if not h.get("found"):
        hand = f"not found ({h.get('reason')}); the count reaches zoo as it came"
    elif h.get("plain"):
        hand = "the count as read from the batch"
    else:
        hand = "changed: " + "; ".join([*(h.get("statements") or []), *(f"passes {p}" for p in h.get("passes") or [])])
    original = g.get("original")
    replaced = "unknown (no raw fingerprint)" if original is None else ("no (zoo's own)" if original else "yes")
    items = [("count hand-off", hand), ("zoo's grpo_compute_loss replaced", replaced),
             ("count zoo receives for tensor(0.)", str(g.get("handed_zero")))]
    u = step_payload(section, "unsloth_train")
    if u:
        seen = ("" if u.get("outcome") in ("n/a", "error") else
                f" (trainer sent {', '.join(map(str, u.get('masked_inputs') or [])) or '-'}, "
                f"loss got {', '.join(map(str, u.get('handed_inputs') or [])) or '-'})")
        items.append(("GRPO steps through UnslothGRPOTrainer", f"{u.get('reason') or u.get('outcome')}{seen}"))
    return StepDetails(items=tuple(items), tables=routes_table(g.get("routes")))
