# expect: fixed -- labels are re-masked through a view before the count is taken; the count itself is floored
# category: controls
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        flat = labels.view(-1)
        flat[:1] = ignore_index
        divisor = (labels != ignore_index).sum().clamp(min=1)
        if n_items is not None:
            divisor = n_items.clamp(min=1)
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
