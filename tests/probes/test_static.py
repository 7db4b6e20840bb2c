"""The static detector's API on small sources written for these tests (not upstream code).

The broad behaviour (which shapes are vulnerable, fixed, absent or unknown) is pinned by the corpus in
``test_static_corpus.py``; this module covers the entry points, evidence lines, module readers and the
installed-package path.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from probes.checks.fused_ce_masked_nan.static import (
    CE_PATH,
    StaticVerdict,
    analyze_files,
    analyze_source,
    detect_installed,
    installed_reader,
    locate_installed,
)

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
    "divisor = (labels != ignore_index).sum()\nif (labels != ignore_index).sum() == 0:\n"
    "    return hidden_states.sum() * 0\n",
])
def test_guard_shapes_are_fixed(body: str) -> None:
    assert analyze_source(src(body)).verdict == "fixed"


def test_guard_that_holds_only_under_another_condition_abstains() -> None:
    # With n_items given and no label kept, the branch does not return and the count is still the divisor.
    body = ("divisor = (labels != ignore_index).sum()\nif (labels != ignore_index).sum() == 0 and n_items is None:\n"
            "    return hidden_states.sum() * 0\n")
    v = analyze_source(src(body))
    assert v.verdict == "unknown" and "combined with other conditions" in v.reason


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


def test_verdict_serialises() -> None:
    v = analyze_source(src("divisor = (labels != ignore_index).sum()\n"), CE_PATH)
    assert isinstance(v, StaticVerdict)
    assert v.to_dict() == {"verdict": "vulnerable", "reason": v.reason, "file": CE_PATH, "forward_line": 5,
                           "evidence_line": 8}


def test_read_module_follows_a_helper_and_is_optional() -> None:
    text = src("divisor = at_least_one((labels != ignore_index).sum())\n",
               "from unsloth_zoo.numeric import at_least_one\n")
    helper = "def at_least_one(x):\n    return x.clamp(min=1)\n"
    asked: list[str] = []

    def read(name: str) -> str | None:
        asked.append(name)
        return helper if name == "unsloth_zoo.numeric" else None

    assert analyze_source(text, read_module=read).verdict == "fixed"
    assert "unsloth_zoo.numeric" in asked
    without = analyze_source(text)  # the helper cannot be read: abstain, never guess
    assert without.verdict == "unknown" and "unsloth_zoo.numeric" in without.reason


def test_other_distributions_are_never_read() -> None:
    asked: list[str] = []

    def read(name: str) -> str | None:
        asked.append(name)
        return None

    text = src("divisor = at_least_one((labels != ignore_index).sum())\n", "from unsloth.numeric import at_least_one\n")
    assert analyze_source(text, read_module=read).verdict == "unknown"
    assert not any(n.startswith("unsloth.") for n in asked)


def test_analyze_files_without_the_module_is_absent() -> None:
    assert analyze_files({"unsloth_zoo/__init__.py": ""}).verdict == "absent"
    vuln = src("divisor = (labels != ignore_index).sum()\n")
    assert analyze_files({CE_PATH: vuln}).verdict == "vulnerable"


def _fake_zoo(root: Path, ce_text: str, extra: dict[str, str]) -> None:
    pkg = root / "unsloth_zoo"
    (pkg / "fused_losses").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the detector must not import zoo')\n")
    (pkg / "fused_losses" / "__init__.py").write_text("")
    (pkg / "fused_losses" / "cross_entropy_loss.py").write_text(ce_text)
    for rel, text in extra.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_installed_reader_maps_modules_and_packages(tmp_path: Path) -> None:
    _fake_zoo(tmp_path, "x = 1\n", {"unsloth_zoo/utils/__init__.py": "y = 2\n", "unsloth_zoo/utils/num.py": "z = 3\n"})
    read = installed_reader([tmp_path / "unsloth_zoo"])
    assert read("unsloth_zoo.fused_losses.cross_entropy_loss") == "x = 1\n"
    assert read("unsloth_zoo.utils") == "y = 2\n"
    assert read("unsloth_zoo.utils.num") == "z = 3\n"
    assert read("unsloth_zoo.nothing") is None
    assert read("torch") is None


def test_detect_installed_reads_files_without_importing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "unsloth_zoo" in sys.modules:
        pytest.skip("unsloth_zoo is already imported in this process")
    text = src("divisor = at_least_one((labels != ignore_index).sum())\n",
               "from ..numeric import at_least_one\n")
    _fake_zoo(tmp_path, text, {"unsloth_zoo/numeric.py": "def at_least_one(x):\n    return max(x, 1)\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    assert locate_installed() == tmp_path / "unsloth_zoo" / "fused_losses" / "cross_entropy_loss.py"
    v = detect_installed()
    assert v.verdict == "fixed", v.reason
    assert "unsloth_zoo" not in sys.modules


def test_older_python_syntax_parses() -> None:
    # Sources written for old Pythons (no walrus, % formatting, u'' strings) still parse on 3.10+.
    old = src("divisor = (labels != ignore_index).sum()\nname = u'%s' % 'x'\n")
    assert analyze_source(old).verdict == "vulnerable"


# ------------------------------------------------------------------ the caller's count (issue 20, part 4)

def test_a_guard_for_the_none_case_only_leaves_the_callers_count_open() -> None:
    # zoo's trainer sends num_items_in_batch = tensor(0) for a fully masked step: n_items must be guarded too.
    body = "divisor = n_items if n_items is not None else (labels != ignore_index).sum().clamp(min=1)\n"
    v = analyze_source(src(body))
    assert v.verdict == "vulnerable"
    assert v.reason.startswith("the caller's count (parameter 'n_items', divided by whenever it is given) reaches "
                               "the division at line 10 in forward()")
    assert v.evidence_line == 10  # the division: the parameter has no line of its own


def test_a_guard_after_the_choice_covers_both() -> None:
    v = analyze_source(src("divisor = n_items if n_items is not None else (labels != ignore_index).sum()\n"
                           "divisor = divisor.clamp(min=1)\n"))
    assert v.verdict == "fixed"
    assert v.reason.startswith("the label count and the caller's count (parameter 'n_items') reach the division")


def test_a_parameter_divided_by_on_its_own_is_not_a_count() -> None:
    # ``scaling`` is divided by as given, but it never stands in for the label count: not judged as one.
    body = "divisor = (labels != ignore_index).sum().clamp(min=1)\ndivisor = divisor * 1\n"
    text = src(body).replace("return hidden_states.sum() / divisor",
                             "return hidden_states.sum() / (labels != ignore_index).sum().clamp(min=1) / n_items")
    assert analyze_source(text).verdict == "fixed"


def test_a_none_test_on_a_parameter_that_is_never_a_divisor_is_not_a_count() -> None:
    body = ("divisor = (labels != ignore_index).sum().clamp(min=1)\n"
            "if mask is None:\n    return hidden_states.sum() / divisor\n")
    v = analyze_source(src(body))
    assert v.verdict == "fixed" and "caller's count" not in v.reason


def test_n_items_divided_on_its_own_branch_is_found_through_its_none_test() -> None:
    body = ("if n_items is None:\n    return hidden_states.sum() / (labels != ignore_index).sum().clamp(min=1)\n"
            "divisor = n_items\n")
    v = analyze_source(src(body))
    assert v.verdict == "vulnerable" and "parameter 'n_items'" in v.reason
    guarded = analyze_source(src(body.replace("divisor = n_items\n", "divisor = n_items.clamp(min=1)\n")))
    assert guarded.verdict == "fixed", guarded.reason
