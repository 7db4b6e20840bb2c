"""The runtime detector's count forms (issue 20, part 4): every way a caller hands zoo a zero count.

``judge_forms`` is pure: hand-written outcomes per form in, the verdict and its words out. ``runtime.run``
on real zoos (2026.9.3, a zoo fixed for None only) is in tests/integration/test_none_only_zoo.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from probes.checks.fused_ce_masked_nan import runtime

FINITE = {"loss": 0.0, "loss_finite": True, "grads_finite": True}
NAN = {"loss": "nan", "loss_finite": False, "grads_finite": True}


def raised(text: str = "RuntimeError: boom") -> dict[str, Any]:
    return {"error": text, "exception": text.split(":", maxsplit=1)[0], "loss": None, "loss_finite": False,
            "grads_finite": False}


def forms(**kw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    names = {"none": "None", "zero": "0", "zero_f": "0.0", "t0": "tensor(0)", "t1": "tensor([0])",
             "five": "5", "five_f": "5.0", "t5": "tensor(5)", "t15": "tensor([5])"}
    out = dict.fromkeys(names.values(), FINITE)
    out.update({names[k]: v for k, v in kw.items()})
    return out


def test_every_form_finite_is_fixed() -> None:
    verdict, reason = runtime.judge_forms(forms())
    assert verdict == "fixed"
    assert reason == "all-masked batch: finite for n_items=None, 0, 0.0, tensor(0), tensor([0]) (loss 0.0)"


def test_a_zoo_fixed_for_none_only_is_vulnerable_and_the_reason_names_the_forms() -> None:
    verdict, reason = runtime.judge_forms(forms(zero=NAN, zero_f=NAN, t0=NAN, t1=NAN))
    assert verdict == "vulnerable"
    assert reason == ("all-masked batch: NaN for n_items=0, 0.0, tensor(0), tensor([0]) (loss nan, gradients "
                      "finite); finite for None")


def test_nan_for_none_only_is_vulnerable_too() -> None:
    verdict, reason = runtime.judge_forms(forms(none=NAN))
    assert verdict == "vulnerable" and "NaN for n_items=None" in reason and "finite for 0, 0.0" in reason


def test_a_raise_on_a_zero_the_positive_form_survives_counts_as_vulnerable() -> None:
    # A kernel that raises on the trainer's tensor(0) crashes the user's run: never counted as finite.
    verdict, reason = runtime.judge_forms(forms(t0=raised("ValueError: zero count")))
    assert verdict == "vulnerable"
    assert "raised for n_items=tensor(0) (ValueError: zero count)" in reason and "counted as vulnerable" in reason


def test_a_form_the_zoo_never_takes_is_left_out_and_named() -> None:
    # Zoo 2026.9.3 and 2026.10.9 both refuse a one-element [n] count, zero or not: not about the zero.
    verdict, reason = runtime.judge_forms(forms(t1=raised(), t15=raised()))
    assert verdict == "fixed"
    assert "not judged: n_items=tensor([0]) (raises with a positive count too" in reason
    verdict, _ = runtime.judge_forms(forms(t1=raised(), t15=raised(), zero=NAN))
    assert verdict == "vulnerable"


def test_a_raise_on_none_counts_as_vulnerable() -> None:
    verdict, reason = runtime.judge_forms(forms(none=raised("TypeError: n_items")))
    assert verdict == "vulnerable" and "raised for n_items=None (TypeError: n_items)" in reason


def test_non_finite_gradients_alone_are_not_finite() -> None:
    verdict, reason = runtime.judge_forms(forms(t0={"loss": 0.0, "loss_finite": True, "grads_finite": False}))
    assert verdict == "vulnerable" and "non-finite for n_items=tensor(0) (loss 0.0, gradients non-finite)" in reason


def test_a_control_that_is_not_finite_is_reported() -> None:
    verdict, reason = runtime.judge_forms(forms(t5=NAN))
    assert verdict == "fixed" and "control n_items=tensor(5) is not finite (loss nan)" in reason


def test_judging_needs_a_zero_form() -> None:
    with pytest.raises(ValueError):
        runtime.judge_forms({"tensor(5)": FINITE})
