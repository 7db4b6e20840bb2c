"""Which user-facing feature an unsloth file (and function) serves: a small table, first match wins. Stdlib only.

The patterns are ``fnmatch`` patterns over the wheel member (``unsloth/save.py``) or, when they contain a
``:``, over ``member:function``. A file the table does not name is its module's name.
"""

from __future__ import annotations

import fnmatch
import functools

FEATURES: tuple[tuple[str, str], ...] = (
    ("unsloth/save.py:*gguf*", "save/GGUF"),
    ("unsloth/save.py:*ollama*", "save/GGUF"),
    ("unsloth/save.py", "save/merge and push"),
    ("unsloth/models/rl_replacements.py", "RL trainers"),
    ("unsloth/models/rl.py", "RL trainers"),
    ("unsloth/models/rl*.py", "RL trainers"),
    ("unsloth/models/vision.py", "vision models"),
    ("unsloth/models/loader*.py", "model loading"),
    ("unsloth/models/mapper.py", "model loading"),
    ("unsloth/models/_utils.py:*gradient_checkpoint*", "gradient checkpointing"),
    ("unsloth/models/_utils.py:*compile*", "torch.compile patches"),
    ("unsloth/models/_utils.py", "core patches"),
    ("unsloth/models/llama.py", "Llama-family models"),
    ("unsloth/models/*.py", "model family {stem}"),
    ("unsloth/chat_templates.py", "chat templates"),
    ("unsloth/tokenizer_utils.py", "tokenizer fixes"),
    ("unsloth/trainer.py", "SFT trainer"),
    ("unsloth/kernels/*", "kernels"),
    ("unsloth/dataprep/*", "data preparation"),
    ("unsloth/utils/*", "utilities"),
    ("unsloth/__init__.py", "import unsloth"),
    ("unsloth/import_fixes.py", "import unsloth"),
)


@functools.cache  # pure, and asked once per missing reference of every pair a history judges
def feature_of(member: str, function: str | None = None) -> str:
    """The feature ``member`` (and ``function`` in it) serves, per :data:`FEATURES`."""
    stem = member.rsplit("/", 1)[-1].removesuffix(".py")
    for pattern, feature in FEATURES:
        subject = f"{member}:{function or ''}" if ":" in pattern else member
        if fnmatch.fnmatch(subject, pattern):
            return feature.format(stem=stem)
    return member.removesuffix(".py").replace("/", ".")
