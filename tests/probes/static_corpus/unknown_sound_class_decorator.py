# expect: unknown -- a class decorator of the module swaps the guarded forward for an unguarded one
# category: replaced-after-definition
# ruff: noqa
import torch

def _raw_forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
    labels = labels.view(-1)
    loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
    return loss / (n_items if n_items is not None else (labels != -100).sum())


def _swap(cls):
    cls.forward = staticmethod(_raw_forward)
    return cls


@_swap
class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = n_items if n_items is not None else (labels != ignore_index).sum()
        divisor = divisor.clamp(min=1)
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
