# expect: vulnerable -- torch.Tensor.fill_(labels, ...) (the unbound in-place method) re-masks labels after the zero test
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
        torch.Tensor.fill_(labels, ignore_index)
        loss = loss / (labels != ignore_index).sum()
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
