# expect: unknown -- the chunk closure run through grad_and_value resets the divisor via nonlocal before dividing
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

        def chunk(h):
            nonlocal divisor
            divisor = count
            return h.sum()

        torch.func.grad_and_value(chunk)(hidden_states)
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
