"""The nanochat check's static readings (model loss and SFT loop) on small sources written for these tests.

The snippets are shaped like the code they stand for (a GPT class whose
forward computes a cross-entropy over ignore_index -1; a script with a
micro-step loop), not copied from it.
"""

from __future__ import annotations

import textwrap

import pytest

from probes.checks.nanochat_sft_masked_nan import static, static_loop

MODEL = """
import torch.nn.functional as F

class GPT:
    def forward(self, idx, targets=None, loss_reduction='mean'):
        logits = self.head(idx)
        if targets is not None:
{body}
            return loss
        return logits
"""


def model(body: str) -> str:
    return MODEL.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 12))


PLAIN = "loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1, reduction=loss_reduction)"


def test_plain_mean_loss_is_vulnerable() -> None:
    r = static.analyze_model(model(PLAIN))
    assert r["verdict"] == "vulnerable"
    assert r["reduction"] == "mean" and r["reason"].startswith("nanochat/gpt.py:")
    assert f":{r['line']}:" in r["reason"]


def test_presence_test_is_not_a_guard() -> None:
    # `if targets is not None` decides training vs inference, not whether any target is valid
    assert static.analyze_model(model(PLAIN))["verdict"] == "vulnerable"


def test_a_sum_divided_by_a_floored_count_under_another_name_is_fixed() -> None:
    # our backport's shape: the 'sum' loss kept under its own name, then divided by max(count, 1)
    r = static.analyze_model(model("""
        flat = targets.view(-1)
        loss_sum = F.cross_entropy(logits.view(-1, logits.size(-1)), flat, ignore_index=-1, reduction='sum')
        loss = loss_sum / (flat != -1).sum().clamp(min=1)
    """))
    assert r["verdict"] == "fixed" and "clamp(min=1)" in r["reason"]


def test_a_sum_divided_by_a_bare_count_is_not_called_fixed() -> None:
    # the same without the floor is still 0 / 0 on an all -1 batch: the detector must not take any division
    r = static.analyze_model(model("""
        flat = targets.view(-1)
        loss_sum = F.cross_entropy(logits.view(-1, logits.size(-1)), flat, ignore_index=-1, reduction='sum')
        loss = loss_sum / (flat != -1).sum()
    """))
    assert r["verdict"] != "fixed"


def test_constant_fallback_is_fixed_but_has_no_grad_fn() -> None:
    r = static.analyze_model(model("""
        keep = targets != -1
        if keep.any():
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        else:
            loss = logits.new_tensor(0.0)
    """))
    assert r["verdict"] == "fixed"
    assert r["fallback"]["kind"] == "constant" and r["fallback"]["grad_fn"] is False
    assert "no grad_fn" in r["reason"]


def test_graph_keeping_fallback_is_fixed() -> None:
    r = static.analyze_model(model("""
        n_valid = (targets >= 0).sum()
        if n_valid > 0:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        else:
            loss = logits.sum() * 0.0
    """))
    assert r["verdict"] == "fixed" and r["fallback"]["kind"] == "expression"


def test_floored_count_after_a_sum_is_fixed() -> None:
    r = static.analyze_model(model("""
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1, reduction='sum')
        loss = loss / (targets != -1).sum().clamp(min=1)
    """))
    assert r["verdict"] == "fixed"


def test_nan_to_num_afterwards_is_fixed() -> None:
    r = static.analyze_model(model(PLAIN + "\nloss = torch.nan_to_num(loss, nan=0.0)"))
    assert r["verdict"] == "fixed"


def test_sum_without_a_guard_is_unknown() -> None:
    r = static.analyze_model(model("loss = F.cross_entropy(logits, targets, ignore_index=-1, reduction='sum')"))
    assert r["verdict"] == "unknown"


def test_loss_in_a_helper_is_found() -> None:
    text = """
import torch.nn.functional as F

def masked_ce(logits, targets):
    return F.cross_entropy(logits, targets, ignore_index=-1)

class GPT:
    def forward(self, idx, targets=None):
        return masked_ce(self.head(idx), targets)
"""
    r = static.analyze_model(text)
    assert r["verdict"] == "vulnerable" and r["function"] == "masked_ce"


@pytest.mark.parametrize("text", ["class GPT:\n    def forward(self, x):\n        return x\n", "def f(:\n",
                                  "class Other:\n    pass\n"])
def test_unreadable_or_lossless_sources_abstain(text: str) -> None:
    assert static.analyze_model(text)["verdict"] == "unknown"


LOOP = """
import torch
while True:
    for micro_step in range(grad_accum_steps):
{body}
        x, y = next(train_loader)
    optimizer.step()
    model.zero_grad(set_to_none=True)
"""


def loop(body: str) -> str:
    return LOOP.format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


