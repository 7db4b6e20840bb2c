"""The evaluation run in the two SFT checks' drill-down (``render.py``): a line, the eval batches, and a NaN
``eval_loss`` that is not the kernel's on a ``stack hazard`` line of its own. Evidence is hand-written."""

from __future__ import annotations

import pytest

from probes.checks.cpu_ce_masked_nan import render as cpu_render
from probes.checks.fused_ce_masked_nan import render as fused_render
from tests.probes.checks.evidence import cpu, evaluation, fused, train

RENDERERS = {"cpu": (cpu_render, cpu), "fused": (fused_render, fused)}


def section(kind: str, ev: dict) -> dict:
    return RENDERERS[kind][1](training=train("clean", kernel_calls=8, masked=["tensor(0)"], evaluation=ev))


@pytest.mark.parametrize("kind", sorted(RENDERERS))
def test_a_nan_from_the_stack_gets_its_own_line_and_the_nan_batch_is_marked(kind: str) -> None:
    d = RENDERERS[kind][0].details(section(kind, evaluation("nan-logged", "stack", loss="nan", masked_loss="nan")))
    items = dict(d.items)
    assert items["stack hazard"] == "evaluation nan-logged stack"
    assert items["evaluation"].startswith("`trainer.evaluate()` after training: nan-logged, eval_loss nan "
                                          "(not from this check's kernel)")
    (table,) = [t for t in d.tables if t.title == "Evaluation run, by eval batch"]
    assert table.headers[2] == "num_items_in_batch"
    assert table.rows[1] == ("2", "0", "None", "not called", "nan")
    assert table.bad == frozenset({(1, 4)})
    assert "guard probe" in items  # the guard line stays


@pytest.mark.parametrize("kind", sorted(RENDERERS))
def test_a_nan_from_the_kernel_is_no_stack_hazard(kind: str) -> None:
    ev = evaluation("nan-logged", "kernel", loss="nan", masked_loss="nan", kernel_loss="nan")
    d = RENDERERS[kind][0].details(section(kind, ev))
    items = dict(d.items)
    assert "stack hazard" not in items and "(from this check's kernel)" in items["evaluation"]
    (table,) = [t for t in d.tables if t.title == "Evaluation run, by eval batch"]
    assert table.rows[1][3] == "None -> nan"


@pytest.mark.parametrize("kind", sorted(RENDERERS))
def test_a_clean_evaluation_has_a_line_and_no_hazard(kind: str) -> None:
    d = RENDERERS[kind][0].details(section(kind, evaluation("clean", count="tensor(0)", kernel_loss=0.0)))
    items = dict(d.items)
    assert "stack hazard" not in items and items["evaluation"].startswith("`trainer.evaluate()` after training: clean")
    assert RENDERERS[kind][0].details(RENDERERS[kind][1]()).tables[-1].title != "Evaluation run, by eval batch"
