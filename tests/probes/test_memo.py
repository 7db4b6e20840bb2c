"""probes.memo: a static reading shared by the cells of a run, keyed by what it reads and the reader's code."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from probes import handoff, memo
from probes.checks.pair_compat import phases


@pytest.fixture
def code(tmp_path: Path) -> list[Path]:
    reader = tmp_path / "reader.py"
    reader.write_text("def read(): ...\n")
    return [reader]


def counting(value: Any) -> tuple[list[int], Any]:
    calls: list[int] = []

    def read() -> Any:
        calls.append(1)
        return value

    return calls, read


def test_the_same_texts_and_code_are_read_once(tmp_path: Path, code: list[Path]) -> None:
    calls, read = counting({"b": [1, 2], "a": {"x": None}})
    first = memo.shared("r", code, {"m.py": "x = 1"}, read, where=tmp_path / "memo")
    again = memo.shared("r", code, {"m.py": "x = 1"}, read, where=tmp_path / "memo")
    assert calls == [1] and first == again == {"a": {"x": None}, "b": [1, 2]}


@pytest.mark.parametrize("change", ["text", "member", "code", "name"])
def test_a_change_to_what_is_read_or_to_the_reader_reads_again(tmp_path: Path, code: list[Path],
                                                               change: str) -> None:
    calls, read = counting([1])
    memo.shared("r", code, {"m.py": "x = 1"}, read, where=tmp_path)
    texts, name = {"m.py": "x = 1"}, "r"
    if change == "text":
        texts = {"m.py": "x = 2"}
    elif change == "member":
        texts = {"n.py": "x = 1"}
    elif change == "code":
        code[0].write_text("def read(): return 1\n")
    else:
        name = "other"
    memo.shared(name, code, texts, read, where=tmp_path)
    assert calls == [1, 1]


def test_without_a_raw_cache_nothing_is_shared(monkeypatch: pytest.MonkeyPatch, code: list[Path]) -> None:
    monkeypatch.setattr(handoff, "_GIVEN", [handoff.Handoff()])
    assert memo.folder() is None
    calls, read = counting([1])
    memo.shared("r", code, {}, read)
    memo.shared("r", code, {}, read)
    assert calls == [1, 1]


def test_the_folder_is_beside_the_raw_phases_findings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(handoff, "_GIVEN", [handoff.parse([f"--raw-cache={tmp_path / 'run' / 'abc.json'}"])])
    assert memo.folder() == tmp_path / "run" / "static"


def test_a_result_json_would_change_is_not_stored(tmp_path: Path, code: list[Path]) -> None:
    calls, read = counting({"pair": ("a", "b")})  # a tuple comes back a list: a reuse would differ
    assert memo.shared("r", code, {}, read, where=tmp_path) == {"pair": ("a", "b")}
    memo.shared("r", code, {}, read, where=tmp_path)
    assert calls == [1, 1] and not list(tmp_path.glob("*.json"))


def test_an_unreadable_store_is_read_again(tmp_path: Path, code: list[Path]) -> None:
    calls, read = counting([1])
    memo.shared("r", code, {}, read, where=tmp_path)
    (stored,) = tmp_path.glob("*.json")
    stored.write_text("{truncated")
    assert memo.shared("r", code, {}, read, where=tmp_path) == [1] and calls == [1, 1]


def test_two_cells_at_once_read_once(tmp_path: Path, code: list[Path]) -> None:
    calls: list[int] = []

    def slow() -> list[int]:
        calls.append(1)
        time.sleep(0.3)
        return [7]

    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(memo.shared("r", code, {}, slow, where=tmp_path)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and got == [[7], [7]]


def test_pair_compat_reads_each_side_once_per_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Two cells' static readings with one unsloth and two zoos: the references are read once, each table once,
    # and the second cell's verdict is what it would have read itself.
    monkeypatch.setattr(handoff, "_GIVEN", [handoff.parse([f"--raw-cache={tmp_path / 'digest.json'}"])])
    uns = {"unsloth/__init__.py": "from unsloth_zoo.utils import gone\n"}
    zoos = [{"unsloth_zoo/__init__.py": "", "unsloth_zoo/utils.py": "gone = 1\n"},
            {"unsloth_zoo/__init__.py": "", "unsloth_zoo/utils.py": "kept = 1\n"}]
    read: list[str] = []
    real_refs, real_table = phases.reference_list, phases.symbol_table
    monkeypatch.setattr(phases, "reference_list", lambda m: read.append("refs") or real_refs(m))
    monkeypatch.setattr(phases, "symbol_table", lambda m: read.append("table") or real_table(m))
    verdicts = []
    for zoo in (*zoos, zoos[0], zoos[1]):
        monkeypatch.setattr(phases, "sources", lambda package, zoo=zoo: uns if package == "unsloth" else zoo)
        verdicts.append(phases.static())
    assert read == ["refs", "table", "table"]
    assert [v["pair"] for v in verdicts] == ["compatible", "incompatible", "compatible", "incompatible"]
    assert verdicts[0] == verdicts[2] and verdicts[1] == verdicts[3]
