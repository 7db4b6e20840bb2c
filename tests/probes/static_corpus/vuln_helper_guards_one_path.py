# expect: vulnerable -- the helper clamps only when a flag is set
# ruff: noqa
import torch


def _maybe_clamp(x, flag):
    if flag:
        return x.clamp(min=1)
    return x


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = _maybe_clamp((labels != ignore_index).sum(), mask is not None)
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
