# expect: unknown -- the divisor counts the labels as (labels + 100).bool().sum(), a spelling the reading does not know; a decoy count is floored
# category: other
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        decoy = (labels != ignore_index).sum().clamp(min=1)
        scale = hidden_states.sum() / decoy
        divisor = n_items.clamp(min=1) if n_items is not None else (labels - ignore_index).bool().sum()
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
