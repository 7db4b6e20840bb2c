"""Synthetic text and conversations for the offline stand-ins: deterministic, stdlib only, no hub.

How a micro-batch of ``chat_sft.py`` ends up with every target ``-1``:
its loader packs whole conversations into rows of ``max_seq_len + 1``
tokens, best fit first, and ``render_conversation`` truncates a
conversation to 2048 tokens. A conversation whose user turn alone is longer
than that keeps no assistant token: at ``--max-seq-len=2048`` it fills a
row on its own, and a row with no valid target is a fully masked
micro-batch at ``--device-batch-size=1``. So the stand-ins mix ordinary
conversations with a few such long ones -- the shape of a real long prompt
whose answer is cut off. The PR heads also train on SpellingBee /
SimpleSpelling rows made from a word list (280K rows that would drown the
others): a few of its "words" are long enough that the spelling question
alone passes 2048 tokens, for the same effect.
"""

from __future__ import annotations

import random
import string
from typing import Any

WORDS = ("the", "cat", "sat", "on", "mat", "a", "dog", "ran", "in", "park", "birds", "sing", "at", "dawn",
         "rain", "fell", "roof", "sun", "rose", "over", "hills", "fish", "swim", "cold", "water", "we", "read",
         "book", "by", "night", "snow", "covers", "old", "road", "what", "is", "how", "many", "why", "when",
         "please", "explain", "answer", "question", "number", "plus", "minus", "equals", "red", "blue", "green",
         "small", "large", "river", "tree", "house", "city", "friend", "teacher", "student", "apple", "bread")
RENDER_LIMIT = 2048        # render_conversation's max_tokens in every ref
LONG_USER_WORDS = 2600     # a user turn well past RENDER_LIMIT tokens at any vocab this check trains
LONG_WORD_CHARS = 4000     # a spelling "word" past RENDER_LIMIT tokens (random letters merge little)
SEED = 1234


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def text(rng: random.Random, lo: int, hi: int) -> str:
    out, left = [], rng.randint(lo, hi)
    while left > 0:
        k = min(left, rng.randint(4, 14))
        out.append(sentence(rng, k))
        left -= k
    return " ".join(out)


def pretraining_docs(n: int = 400, seed: int = SEED) -> list[str]:
    """Documents for the tokenizer (``tok_train.py`` reads them as its pretraining shards)."""
    rng = random.Random(seed)
    docs = [text(rng, 40, 160) for _ in range(n)]
    docs.append("Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 123. Punctuation: , . ! ? : ; ' \" ( ) # = + - * /")
    return docs


def conversation(rng: random.Random, masked: bool) -> list[dict[str, str]]:
    user = text(rng, LONG_USER_WORDS, LONG_USER_WORDS) if masked else text(rng, 12, 60)
    return [{"role": "user", "content": user}, {"role": "assistant", "content": text(rng, 12, 60)}]


def masked_positions(n: int, every: int, offset: int) -> set[int]:
    """Indices ``offset, offset + every, ...`` below ``n``: where the long conversations go."""
    return set(range(offset, n, every)) if every > 0 else set()


def smoltalk(n: int, every: int, offset: int = 3, seed: int = SEED) -> list[dict[str, Any]]:
    """Rows shaped like ``HuggingFaceTB/smol-smoltalk`` (``messages``), every ``every``-th one masked."""
    rng = random.Random(seed)
    masked = masked_positions(n, every, offset)
    return [{"messages": conversation(rng, i in masked)} for i in range(n)]


def is_masked(row: dict[str, Any]) -> bool:
    """A smoltalk row made by :func:`smoltalk` with a user turn past the render limit."""
    return len(row["messages"][0]["content"].split()) >= LONG_USER_WORDS


def mmlu(n: int, seed: int = SEED + 1) -> list[dict[str, Any]]:
    """Rows shaped like ``cais/mmlu``: question, subject, four choices, answer index."""
    rng = random.Random(seed)
    return [{"question": sentence(rng, rng.randint(6, 16)), "subject": "miscellaneous",
             "choices": [sentence(rng, rng.randint(1, 4)) for _ in range(4)], "answer": rng.randrange(4)}
            for _ in range(n)]


def gsm8k(n: int, seed: int = SEED + 2) -> list[dict[str, str]]:
    """Rows shaped like ``openai/gsm8k``: a question and a worked answer with a calculator call and ``#### n``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        rows.append({"question": f"{sentence(rng, rng.randint(6, 14))} What is {a} plus {b}?",
                     "answer": f"{sentence(rng, 5)} {a}+{b}=<<{a}+{b}={a + b}>>{a + b}.\n#### {a + b}"})
    return rows


def identity(n: int, seed: int = SEED + 3) -> list[list[dict[str, str]]]:
    """Lines of ``identity_conversations.jsonl`` (the PR heads' CustomJSON task): short chats."""
    rng = random.Random(seed)
    return [conversation(rng, False) for _ in range(n)]


def word_list(n: int = 300, long_words: int = 8, seed: int = SEED + 4) -> list[str]:
    """The stand-in for ``words_alpha.txt``: short words, and ``long_words`` random-letter words of
    ``LONG_WORD_CHARS`` letters (a spelling question about one of them keeps no assistant token)."""
    rng = random.Random(seed)
    words = sorted({"".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
                    for _ in range(n)} | set(WORDS))
    longs = ["".join(rng.choice(string.ascii_lowercase) for _ in range(LONG_WORD_CHARS)) for _ in range(long_words)]
    return words + longs
