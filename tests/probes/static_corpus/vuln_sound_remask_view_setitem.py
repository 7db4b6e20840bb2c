# expect: vulnerable -- the zero test counts labels, then a view of labels is overwritten with ignore_index before the count is taken again
# category: labels-remasked-via-view
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        if (labels != ignore_index).sum() == 0:
            return loss * 0.0
        flat = labels.view(-1)
        flat[:] = ignore_index
        loss = loss / (labels != ignore_index).sum()
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
