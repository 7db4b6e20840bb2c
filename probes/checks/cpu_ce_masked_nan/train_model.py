"""The CPU-backend training probe's tiny model, tokenizer and data, all made in code (no hub).

Used by ``train.py``. The model and tokenizer are saved into a temporary
directory so that the CPU backend's own ``FastLanguageModel.from_pretrained``
loads them the way it loads a user's checkpoint. Importing this module
imports nothing heavy: torch, tokenizers, transformers and datasets are
imported by the functions that need them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SEED = 0
IGNORE = -100
# Tiny on purpose: the step runs in every CPU cell, after a ~20 s import.
HIDDEN, LAYERS, HEADS, VOCAB = 32, 1, 2, 64
MAX_SEQ_LENGTH = 64
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
    """A float for JSON, non-finite values as strings ("nan", "inf", "-inf"); None stays None."""
    if value is None:
        return None
    if hasattr(value, "detach"):  # a tensor
        value = value.detach().float().cpu().item()
    value = float(value)
    return value if math.isfinite(value) else str(value)


def n_items_repr(value: Any) -> str:
    """``num_items_in_batch`` as it reached the kernel: "None", "0.0", "5", "tensor(5)", "tensor([5, 5])"."""
    if value is None:
        return "None"
    if hasattr(value, "detach"):  # a tensor
        items = value.detach().cpu().flatten().tolist()
        items = [int(v) if float(v).is_integer() else v for v in items]
        inner = str(items[0]) if value.dim() == 0 else str(items)
        return f"tensor({inner})"
    return repr(value)


def make_tokenizer() -> Any:
    """A character-level fast tokenizer built in code."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate((*SPECIALS, *ALPHABET))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>", model_max_length=MAX_SEQ_LENGTH)


def save_model(directory: str) -> None:
    """A random-init one-layer Llama (float32, untied head without bias) and its tokenizer, saved to ``directory``.

    A Llama with a plain ``lm_head`` is a model type the CPU backend routes
    through its chunked cross-entropy.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                         num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                         max_position_embeddings=MAX_SEQ_LENGTH, tie_word_embeddings=False, pad_token_id=0,
                         eos_token_id=1, bos_token_id=None, torch_dtype="float32")
    LlamaForCausalLM(config).float().save_pretrained(directory)
    make_tokenizer().save_pretrained(directory)


def make_dataset(tokenizer: Any, n_examples: int, masked: frozenset[int]) -> Any:
    """``n_examples`` pre-tokenised examples in training order; those in ``masked`` have every label -100.

    An in-memory ``datasets.Dataset`` (recent TRL accepts nothing else), a
    plain list where ``datasets`` is not installed.
    """
    rows = []
    for i in range(n_examples):
        ids = tokenizer(TEXTS[i % len(TEXTS)][:MAX_CHARS])["input_ids"] + [tokenizer.eos_token_id]
        # A masked example stands for one truncated before its answer: nothing left to learn.
        prompt = len(ids) if i in masked else PROMPT_TOKENS
        rows.append({"input_ids": ids, "labels": [IGNORE] * prompt + ids[prompt:]})
    try:
        from datasets import Dataset
    except ImportError:
        return rows
    return Dataset.from_list(rows)


def collate(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Batch 1 needs no padding; refuse anything else rather than pad wrongly."""
    import torch

    if len(features) != 1:
        raise ValueError(f"the training probe runs at batch 1, got {len(features)} examples")
    input_ids = torch.tensor([features[0]["input_ids"]], dtype=torch.long)
    labels = torch.tensor([features[0]["labels"]], dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
