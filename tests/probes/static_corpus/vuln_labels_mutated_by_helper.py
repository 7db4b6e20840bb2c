# expect: vulnerable -- a helper masks more labels after the zero test on the count expression
# ruff: noqa
import torch


def _drop_long_tail(labels, ignore_index):
    labels[labels > 50000] = ignore_index


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        if (labels != ignore_index).sum() == 0:
            return loss * 0.0
        _drop_long_tail(labels, ignore_index)
        d = (labels != ignore_index).sum()
        loss = loss / d
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
