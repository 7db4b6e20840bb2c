# expect: unknown -- the divisor is an instance of a class of the module whose __rtruediv__ divides by the raw count
# category: other
# ruff: noqa
import torch


class _Per:
    def __init__(self, n):
        self.n = n

    def __rtruediv__(self, x):
        return x / self.n


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        count = n_items if n_items is not None else (labels != ignore_index).sum()
        scale = hidden_states.sum() / count.clamp(min=1)
        loss = loss / _Per(count)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
