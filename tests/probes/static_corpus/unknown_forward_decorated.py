# expect: unknown -- forward is wrapped by a same-module decorator the reading does not follow
# ruff: noqa
import functools

import torch


def nan_to_zero(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        out = fn(*args)
        return torch.nan_to_num(out, nan=0.0)
    return wrapper


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    @nan_to_zero
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        loss = (hidden_states @ lm_head_weight.t()).sum()
        return loss / (labels != -100).sum()
