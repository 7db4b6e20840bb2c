# expect: vulnerable -- operator.truediv(loss, count) divides by the raw count while a floored copy is divided elsewhere
# category: other
# ruff: noqa
import torch
import operator


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        count = n_items if n_items is not None else (labels != ignore_index).sum()
        scale = hidden_states.sum() / count.clamp(min=1)
        loss = operator.truediv(loss, count)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
