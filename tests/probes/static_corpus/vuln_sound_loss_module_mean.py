# expect: vulnerable -- no count: nn.CrossEntropyLoss() (mean) is NaN on an all-masked batch
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
            loss_fct = torch.nn.CrossEntropyLoss()
            return loss_fct(hidden_states @ lm_head_weight.t(), labels)
        loss = loss / torch.clamp(n_items, min=1)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
