"""The static detector on small sources written for these tests (not upstream code)."""

from __future__ import annotations

import textwrap

import pytest

from probes.checks.fused_ce_masked_nan.static import analyze_source

HEAD = """
import torch
class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
"""
TAIL = """
        return hidden_states.sum() / divisor
"""


def src(body: str, extra: str = "") -> str:
    return textwrap.dedent(extra) + HEAD + textwrap.indent(textwrap.dedent(body), " " * 8) + TAIL


def test_unguarded_count_is_vulnerable() -> None:
    v = analyze_source(src("divisor = n_items if n_items is not None else (labels != ignore_index).sum()\n"))
    assert v.verdict == "vulnerable"
    assert v.evidence_line == 8  # HEAD puts the divisor on line 8


@pytest.mark.parametrize("body", [
    "divisor = (labels != ignore_index).sum().clamp(min=1)\n",
    "divisor = (labels != ignore_index).sum()\ndivisor = divisor.clamp_min(1)\n",
    "divisor = max((labels != ignore_index).sum(), 1)\n",
    "divisor = (labels != ignore_index).sum()\n"
    "divisor = torch.where(divisor == 0, torch.ones_like(divisor), divisor)\n",
    "divisor = (labels != ignore_index).sum()\nif divisor == 0:\n    divisor = torch.ones_like(divisor)\n",
    "divisor = (labels != ignore_index).sum()\nif (labels != ignore_index).sum() == 0 and n_items is None:\n"
    "    return hidden_states.sum() * 0\n",
])
def test_guard_shapes_are_fixed(body: str) -> None:
    assert analyze_source(src(body)).verdict == "fixed"


def test_guard_through_a_module_helper() -> None:
    helper = """
    def _at_least_one(x):
        return torch.where(x == 0, torch.ones_like(x), x)
    """
    v = analyze_source(src("divisor = _at_least_one((labels != ignore_index).sum())\n", helper))
    assert v.verdict == "fixed" and "_at_least_one()" in v.reason


def test_helper_that_does_not_guard_is_still_vulnerable() -> None:
    helper = """
    def _as_float(x):
        return x.float()
    """
    assert analyze_source(src("divisor = _as_float((labels != ignore_index).sum())\n", helper)).verdict == "vulnerable"


def test_unrelated_comparison_with_one_is_not_a_guard() -> None:
    body = "divisor = (labels != ignore_index).sum()\nif divisor.numel() != 1:\n    divisor = divisor.ravel()[0]\n"
    assert analyze_source(src(body)).verdict == "vulnerable"


def test_absent_class_and_forward() -> None:
    assert analyze_source("import torch\n").verdict == "absent"
    assert analyze_source("class UnslothFusedLoss:\n    def backward(ctx):\n        pass\n").verdict == "absent"


def test_unknown_shapes() -> None:
    assert analyze_source("def broken(:\n").verdict == "unknown"
    assert analyze_source(src("total = 1\ndivisor = total\n")).verdict == "unknown"
    assert analyze_source(
        "class UnslothFusedLoss:\n    def forward(ctx, x):\n        return x\n").verdict == "unknown"


def test_older_python_syntax_parses() -> None:
    # Sources written for old Pythons (no walrus, % formatting, u'' strings) still parse on 3.10+.
    old = src("divisor = (labels != ignore_index).sum()\nname = u'%s' % 'x'\n")
    assert analyze_source(old).verdict == "vulnerable"
