"""A check's own step details, drawn through the check's step renderer (``render.py`` in its folder).

The report knows each check by id; the registry (``probes.checks``) finds the
check's renderer, a stdlib-only module that turns the check's step payloads
into :class:`~probes.checks.StepDetails` (items and tables, text only), which
each format lays out in a cell's drill-down. The training run's per-step
table is the same for every check (``probes/training.py`` records the same
keys) except the count the trainer handed the kernel, whose key the renderer
names (``TRAIN_COUNT``). A check that declares no renderer gets an explicit
``n/a`` item with the registry's reason, never a silent gap, and its training
table is replaced by that reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from probes import checks
from probes.checks import StepDetails, StepRenderer
from reports.render.view import result_of, section_of, step_of, steps_of

# The per-step columns every training run records (probes/training.py); the count column goes third.
TRAIN_BEFORE = (("step", "step"), ("labels left", "labels_left"))
TRAIN_AFTER = (("raw loss", "raw_loss"), ("logged loss", "logged_loss"), ("grad norm", "grad_norm"),
               ("non-finite params", "nonfinite_params"))


def renderer_of(check_id: str) -> StepRenderer | None:
    """The check's step renderer, or None when it declares none (or is not registered in this tree)."""
    return None if check_id not in checks.REGISTRY else checks.capability(check_id, "render")  # type: ignore[no-any-return]


def lacks_renderer(check_id: str) -> str:
    return checks.lacks(check_id, "render") if check_id in checks.REGISTRY else \
        f"n/a: check {check_id} is not registered here"


def check_details(entry: dict[str, Any], check_id: str) -> StepDetails:
    """What the check's renderer makes of its steps in this cell; nothing for a cell without its steps."""
    if not steps_of(entry, check_id):
        return StepDetails()
    r = renderer_of(check_id)
    if r is None:
        return StepDetails(items=(("step details", lacks_renderer(check_id)),))
    return r.details(section_of(entry, check_id))


def number(x: Any) -> str:
    """A number of a training table: 4 significant digits; ``-`` for none; anything else as its text."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, list):  # one value per micro-batch of a step
        return ", ".join(number(v) for v in x) or "-"
    return str(x)


def kernels_text(kernels: Any) -> str:
    k = kernels if isinstance(kernels, dict) else {}
    return ", ".join(f"{name}×{count}" for name, count in k.items()) if k else "-"


@dataclass(frozen=True)
class TrainTable:
    """The training runs of a check's ``train`` step, each with its per-step rows (as text)."""

    headers: list[str] = field(default_factory=list)
    runs: list[tuple[dict[str, Any], list[list[str]]]] = field(default_factory=list)
    na: str = ""  # set when the check declares no renderer: the reason, in place of the rows


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def train_table(entry: dict[str, Any], check_id: str) -> TrainTable:
    """The check's training runs with their per-step rows; ``na`` instead of rows without a renderer."""
    runs = [r for r in _list(result_of(step_of(entry, check_id, "train")).get("runs")) if isinstance(r, dict)]
    if not runs:
        return TrainTable()
    r = renderer_of(check_id)
    if r is None:
        return TrainTable(runs=[(run, []) for run in runs], na=lacks_renderer(check_id))
    columns = [*TRAIN_BEFORE, (r.TRAIN_COUNT, r.TRAIN_COUNT), *TRAIN_AFTER]
    out = []
    for run in runs:
        steps = [s for s in _list(run.get("steps")) if isinstance(s, dict)]
        out.append((run, [[*(number(s.get(key)) for _, key in columns), kernels_text(s.get("kernels"))]
                          for s in steps]))
    return TrainTable([*(head for head, _ in columns), "kernels"], out)
