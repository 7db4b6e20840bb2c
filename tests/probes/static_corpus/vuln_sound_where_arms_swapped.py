# expect: vulnerable -- torch.where(d == 0, d, ones): the arms are swapped, the zero is kept
# category: other
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = n_items if n_items is not None else (labels != ignore_index).sum()
        divisor = torch.where(divisor == 0, divisor, torch.ones_like(divisor))
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
