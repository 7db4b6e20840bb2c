"""The CPU-backend training probe's tiny model and tokenizer, made in code (no hub) and saved to disk.

Used by ``train.py``. The model and tokenizer are saved into a temporary
directory so that the CPU backend's own ``FastLanguageModel.from_pretrained``
loads them the way it loads a user's checkpoint. Importing this module
imports nothing heavy: torch, tokenizers, transformers and datasets are
imported by the functions that need them.
"""

from __future__ import annotations

from probes.training import SEED, char_tokenizer

# Tiny on purpose: the step runs in every CPU cell, after a ~20 s import.
HIDDEN, LAYERS, HEADS, VOCAB = 32, 1, 2, 64
MAX_SEQ_LENGTH = 64


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
    char_tokenizer(MAX_SEQ_LENGTH).save_pretrained(directory)


