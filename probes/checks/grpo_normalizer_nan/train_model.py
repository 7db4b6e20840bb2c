"""The GRPO training probe's tiny model, tokenizer and prompts, made in code (no hub).

Used by ``train.py``. Importing this module imports nothing heavy: torch
and transformers are imported by the function that needs them.
"""

from __future__ import annotations

from typing import Any

from probes.training import SEED, char_tokenizer

HIDDEN, LAYERS, HEADS = 32, 1, 2
COMPLETION = 2  # tokens per completion: every completion is cut off here (end and pad tokens suppressed)
PROMPTS = ("the cat sat", "a dog ran", "birds sing", "rain fell")


def make_model() -> tuple[Any, Any]:
    """A random-init one-layer Llama (float32) sized to the character tokenizer, and that tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = char_tokenizer(64)
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                         num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                         max_position_embeddings=64, tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = LlamaForCausalLM(config).float()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer
