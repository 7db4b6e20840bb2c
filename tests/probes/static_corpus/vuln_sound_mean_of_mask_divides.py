# expect: vulnerable -- the share of kept labels (mean of the mask) is 0 when every label is masked, and it divides
# category: other
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        keep = (labels != ignore_index).float()
        divisor = keep.mean() * labels.numel()
        if n_items is not None:
            divisor = n_items.clamp(min=1)
        loss = loss / keep.mean()
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
