# expect: unknown -- clamp(min=1e-8) on an fp16 divisor: 1e-8 is 0 in fp16, so the floor is no floor
# category: floor-zero-in-dtype
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None):
        ignore_index = -100
        labels = labels.view(-1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = n_items if n_items is not None else (labels != ignore_index).sum()
        divisor = divisor.to(torch.float16).clamp(min=1e-8)
        loss = loss.half() / divisor
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None
