"""A warm history judges nothing: whole rows come back from ``history_run.RowCache``; and ``history.json`` is
written in pieces that read back as the same document."""

from __future__ import annotations

import json
from pathlib import Path

from matrix.scan.history import grid, readers
from matrix.scan.history.history_cmd import json_chunks, write_json
from matrix.scan.history.history_run import RowCache
from probes.checks.pair_compat.pairs import TARGET
from tests.history_inputs import refs, table

UNS = [{"version": "10", "refs": refs("unsloth_zoo.loss.b"), "plain": None, "sha256": "u10"}]
ZOO = [{"version": "1.0", "table": table("a"), "sha256": "z1"}, {"version": "2.0", "table": table("a", "b"),
                                                                "sha256": "z2"}]


class Refusing:
    """The pair reader with a judge that must not run (a warm grid judges nothing)."""

    def __getattr__(self, name: str) -> object:
        if name in ("judge", "prepare"):
            raise AssertionError(f"{name} called on a warm row")
        return getattr(TARGET, name)


def test_a_warm_row_is_read_back_not_judged_and_a_new_zoo_window_judges_again(tmp_path: Path) -> None:
    cold = grid.judge_all(TARGET, UNS, ZOO, RowCache(tmp_path, "reader1", ZOO))
    warm = grid.judge_all(Refusing(), UNS, ZOO, RowCache(tmp_path, "reader1", ZOO))  # type: ignore[arg-type]
    assert warm == cold and [p["verdict"] for p in warm["pairs"]] == ["incompatible", "compatible"]
    assert [c["pairs"] for c in warm["classes"]] == [1, 1]
    store = RowCache(tmp_path, "reader1", [*ZOO, {"version": "3.0", "sha256": "z3"}])
    assert store.get(UNS[0]) is None  # another window: another key
    assert RowCache(tmp_path, "reader2", ZOO).get(UNS[0]) is None  # another reader's code: judged again


def test_the_document_written_in_pieces_reads_back_whole(tmp_path: Path) -> None:
    doc = {"schema": "s", "pairs": [{"unsloth": str(i), "missing": [{"name": "x"}]} for i in range(250)],
           "lines": ["a"], "empty": []}
    assert json.loads("".join(json_chunks(doc))) == doc
    write_json(tmp_path / "history.json", doc)
    assert json.loads((tmp_path / "history.json").read_text()) == doc
    assert [p.name for p in tmp_path.iterdir()] == ["history.json"]  # no temporary file left


def test_a_release_is_analysed_in_a_worker_process_and_a_closure_here() -> None:
    """The reader's analysis (a module-level function) runs in the pool's worker processes and comes back as
    the same JSON; an analyser that cannot be pickled runs in this process; closing the pool stops the workers."""
    sources = {"unsloth/a.py": "import unsloth_zoo\n", "unsloth/b.py": "x = 1\n"}
    try:
        pooled = readers.want("unsloth", TARGET.references, "k").closure(list(sources), sources.__getitem__)
        assert readers.worker_pids(), "the analysis ran without starting a worker"
        assert json.loads(pooled[readers.ANALYSIS]) == json.loads(json.dumps(TARGET.references(sources)))
    finally:
        readers.close_pool()
    assert readers.worker_pids() == []
    here = readers.want("unsloth", lambda s: {"n": len(s)}, "k").closure(list(sources), sources.__getitem__)
    assert json.loads(here[readers.ANALYSIS]) == {"n": 2} and readers.worker_pids() == []


def test_an_analysis_read_as_text_is_parsed_later_and_an_error_stays_as_it_was() -> None:
    got = [{"analysis": json.dumps({"refs": [1]}), "sha256": "a"}, {"error": "x.whl: truncated", "sha256": "b"},
           {"analysis": '{"refs": [', "sha256": "c"}]
    back = readers.parsed(got)
    assert back[:2] == [{"analysis": {"refs": [1]}, "sha256": "a"}, {"error": "x.whl: truncated", "sha256": "b"}]
    assert back[2]["error"].startswith("analysis: ") and "analysis" not in back[2]  # an error, not a crash
