# expect: unknown -- a function rebinds the class name through `global` to a class with an unguarded forward
# category: replaced-after-definition
# ruff: noqa
import torch

def _raw_forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
    labels = labels.view(-1)
    loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
    return loss / (n_items if n_items is not None else (labels != -100).sum())


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


class _Raw(torch.autograd.Function):
    forward = staticmethod(_raw_forward)


def _install():
    global UnslothFusedLoss
    UnslothFusedLoss = _Raw


_install()
