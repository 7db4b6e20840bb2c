# expect: unknown -- torch.where(d == 0, full_like(d, 0.5), d) on an integer count fills 0 (0.5 truncates)
# category: floor-zero-in-dtype
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = (labels != ignore_index).sum() if n_items is None else n_items
        divisor = torch.where(divisor == 0, torch.full_like(divisor, 0.5), divisor)
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
