"""Deterministic sharding of a matrix's cells: ``--shard K/N`` / ``SKEWMATRIX_SHARD=K/N``.

Cells are sorted by id and shard K (1-based) takes every N-th cell starting
at K, so the split depends only on the set of cell ids: every machine that
reads the same matrix computes the same shards, and the shards together are
exactly the matrix, each cell once.
"""

from __future__ import annotations

import re
from typing import TypeVar

from matrix.errors import SkewmatrixError

T = TypeVar("T")


class ShardError(SkewmatrixError):
    """A --shard value that is not K/N with 1 <= K <= N."""


def parse(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m:
        raise ShardError(f"shard {text!r}: expected K/N, e.g. 1/4")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= k <= n:
        raise ShardError(f"shard {text!r}: K must be between 1 and N (got K={k}, N={n})")
    return k, n


def select(ids: list[str], k: int, n: int) -> list[str]:
    """The ids of shard ``k`` of ``n`` (in the matrix's own order)."""
    chosen = set(sorted(ids)[k - 1 :: n])
    return [i for i in ids if i in chosen]
