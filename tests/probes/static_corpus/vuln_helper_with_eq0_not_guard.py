# expect: vulnerable -- a same-module helper mentions == 0 but returns the count unchanged (issue case)
# ruff: noqa
import torch


def _first(x):
    if x.numel() == 0:
        return x
    return x.ravel()[0]


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = _first((labels != ignore_index).sum())
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
