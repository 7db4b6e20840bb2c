# expect: vulnerable -- a validator raises on zero after the divisor became the raw count; except swallows it and the raw count is divided
# category: other
# ruff: noqa
import torch


def _validate(d):
    if d == 0:
        raise ValueError('empty batch')


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = torch.ones(())
        try:
            divisor = n_items if n_items is not None else (labels != ignore_index).sum()
            _validate(divisor)
            divisor = divisor.clamp(min=1)
        except ValueError:
            pass
        loss = loss / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