def test_plain_loop_is_unguarded() -> None:
    r = static_loop.analyze_loop(loop("""
        loss = model(x, y)
        train_loss = loss.detach()
        loss = loss / grad_accum_steps
        loss.backward()
    """))
    assert r["verdict"] == "unguarded" and "loss / grad_accum_steps" in r["normalization"]


def test_skip_after_the_forward_logs_the_models_loss() -> None:
    r = static_loop.analyze_loop(loop("""
        loss = model(x, y)
        train_loss = loss.detach()
        usable = (y != -1).any()
        if usable:
            (loss / grad_accum_steps).backward()
    """))
    assert r["verdict"] == "guarded" and not r["skips_forward"]
    assert r["logs"]["before_guard"] is True
    assert r["optimizer"]["unconditional"] is True


def test_skip_before_the_forward_logs_the_constant() -> None:
    r = static_loop.analyze_loop(loop("""
        if (y >= 0).sum() > 0:
            loss = model(x, y)
            train_loss = loss.detach()
            loss.backward()
        else:
            train_loss = torch.zeros(())
    """))
    assert r["verdict"] == "guarded" and r["skips_forward"]
    assert r["logs"]["masked_value"] == "torch.zeros(())"


def test_continue_is_a_skip() -> None:
    r = static_loop.analyze_loop(loop("""
        if not (y != -1).any():
            continue
        loss = model(x, y)
        loss.backward()
    """))
    assert r["verdict"] == "guarded"


def test_no_loop_abstains() -> None:
    assert static_loop.analyze_loop("loss = model(x, y)\nloss.backward()\n")["verdict"] == "unknown"


def test_lifted_loop_names_what_the_harness_must_provide() -> None:
    lifted = static_loop.lift_source(loop("""
        loss = model(x, y)
        train_loss = loss.detach()
        loss.backward()
    """))
    assert lifted.logged == "train_loss"
    assert {"model", "x", "y", "grad_accum_steps", "train_loader", "optimizer"} <= lifted.names
    assert "loss" not in lifted.names and "micro_step" not in lifted.names


def test_a_loop_with_no_zero_grad_after_it_cannot_be_lifted() -> None:
    with pytest.raises(static_loop.NotLiftable):
        static_loop.lift_source("for i in range(grad_accum_steps):\n    loss.backward()\n")


# Fixes written in other shapes (a contributor's, not ours): each must read as fixed, or at least abstain,
# never as vulnerable (the runtime detector would then disagree and the cell be an error).
CE = "F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1{})"


@pytest.mark.parametrize(("body", "words"), [
    (f"loss = {CE.format(', reduction=' + repr('sum'))} / (targets != -1).sum().clamp(min=1)",
     "divided by a floored count"),
    (f"loss = {CE.format('')} if (targets != -1).any() else logits.sum() * 0", "only when `(targets != -1).any()`"),
    (f"loss = logits.sum() * 0 if (targets == -1).all() else {CE.format('')}", "only when `not ((targets == -1)"),
    (f"if (targets == -1).all():\n    return logits.sum() * 0.0\nloss = {CE.format('')}", "before it, when"),
    (f"if (targets == -1).all():\n    loss = logits.sum() * 0.0\nelse:\n    loss = {CE.format('')}",
     "only when `not ((targets == -1).all())`"),
    (f"loss = torch.nan_to_num({CE.format('')}, nan=0.0)", "passed through nan_to_num"),
])
def test_a_fix_in_another_shape_is_fixed(body: str, words: str) -> None:
    r = static.analyze_model(model(body))
    assert r["verdict"] == "fixed", r["reason"]
    assert words in r["reason"]


def test_an_early_constant_return_is_fixed_without_a_grad_fn() -> None:
    body = f"if not (targets != -1).any():\n    return torch.zeros(())\nloss = {CE.format('')}"
    r = static.analyze_model(model(body))
    assert r["verdict"] == "fixed" and r["fallback"]["grad_fn"] is False


@pytest.mark.parametrize("body", [
    # a one-line sum over a bare count is still 0 / 0
    f"loss = {CE.format(', reduction=' + repr('sum'))} / (targets != -1).sum()",
    # an early return on the reduction, not on the targets' values
    f"if loss_reduction == 'none':\n    return logits.sum() * 0\nloss = {CE.format('')}",
])
def test_what_only_looks_like_a_fix_is_not_fixed(body: str) -> None:
    assert static.analyze_model(model(body))["verdict"] != "fixed"


def test_a_test_of_the_targets_it_does_not_follow_makes_it_abstain_not_say_vulnerable() -> None:
    r = static.analyze_model(model(f"loss = {CE.format('')}\nassert (targets != -1).any(), 'empty batch'"))
    assert r["verdict"] == "unknown" and "does not follow" in r["reason"]
