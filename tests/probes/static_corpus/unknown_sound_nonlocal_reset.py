# expect: unknown -- a nested function resets the guarded divisor to the raw count through nonlocal
# category: global-nonlocal-reset
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        count = n_items if n_items is not None else (labels != ignore_index).sum()
        divisor = count.clamp(min=1)

        def reset():
            nonlocal divisor
            divisor = count

        reset()
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
