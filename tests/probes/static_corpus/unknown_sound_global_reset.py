# expect: unknown -- a module helper resets the module-level divisor through global after forward floored it
# category: global-nonlocal-reset
# ruff: noqa
import torch

_DIVISOR = None


def _reset(count):
    global _DIVISOR
    _DIVISOR = count


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        global _DIVISOR
        _DIVISOR = (n_items if n_items is not None else (labels != ignore_index).sum()).clamp(min=1)
        _reset(n_items if n_items is not None else (labels != ignore_index).sum())
        loss = loss / _DIVISOR
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
