# expect: vulnerable -- forward = staticmethod(_forward) (issue case)
# ruff: noqa
import torch


def _forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
    loss = (hidden_states @ lm_head_weight.t()).sum()
    divisor = n_items if n_items is not None else (labels != -100).sum()
    return loss / divisor


class UnslothFusedLoss(torch.autograd.Function):
    forward = staticmethod(_forward)

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
