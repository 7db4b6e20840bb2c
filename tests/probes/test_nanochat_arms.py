"""The nanochat check's static readings on two shapes a contributor writes: an ``if``/``else`` on the reduction
(read arm by arm: the arm a 'mean' loss takes is the one judged), and a loop fix whose logged loss is the
script's EMA, not the loop variable (the lifted code reaches the printed loss). Small sources of our own
making, shaped like nanochat's code, not copied from it."""

from __future__ import annotations

import textwrap

import pytest

from probes.checks.nanochat_sft_masked_nan import static, static_loop
from tests.probes.test_nanochat_static import model

CE = "F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1, reduction={})"
SUM_OVER_ALL = f"{CE.format(repr('sum'))} / targets.numel()"


@pytest.mark.parametrize("body", [
    # the mean arm's call sits deeper than the else arm's (a walk by depth meets the else arm first)
    f"if loss_reduction == 'mean':\n    loss = {SUM_OVER_ALL}\nelse:\n    loss = {CE.format('loss_reduction')}",
    f"if loss_reduction != 'mean':\n    loss = {CE.format('loss_reduction')}\nelse:\n"
    f"    loss_sum = {CE.format(repr('sum'))}\n    loss = loss_sum / targets.numel()",
    f"loss = {SUM_OVER_ALL} if loss_reduction == 'mean' else {CE.format('loss_reduction')}",
    f"B, T = targets.size()\nif loss_reduction in ('mean',):\n    loss = {CE.format(repr('sum'))} / (B * T)\n"
    f"else:\n    loss = {CE.format('loss_reduction')}",
])
def test_the_mean_arm_over_all_positions_is_finite_but_named_a_different_mean(body: str) -> None:
    r = static.analyze_model(model(body))
    assert r["verdict"] == "fixed", r["reason"]
    assert r["reduction"] == "sum" and "all positions" in r["reason"] and "not the mean" in r["reason"]


def test_the_arm_a_mean_loss_takes_is_judged_not_the_first_call() -> None:
    # the 'sum' arm comes first in the source; the 'mean' arm divides by zero valid targets
    body = (f"if loss_reduction == 'sum':\n    loss = {CE.format(repr('sum'))}\nelse:\n"
            f"    loss = {CE.format(repr('mean'))}")
    r = static.analyze_model(model(body))
    assert r["verdict"] == "vulnerable" and r["reduction"] == "mean", r["reason"]


def test_a_mean_arm_over_a_bare_valid_count_is_not_fixed() -> None:
    body = (f"if loss_reduction == 'mean':\n    loss = {CE.format(repr('sum'))} / (targets != -1).sum()\nelse:\n"
            f"    loss = {CE.format('loss_reduction')}")
    assert static.analyze_model(model(body))["verdict"] != "fixed"


def test_our_backports_shape_still_reads_fixed_by_its_floor() -> None:
    body = (f"if loss_reduction == 'mean':\n    flat = targets.view(-1)\n    loss_sum = {CE.format(repr('sum'))}\n"
            f"    loss = loss_sum / (flat != -1).sum().clamp(min=1)\nelse:\n    loss = {CE.format('loss_reduction')}")
    r = static.analyze_model(model(body))
    assert r["verdict"] == "fixed" and "clamp(min=1)" in r["reason"]


SCRIPT = """
import torch
smooth_train_loss = 0
ema_beta = 0.9
while True:
    synchronize()
{pre}
    for micro_step in range(grad_accum_steps):
{body}
        x, y = next(train_loader)
    optimizer.step()
{zero}
    step += 1
    if step > 10:
        total_training_time += dt
{ema}
    debiased_smooth_loss = smooth_train_loss / (1 - ema_beta**(step + 1))
    print0(f"step {{step:05d}} | loss: {{debiased_smooth_loss:.6f}} | dt: {{dt * 1000:.2f}}ms")
"""
SKIP = """
if (y != -1).any():
    loss = model(x, y)
    train_loss = loss.detach()
    loss.backward()
"""
EMA = "smooth_train_loss = ema_beta * smooth_train_loss + (1 - ema_beta) * train_loss.item()"


def script(pre: str = "", body: str = SKIP, zero: str = "model.zero_grad(set_to_none=True)", ema: str = EMA) -> str:
    def ind(s: str, n: int) -> str:
        return textwrap.indent(textwrap.dedent(s).strip("\n"), " " * n)
    return SCRIPT.format(pre=ind(pre, 4), body=ind(body, 8), zero=ind(zero, 4), ema=ind(ema, 4))


def test_the_printed_loss_and_what_it_is_made_of_are_lifted() -> None:
    lifted = static_loop.lift_source(script(ema=f"if train_loss is not None:\n    {EMA}"))
    assert lifted.printed == "debiased_smooth_loss"
    # the EMA's statements read the script's own initial values and the step (the loop variable is the loop's)
    assert {"smooth_train_loss", "ema_beta", "step"} <= lifted.names
    assert "dt" not in lifted.names and "total_training_time" not in lifted.names  # not part of the loss
    assert lifted.constants == {"smooth_train_loss": 0, "ema_beta": 0.9}


def test_statements_just_before_the_loop_are_lifted_with_it() -> None:
    lifted = static_loop.lift_source(script(pre="train_loss = None"))
    ns = {"synchronize": lambda: None}
    exec(lifted.pre, ns)
    assert "train_loss" in ns and ns["train_loss"] is None


def test_a_zero_grad_moved_into_the_loop_lifts_up_to_the_optimizer_step() -> None:
    body = "if (y != -1).any():\n    model.zero_grad(set_to_none=True)\n    loss = model(x, y)\n    loss.backward()"
    lifted = static_loop.lift_source(script(body=body, zero=""))
    assert lifted.printed == "debiased_smooth_loss"


def test_without_a_printed_loss_the_loops_own_variable_stands() -> None:
    text = script().replace('print0(f"step {step:05d} | loss: {debiased_smooth_loss:.6f} | dt: {dt * 1000:.2f}ms")',
                            "pass")
    assert static_loop.lift_source(text).printed is None
