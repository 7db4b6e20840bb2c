"""The locked look-up-or-compute that the raw phase's findings and the shared static readings both use
(``probes.common``): what counts as a stored entry, and what is stored."""

from __future__ import annotations

import json

from probes.common import look_up_or_compute, stored_entry, write_json


def test_an_entry_counts_only_under_its_own_digest_schema_and_result_type(tmp_path):
    path = tmp_path / "abc.json"
    write_json(path, {"schema": "s/1", "digest": "abc", "result": {"x": 1}})
    assert stored_entry(path, "s/1") == {"schema": "s/1", "digest": "abc", "result": {"x": 1}}
    assert stored_entry(path, "s/2") is None
    assert stored_entry(path, "s/1", list) is None  # a result of another type
    moved = tmp_path / "def.json"
    moved.write_text(path.read_text())
    assert stored_entry(moved, "s/1") is None  # a file copied under another digest is not that digest's entry
    write_json(path, {"schema": "s/1", "digest": "abc"})
    assert stored_entry(path, "s/1") is None  # no result at all
    path.write_text("{not json")
    assert stored_entry(path, "s/1") is None


def test_the_first_computes_and_stores_the_second_gets_the_stored_entry(tmp_path):
    path = tmp_path / "deep" / "k1.json"  # the folder is made on demand
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    found, got = look_up_or_compute(path, "s/1", compute, lambda r: {"result": r, "by": "a"})
    assert (found, got) == (None, {"n": 1})
    assert json.loads(path.read_text())["digest"] == "k1"
    found, got = look_up_or_compute(path, "s/1", compute, lambda r: {"result": r, "by": "b"})
    assert got is None and found["result"] == {"n": 1} and found["by"] == "a" and calls == [1]


def test_nothing_is_stored_when_the_entry_says_so(tmp_path):
    path = tmp_path / "k2.json"
    calls = []
    for _ in range(2):
        found, got = look_up_or_compute(path, "s/1", lambda: calls.append(1) or len(calls), lambda r: None)
        assert found is None and got == len(calls)
    assert calls == [1, 1] and not path.exists()
