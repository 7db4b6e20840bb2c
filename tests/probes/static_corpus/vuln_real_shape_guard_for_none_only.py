# expect: vulnerable -- the zoo 2026.9.3 shape with the label count floored in the n_items-is-None branch only (a zoo fixed for None only); loss_function divides by n_items as given
# ruff: noqa
import torch


def compute_loss(hidden_states, lm_head_weight, lm_head_bias, labels, n_items=None, scaling=None, shift_labels=True, **kwargs):
    logits = hidden_states @ lm_head_weight.t()
    loss = torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum" if n_items is not None else "mean")
    loss = loss / n_items if n_items is not None else loss
    scaled_loss = loss * scaling if scaling is not None else loss
    return scaled_loss, (loss.detach(),)


class UnslothFusedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None, n_items=None,
                scaling=None, extra_kwargs=None):
        device = lm_head_weight.device
        if extra_kwargs is None:
            extra_kwargs = {}
        ignore_index = int(extra_kwargs.get("ignore_index", -100))
        labels = labels.view(-1)
        divisor = n_items if n_items is not None else (labels != ignore_index).sum().clamp(min=1)
        if not torch.is_tensor(divisor):
            divisor = torch.tensor(divisor, dtype=torch.float32, device=device)
        if divisor.numel() != 1:
            divisor = divisor.ravel()[0]
        divisor = divisor.to(dtype=torch.float32, device=device)
        accumulated_loss = torch.zeros(1, device=device)[0]

        def accumulate_chunk(hidden_states_j, labels_j, divisor=None, scaling=None, **kwargs):
            (grad_j,), (chunk_loss, (unscaled_loss,)) = torch.func.grad_and_value(
                loss_function, argnums=(0,), has_aux=True,
            )(hidden_states_j, lm_head_weight, lm_head_bias, labels_j, divisor, scaling, False, **kwargs)
            accumulated_loss.add_(unscaled_loss)
            return grad_j

        accumulate_chunk = torch.compile(accumulate_chunk, dynamic=True)
        for hidden_states_j, labels_j in zip(torch.chunk(hidden_states, 4), torch.chunk(labels, 4)):
            accumulate_chunk(hidden_states_j, labels_j, divisor=divisor, scaling=scaling, **extra_kwargs)
        return accumulated_loss

    @staticmethod
    def backward(ctx, grad_output):
        return (None,) * 9


def fused_ce_loss(hidden_states, lm_head_weight, lm_head_bias, labels, n_items=None, **kwargs):
    mapping = dict(
        loss_function=compute_loss,
        hidden_states=hidden_states,
        lm_head_weight=lm_head_weight,
        lm_head_bias=lm_head_bias,
        labels=labels,
        n_items=n_items,
        extra_kwargs=kwargs,
    )
    return UnslothFusedLoss.apply(*mapping.values())
