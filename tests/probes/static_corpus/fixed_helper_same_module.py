# expect: fixed -- a same-module helper whose every return is guarded
# ruff: noqa
import torch


def _nonzero(x):
    if torch.is_tensor(x):
        return torch.where(x == 0, torch.ones_like(x), x)
    return x if x != 0 else 1


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        d = _nonzero(n_items if n_items is not None else (labels != ignore_index).sum())
        loss = loss / d
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
