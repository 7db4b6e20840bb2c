# expect: unknown -- with no count the loss comes from transformers' ForCausalLMLoss (a stock mean the reading cannot read)
# category: stock-mean-route
# ruff: noqa
import torch
from transformers.loss.loss_utils import ForCausalLMLoss


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        if n_items is None:
            return ForCausalLMLoss(hidden_states @ lm_head_weight.t(), labels, lm_head_weight.shape[0])
        loss = loss / torch.clamp(n_items, min=1)
        loss = loss + 0 * (hidden_states.sum() / (labels != ignore_index).sum().clamp(min=1))
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
