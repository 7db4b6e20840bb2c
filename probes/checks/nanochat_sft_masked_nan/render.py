"""The drill-down of this check's own step payloads, for every report format (contract: ``StepRenderer``).

Stdlib only (``reports/`` imports it). What a maintainer reads before merging
a fix: where the tree computes the loss and what its loop does with a micro-
batch that has no valid target (the static reading), what ``GPT.forward``
returns for one (the runtime detector), and per ``chat_sft.py`` run: does it
train, what it logged, where it crashed.
"""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import DetailTable, StepDetails, as_dict, step_payload

# The count this check's training runs record per micro-batch (``train.py``): the targets that are not -1.
TRAIN_COUNT = "valid_targets"


def _losses(run: dict[str, Any], limit: int = 6) -> str:
    lines = [str(x) for x in run.get("loss_lines") or []]
    shown = lines[:limit] + (["…"] if len(lines) > limit else [])
    return "; ".join(shown) or "-"


def details(section: dict[str, Any]) -> StepDetails:
    """See ``StepRenderer.details``."""
    static = as_dict(section.get("static"))
    loop = as_dict(static.get("loop"))
    items: list[tuple[str, str]] = []
    if static:
        items.append(("model's loss (static)", f"{static.get('verdict')}: {static.get('reason')}"))
    if loop:
        items.append(("SFT loop (static)", f"{loop.get('verdict')}: {loop.get('reason')}"))
    rt = step_payload(section, "runtime")
    if rt:
        items.append(("GPT.forward, every target -1", str(rt.get("reason") or rt.get("verdict"))))
    train = step_payload(section, "train")
    runs = [as_dict(r) for r in train.get("runs") or []]
    rows, bad = [], set()
    for i, r in enumerate(runs):
        crash = as_dict(r.get("crash"))
        where = f"{crash.get('type')}: {crash.get('message')} (step {crash.get('at_step')})" if crash else "-"
        first = r.get("first_nan_step")
        rows.append((str(r.get("name")), str(r.get("gradient_accumulation_steps")), str(r.get("outcome")),
                     "-" if first is None else str(first), where[:200], _losses(r)))
        if r.get("outcome") != "clean":
            bad.add((i, 2))
    tables = (DetailTable("chat_sft.py runs (CPU, offline, tiny fixtures)",
                          ("run", "GA", "outcome", "first NaN step", "crash", "logged loss lines"),
                          tuple(rows), code=frozenset({5}), bad=frozenset(bad)),) if rows else ()
    return StepDetails(items=tuple(items), tables=tables)
