# expect: vulnerable -- a branch on the label-count expression returns; the caller's n_items == 0 still divides by 0
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        count = (labels != ignore_index).sum()
        if (labels != ignore_index).sum().item() == 0:
            return loss * 0.0
        d = n_items if n_items is not None else count
        loss = loss / d
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
