# expect: vulnerable -- no count: F.cross_entropy(reduction='mean') is NaN on an all-masked batch
# category: stock-mean-route
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        if n_items is None:
            return torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="mean")
        divisor = torch.clamp(n_items, min=1)
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
