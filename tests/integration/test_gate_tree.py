"""The gate's structural verdict for a path candidate, on a real unsloth tree: unsloth 2025.3.10's wheel
unpacked (its ``unsloth/**.py`` and its ``METADATA``, read from the index by the scan's fetcher), judged
against the real zoo releases its floor admits, read by the history's readers.

unsloth 2025.3.10 declares ``unsloth_zoo>=2025.3.8`` and imports ``_unsloth_get_batch_samples`` from
``unsloth_zoo.loss_utils`` at import time (``unsloth/models/_utils.py``); zoo 2025.3.8 lacks it, 2025.3.9
has it (unsloth #1992/#2003, read by hand from both wheels). So the tree as released fails the gate, and
the same tree with its floor raised to 2025.3.9 passes. No env is built.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from matrix.index import IndexClient
from matrix.scan.cache import ScanIndex
from matrix.scan.fetch import Fetcher
from matrix.scan.history import readers, trees
from matrix.scan.terms import Want
from matrix.spec.settings import scan_cache_dir

pytestmark = pytest.mark.integration
VERSION, UPTO = "2025.3.10", "2025.3.9"  # UPTO: the zoo releases read stop there (the test's budget)


@pytest.fixture(autouse=True)
def _as_the_gate_runs() -> Iterator[None]:
    """The readers parse every release with ``ast``; old zoo sources hold invalid escape sequences, whose
    warning (DeprecationWarning on Python 3.11, SyntaxWarning from 3.12) this suite's ``filterwarnings = error``
    would turn into a parse failure -- cached per release digest for every later reader. The gate runs with
    Python's default filters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = scan_cache_dir()
    index = ScanIndex(IndexClient(), cache=cache)
    row = next(r for r in readers.listed(index, "unsloth") if r.version == VERSION)
    f = row.release.pick()
    assert f is not None
    want = Want(name=lambda n: n.startswith("unsloth/") and n.endswith(".py"), metadata=True,
                key="test-gate-tree-sources")
    ex = Fetcher(cache, index.client.http).get(f, want)
    root = tmp_path_factory.mktemp("unsloth-2025.3.10")
    for member, text in ex.members.items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_text(text, encoding="utf-8")
    assert ex.metadata and "unsloth_zoo>=2025.3.8" in ex.metadata.replace(" ", "")
    (root / f"unsloth-{VERSION}.dist-info").mkdir()
    (root / f"unsloth-{VERSION}.dist-info" / "METADATA").write_text(ex.metadata, encoding="utf-8")
    return root


def test_the_released_tree_fails_on_the_zoo_its_floor_admits(unpacked: Path) -> None:
    lines: list[str] = []
    assert trees.structural_tree_gate(unpacked, lines.append, upto=UPTO) is True
    assert any("zoo floor 2025.3.8" in x and "2 admitted zoo release(s), 1 incompatible" in x for x in lines), lines
    assert any(x.startswith("gate: structural: zoo 2025.3.8: incompatible, missing ")
               and "unsloth_zoo.loss_utils._unsloth_get_batch_samples (unsloth/models/_utils.py:" in x
               for x in lines), lines


def test_the_same_tree_with_a_floor_above_the_broken_zoo_passes(unpacked: Path) -> None:
    meta = unpacked / f"unsloth-{VERSION}.dist-info" / "METADATA"
    meta.write_text(meta.read_text(encoding="utf-8").replace(">=2025.3.8", ">=2025.3.9"), encoding="utf-8")
    lines: list[str] = []
    assert trees.structural_tree_gate(unpacked, lines.append, upto=UPTO) is False
    assert any("zoo floor 2025.3.9" in x and "1 admitted zoo release(s), 0 incompatible" in x for x in lines), lines
