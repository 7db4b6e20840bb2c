# expect: vulnerable -- torch.where(count > 0, loss / count, 0) computes loss / count on every row: NaN (and a NaN gradient) when 0
# category: other
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        count = n_items if n_items is not None else (labels != ignore_index).sum()
        loss = torch.where(count > 0, loss / count, torch.zeros_like(loss))
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
