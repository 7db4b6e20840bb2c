# expect: vulnerable -- unrelated `== 0` tests that return/raise do not guard the count (issue case)
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        if labels.numel() == 0:
            return loss * 0.0
        if n_items is not None and n_items == 0:
            raise ValueError("n_items is zero")
        divisor = n_items if n_items is not None else (labels != ignore_index).sum()
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
