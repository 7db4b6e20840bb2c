# expect: fixed -- zoo 2026.10.6+ shape: _nonzero_count (tensor where / Python conditional) on n_items-or-count, in forward and in loss_function
# ruff: noqa
import torch


def _nonzero_count(n_items):
    """0 -> 1 so an all-masked batch gives loss 0, not 0 / 0."""
    if torch.is_tensor(n_items):
        return torch.where(n_items == 0, torch.ones_like(n_items), n_items)
    return n_items if n_items != 0 else 1
pass


def compute_fused_ce_loss(hidden_states, lm_head_weight, lm_head_bias, labels, n_items=None, scaling=None,
                          shift_labels=True, **kwargs):
    ignore_index = int(kwargs.get("ignore_index", -100))
    logits = torch.nn.functional.linear(hidden_states, lm_head_weight, lm_head_bias)
    target = labels.view(-1).contiguous()
    loss = torch.nn.functional.cross_entropy(logits.float(), target, reduction="sum", ignore_index=ignore_index)
    loss = loss / _nonzero_count(n_items if n_items is not None else (target != ignore_index).sum())
    scaled_loss = loss * scaling if scaling is not None else loss
    return scaled_loss, (loss.detach(),)


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None,
                scaling=None, shift_labels=True, target_gb=None, extra_kwargs=None):
        device = lm_head_weight.device
        if extra_kwargs is None:
            extra_kwargs = {}
        ignore_index = int(extra_kwargs.get("ignore_index", -100))
        labels = labels.view(-1)
        divisor = n_items if n_items is not None else (labels != ignore_index).sum()
        if not torch.is_tensor(divisor):
            divisor = torch.full((), divisor, dtype=torch.float32, device=device)
        if divisor.numel() != 1: divisor = divisor.ravel()[0]
        divisor = _nonzero_count(divisor.to(dtype=torch.float32, device=device))
        accumulated_loss = torch.zeros((), device=device)

        def accumulate_chunk(hidden_states_j, labels_j, divisor=None, scaling=None, **kwargs):
            (grad_j,), (chunk_loss, (unscaled_loss,)) = torch.func.grad_and_value(
                loss_function, argnums=(0,), has_aux=True,
            )(hidden_states_j, lm_head_weight, lm_head_bias, labels_j, divisor, scaling, False, **kwargs)
            accumulated_loss.add_(unscaled_loss)
            return grad_j

        for hidden_states_j, labels_j in zip(torch.chunk(hidden_states, 4), torch.chunk(labels, 4)):
            accumulate_chunk(hidden_states_j, labels_j, divisor=divisor, scaling=scaling, **extra_kwargs)
        return accumulated_loss

    @staticmethod
    def backward(ctx, grad_output):
        return (None,) * 12


def unsloth_fused_ce_loss(hidden_states, lm_head_weight, lm_head_bias, labels, n_items=None, **kwargs):
    mapping = dict(
        loss_function=compute_fused_ce_loss,
        hidden_states=hidden_states,
        lm_head_weight=lm_head_weight,
        lm_head_bias=lm_head_bias,
        labels=labels,
        n_items=n_items,
        extra_kwargs=kwargs,
    )
    return UnslothFusedLoss.apply(*mapping.values())
