"""The drill-down of this check's own step payloads, for every report format (contract: ``StepRenderer``).

Stdlib only (``reports/`` imports it). What a maintainer reads before merging
a fix: where the tree computes the loss and what its loop does with a micro-
batch that has no valid target (the static reading), what ``GPT.forward``
returns for one (the runtime detector), and per ``chat_sft.py`` run: does it
train, what it logged, where it crashed.
"""

from __future__ import annotations

import re
from typing import Any

from probes.checks.capabilities import DetailTable, StepDetails, as_dict, step_payload

# The count this check's training runs record per micro-batch (``train.py``): the targets that are not -1.
TRAIN_COUNT = "valid_targets"


def _losses(run: dict[str, Any], limit: int = 8) -> str:
    """The logged ``loss:`` values, in order (each line's own text where it has none)."""
    values = []
    for line in (str(x) for x in run.get("loss_lines") or []):
        m = re.search(r"loss:\s*([^\s|]+)", line)
        values.append(m.group(1) if m else line[:40])
    return ", ".join(values[:limit] + (["…"] if len(values) > limit else [])) or "-"


# The suite's tests of what every other caller of GPT.forward sees (a fix must leave them as they were).
OTHER_CALLERS = ("n1-partial-reference", "n2-normal-backward", "n5-other-reductions")


def maintainer(section: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """What a maintainer needs before merging a fix: does the run train, does the logged loss stay finite,
    what changes for every other caller of the model."""
    runs = [as_dict(r) for r in step_payload(section, "train").get("runs") or []]
    trains, finite = [], []
    for r in runs:
        crash = as_dict(r.get("crash"))
        steps = len(r.get("loss_lines") or [])
        trains.append(f"{r.get('name')}: " + (f"no, {crash.get('type')} at step {crash.get('at_step')} "
                                              f"({crash.get('where') or 'chat_sft.py'})" if crash
                                              else f"yes, {steps} logged steps"))
        first = r.get("first_nan_step")
        finite.append(f"{r.get('name')}: " + ("yes" if first is None else f"no, NaN from step {first}"))
    tests = {t.get("id"): t for t in (as_dict(x) for x in step_payload(section, "behavior").get("tests") or [])}
    changed = [f"{tid}: {tests[tid].get('reason')}" for tid in OTHER_CALLERS
               if as_dict(tests.get(tid)).get("outcome") == "fail"]
    ran = [tid for tid in OTHER_CALLERS if as_dict(tests.get(tid)).get("outcome") in ("pass", "fail")]
    others = ("; ".join(changed)[:400] if changed else
              f"unchanged ({', '.join(t.split('-')[0] for t in ran)} pass)" if ran else "not tested")
    out = []
    if runs:
        out += [("does chat_sft.py train", "; ".join(trains)), ("logged loss finite", "; ".join(finite))]
    if tests:
        out.append(("other callers of GPT.forward", others))
    return tuple(out)


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
                          ("run", "GA", "outcome", "first NaN step", "crash", "logged loss, step by step"),
                          tuple(rows), code=frozenset({5}), bad=frozenset(bad)),) if rows else ()
    return StepDetails(items=(*maintainer(section), *items), tables=tables)
