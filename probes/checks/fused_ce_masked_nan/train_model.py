"""The training probe's tiny model, tokenizer and data, all built in code (no files, no hub).

Used by ``train.py``. Importing this module imports nothing heavy: torch,
tokenizers, transformers and datasets are imported by the functions that need
them, in the cell process that already imported unsloth.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SEED = 0
# Tiny on purpose: the phase runs in every cell, after a ~20 s import.
HIDDEN, LAYERS, HEADS, VOCAB = 32, 1, 2, 64
SPECIALS = ("<pad>", "<eos>", "<unk>")
ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
PROMPT_TOKENS = 4  # the prompt part of a trainable example stays masked (completion-only loss)
TEXTS = (
    "the cat sat on the mat.",
    "a dog ran in the park.",
    "birds sing at dawn, loud.",
    "rain fell on the roof.",
    "the sun rose over hills.",
    "fish swim in cold water.",
    "we read a book by night.",
    "snow covers the old road.",
)
MAX_CHARS = 16


def json_number(value: Any) -> Any:
    """A float for JSON, non-finite values as strings ("nan", "inf", "-inf")."""
    if value is None:
        return None
    if hasattr(value, "detach"):  # a tensor
        value = value.detach().float().cpu().item()
    value = float(value)
    return value if math.isfinite(value) else str(value)


def n_items_repr(value: Any) -> str:
    """``num_items_in_batch`` as it reached the loss: "None", "5", "tensor(5)", "tensor([5, 5])"."""
    if value is None:
        return "None"
    if hasattr(value, "detach"):  # a tensor
        items = value.detach().cpu().flatten().tolist()
        items = [int(v) if float(v).is_integer() else v for v in items]
        inner = str(items[0]) if value.dim() == 0 else str(items)
        return f"tensor({inner})"
    return repr(value)


def make_tokenizer() -> Any:
    """A character-level fast tokenizer built in code (no files, no hub)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate((*SPECIALS, *ALPHABET))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>")


def make_dataset(tokenizer: Any, n_examples: int, masked: frozenset[int]) -> Any:
    """``n_examples`` examples in training order; those whose index is in ``masked`` have no trainable label.

    An in-memory ``datasets.Dataset`` (recent TRL accepts nothing else), a
    plain list where ``datasets`` is not installed.
    """
    from . import kernel

    rows = []
    for i in range(n_examples):
        ids = tokenizer(TEXTS[i % len(TEXTS)][:MAX_CHARS])["input_ids"] + [tokenizer.eos_token_id]
        # A masked example stands for one truncated before its answer: nothing left to learn.
        prompt = len(ids) if i in masked else PROMPT_TOKENS
        labels = [kernel.IGNORE] * prompt + ids[prompt:]
        rows.append({"input_ids": ids, "labels": labels})
    try:
        from datasets import Dataset
    except ImportError:
        return rows
    return Dataset.from_list(rows)


def in_order(trainer_cls: type, args: Any) -> type:
    """``trainer_cls``, or a subclass that feeds the examples in order where ``args`` cannot ask for it.

    transformers < 5 has no ``train_sampling_strategy`` and shuffles; only the
    order changes (the masked examples land on known steps), not the loss route.
    """
    if getattr(args, "train_sampling_strategy", None) == "sequential":
        return trainer_cls
    import torch

    class InOrder(trainer_cls):  # type: ignore[misc, valid-type]
        def _get_train_sampler(self, *a: Any, **kw: Any) -> Any:
            return torch.utils.data.SequentialSampler(a[0] if a and a[0] is not None else self.train_dataset)

    return InOrder


def collate(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Batch 1 needs no padding; refuse anything else rather than pad wrongly.

    The attention mask is made here, as TRL's own collator does.
    """
    import torch

    if len(features) != 1:
        raise ValueError(f"the training probe runs at batch 1, got {len(features)} examples")
    input_ids = torch.tensor([features[0]["input_ids"]], dtype=torch.long)
    labels = torch.tensor([features[0]["labels"]], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}


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
                if self.training:
                    calls.append({
                        "labels_left": int((labels[..., 1:] != kernel.IGNORE).sum()),
                        "n_items": n_items_repr(n_items),
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
