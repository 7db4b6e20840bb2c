# expect: vulnerable -- forward is inherited from a base class (issue case)
# ruff: noqa
import torch


class _ChunkedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        loss = (hidden_states @ lm_head_weight.t()).sum()
        divisor = n_items if n_items is not None else (labels != -100).sum()
        return loss / divisor


class UnslothFusedLoss(_ChunkedLoss):
    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
