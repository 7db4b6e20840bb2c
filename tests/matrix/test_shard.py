"""Sharding is deterministic and partitions the cells."""

from __future__ import annotations

import pytest

from matrix.spec import shard

IDS = [f"u{i}__z{j}" for i in range(3) for j in range(5)]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 15, 20])
def test_shards_partition_the_cells(n: int) -> None:
    parts = [shard.select(IDS, k, n) for k in range(1, n + 1)]
    flat = [i for p in parts for i in p]
    assert sorted(flat) == sorted(IDS) and len(flat) == len(set(flat))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_selection_ignores_input_order() -> None:
    assert set(shard.select(IDS, 2, 4)) == set(shard.select(list(reversed(IDS)), 2, 4))


@pytest.mark.parametrize("bad", ["0/2", "3/2", "1-2", "", "a/b"])
def test_bad_shard_values(bad: str) -> None:
    with pytest.raises(shard.ShardError, match="shard"):
        shard.parse(bad)
