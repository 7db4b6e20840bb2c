"""The CPU-backend check's static detector (``cpu_ce_masked_nan/static.py``) on small sources written for these tests.

The shape follows zoo 2026.10.9's ``chunked_linear_cross_entropy`` (``cpu/ops.py``): with no count the divisor is
the label count, and the autograd Function divides by it. ``fixed`` is a promise, so every shape below that
could still divide by zero must read ``vulnerable`` or ``unknown``, never ``fixed``.
"""

from __future__ import annotations

import textwrap

import pytest

from probes.checks.cpu_ce_masked_nan.static import analyze_source

BEFORE = """
import torch
import torch.nn.functional as F
"""
HEAD = """
def chunked_linear_cross_entropy(hidden, weight, labels, num_items_in_batch=None, ignore_index=-100):
    shift_labels = labels[..., 1:].reshape(-1)
    if num_items_in_batch is None:
"""
TAIL = """
    else:
        divisor = num_items_in_batch
    return _Chunked.apply(hidden, weight, shift_labels, float(divisor))
"""


def src(branch: str, after: str = "", before: str = "", module: str = "") -> str:
    fn = HEAD + textwrap.indent(textwrap.dedent(branch), " " * 8)
    fn = fn + TAIL if not after else fn + TAIL.replace("    return", textwrap.indent(textwrap.dedent(after), " " * 4)
                                                      + "    return")
    return BEFORE + textwrap.dedent(before) + fn + textwrap.dedent(module)


FLOORED = "divisor = (shift_labels != ignore_index).sum().clamp(min=1).item()\n"


def test_the_zoo_shape_with_nan_is_vulnerable() -> None:
    v = analyze_source(src(FLOORED + "if (shift_labels != ignore_index).sum().item() == 0:\n"
                                     "    divisor = float('nan')\n"))
    assert v["verdict"] == "vulnerable"


@pytest.mark.parametrize("branch", [
    FLOORED,
    "divisor = max((shift_labels != ignore_index).sum().item(), 1)\n",
    "divisor = torch.clamp((shift_labels != ignore_index).sum(), min=1.0).item()\n",
])
def test_a_floor_of_at_least_one_is_fixed(branch: str) -> None:
    v = analyze_source(src(branch))
    assert v["verdict"] == "fixed", v["reason"]


@pytest.mark.parametrize(("name", "kwargs"), [
    # 1e-8 is 0 in fp16, and 0.5 is 0 after int() or in the integer count's dtype.
    ("eps floor", {"branch": "divisor = (shift_labels != ignore_index).sum().float().clamp(min=1e-8).item()\n"}),
    ("half floor under int", {"branch": "divisor = int(max((shift_labels != ignore_index).sum().item(), 0.5))\n"}),
    ("clamp max below min", {"branch": "divisor = (shift_labels != ignore_index).sum().clamp(min=1, max=0).item()\n"}),
    ("floor of another value inside", {"branch": "divisor = (shift_labels != ignore_index).sum().item() + "
                                                 "0 * hidden.clamp(min=1).sum().item()\n"}),
    ("reset after the branch", {"branch": FLOORED, "after": "divisor = (shift_labels != ignore_index).sum().item()\n"}),
    ("zeroed in place after the branch", {"branch": "divisor = (shift_labels != ignore_index).sum().clamp(min=1)\n",
                                          "after": "divisor.zero_()\n"}),
    ("another count reaches apply", {"branch": FLOORED, "module": "", "after": ""}),
    ("rebound at module level", {"branch": FLOORED, "module": "\nchunked_linear_cross_entropy = _unguarded\n"}),
    ("setattr on the module", {"branch": FLOORED,
                               "module": "\nimport sys\nsetattr(sys.modules[__name__], 'chunked_linear_cross_entropy', "
                                         "_unguarded)\n"}),
    ("decorated", {"branch": FLOORED, "before": "\ndef _swap(f):\n    return _unguarded\n"}),
    ("global reset", {"branch": "global divisor\n" + FLOORED}),
])
def test_shapes_that_may_still_divide_by_zero_are_never_fixed(name: str, kwargs: dict[str, str]) -> None:
    text = src(**kwargs)
    if name == "another count reaches apply":
        text = text.replace("float(divisor))", "float((shift_labels != ignore_index).sum().item()))")
    if name == "decorated":
        text = text.replace("\ndef chunked_linear_cross_entropy", "\n@_swap\ndef chunked_linear_cross_entropy")
    v = analyze_source(text)
    assert v["verdict"] in ("vulnerable", "unknown"), f"{name}: {v['reason']}"
    assert v["verdict"] == "unknown" and v["reason"], name
