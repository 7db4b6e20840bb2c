# expect: fixed -- a relative import of a helper re-exported by a package __init__
# ruff: noqa
import torch
from ..utils import at_least_one


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        d = at_least_one((labels != ignore_index).sum())
        loss = loss / d
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None

# === unsloth_zoo/utils/__init__.py
from .numeric import at_least_one

# === unsloth_zoo/utils/numeric.py
def at_least_one(x):
    return x.clamp(min=1)
