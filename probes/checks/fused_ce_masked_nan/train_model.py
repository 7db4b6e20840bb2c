"""The training probe's tiny model, built in code (no files, no hub); the tokenizer, data and the judging
of a run are the shared ``probes.training``.

Used by ``train.py``. Importing this module imports nothing heavy: torch,
tokenizers, transformers and datasets are imported by the functions that need
them, in the cell process that already imported unsloth.
"""

from __future__ import annotations

import contextlib
from typing import Any

from probes.training import SEED, count_repr, json_number

# Tiny on purpose: the phase runs in every cell, after a ~20 s import.
HIDDEN, LAYERS, HEADS, VOCAB = 32, 1, 2, 64


def _eager() -> Any:
    """A context in which torch.compile'd callables run eagerly (torch >= 2.6), else a no-op."""
    import torch

    set_stance = getattr(torch.compiler, "set_stance", None)
    return set_stance("force_eager") if set_stance is not None else contextlib.nullcontext()


def make_model(loss_fn: Any, torch_compile: bool, target_gb: float | None, calls: list[dict[str, Any]]) -> Any:
    """A random-init one-layer Llama whose loss is zoo's public entry, bound by value.

    The class name ends in ``ForCausalLM`` and ``forward`` takes ``**kwargs``:
    that is what zoo's batch sampler and the trainer inspect to decide that
    the model accepts ``num_items_in_batch``.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.modeling_outputs import CausalLMOutputWithPast

    from . import kernel

    class SkewProbeLlamaForCausalLM(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs):  # type: ignore[override]
            # Mirrors unsloth's generated forwards: the count comes from the
            # trainer as ``num_items_in_batch`` (or ``n_items``).
            n_items = kwargs.get("num_items_in_batch")
            if n_items is None:
                n_items = kwargs.get("n_items")
            # zoo wraps transformers' mask builders in torch.compile (about
            # 30 s on CPU for a one-off mask); the body runs eager, the loss
            # keeps the caller's ``torch_compile``.
            with _eager():
                hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            with torch.no_grad():  # TRL's SFTTrainer reads logits for its token metrics
                logits = self.lm_head(hidden).float()
            loss = None
            if labels is not None:
                loss = loss_fn(
                    trainer=None,
                    hidden_states=hidden,
                    lm_head_weight=self.lm_head.weight,
                    lm_head_bias=getattr(self.lm_head, "bias", None),
                    labels=labels,
                    mask=None,
                    n_items=n_items,
                    scaling=None,
                    target_gb=target_gb,
                    torch_compile=torch_compile,
                )
                # Every call, training and evaluation alike: each consumer clears the list before its run.
                calls.append({
                    "labels_left": int((labels[..., 1:] != kernel.IGNORE).sum()),
                    "n_items": count_repr(n_items),
                    "raw_loss": json_number(loss),
                    "kernel": type(loss.grad_fn).__name__ if loss.grad_fn is not None else "None",
                })
            return CausalLMOutputWithPast(loss=loss, logits=logits)

    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                         num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                         max_position_embeddings=64, tie_word_embeddings=False, pad_token_id=0,
                         eos_token_id=1, bos_token_id=None)
    return SkewProbeLlamaForCausalLM(config).float()
