# expect: unknown -- the guard helper is imported from a module that is not in the files
# ruff: noqa
import torch
from unsloth_zoo.fused_losses.missing_helpers import _nonzero


import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        d = _nonzero((labels != ignore_index).sum())
        loss = loss / d
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
