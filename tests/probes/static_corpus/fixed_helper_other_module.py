# expect: fixed -- the guard helper is imported from another module of the wheel (issue case)
# ruff: noqa
import torch
from unsloth_zoo.fused_losses.common import nonzero_count


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        d = nonzero_count(n_items if n_items is not None else (labels != ignore_index).sum())
        loss = loss / d
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None

# === unsloth_zoo/fused_losses/common.py
import torch


def nonzero_count(n):
    if n == 0:
        return torch.ones_like(n)
    return n
