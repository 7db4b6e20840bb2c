# expect: unknown -- the raw count is appended to a list and divided through it
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
        kept = []
        kept.append(count)
        scale = hidden_states.sum() / count.clamp(min=1)
        loss = loss / kept[0]
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
