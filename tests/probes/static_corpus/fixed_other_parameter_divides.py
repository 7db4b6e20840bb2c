# expect: fixed -- the divisor is floored for both n_items and the count; a chunk budget parameter (None-tested, divided by as given) is not a count
# ruff: noqa
import torch


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None,
                target_gb=None):
        ignore_index = -100
        labels = labels.view(-1)
        if target_gb is None:
            target_gb = 4.0
        n_chunks = max(int(hidden_states.numel() * 4 / 1024 ** 3 / target_gb), 1)
        loss = torch.nn.functional.cross_entropy(hidden_states @ lm_head_weight.t(), labels, reduction="sum")
        divisor = n_items if n_items is not None else (labels != ignore_index).sum()
        loss = loss / divisor.clamp(min=1) / n_chunks * n_chunks
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        return None, grad_output, None, None, None, None, None, None
