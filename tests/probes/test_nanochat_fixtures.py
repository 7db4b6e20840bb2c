"""The nanochat check's offline stand-ins and tree lookup: layout and content, without nanochat, torch or pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.checks.nanochat_sft_masked_nan import corpus, fixtures, source, static


@pytest.fixture
def parquet_calls(monkeypatch: pytest.MonkeyPatch) -> dict[Path, list[dict[str, Any]]]:
    calls: dict[Path, list[dict[str, Any]]] = {}

    def fake(path: Path, rows: list[dict[str, Any]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("parquet stand-in", encoding="utf-8")
        calls[path] = rows

    monkeypatch.setattr(fixtures, "write_parquet", fake)
    return calls


def test_corpus_is_deterministic_and_places_the_long_conversations() -> None:
    rows = corpus.smoltalk(50, 10, offset=3)
    assert rows == corpus.smoltalk(50, 10, offset=3)
    masked = [i for i, r in enumerate(rows) if corpus.is_masked(r)]
    assert masked == [3, 13, 23, 33, 43]
    for r in rows:
        assert [m["role"] for m in r["messages"]] == ["user", "assistant"]
        assert r["messages"][1]["content"]
    assert not any(corpus.is_masked(r) for r in corpus.smoltalk(30, 0))


def test_task_row_shapes() -> None:
    q = corpus.mmlu(5)[0]
    assert len(q["choices"]) == 4 and 0 <= q["answer"] < 4 and q["question"]
    assert all("#### " in r["answer"] and "<<" in r["answer"] for r in corpus.gsm8k(5))
    words = corpus.word_list(n=40, long_words=2)
    assert sum(len(w) == corpus.LONG_WORD_CHARS for w in words) == 2
    assert all(w.isalpha() and w.islower() for w in words)


def test_task_rows_cover_both_loaders() -> None:
    rows = fixtures.task_rows()
    assert ("cais/mmlu", "all", "auxiliary_train") in rows  # master: load_hub_dataset("cais/mmlu", "all", ...)
    wrapped = rows[("cais/mmlu", "auxiliary_train", "train")]  # PR heads: load_dataset(..., "auxiliary_train")
    assert set(wrapped[0]) == {"train"} and wrapped[0]["train"] == rows[("cais/mmlu", "all", "auxiliary_train")][0]
    assert len(rows[("cais/mmlu", "all", "test")]) >= 5200 and len(rows[("openai/gsm8k", "main", "test")]) >= 420


def test_hub_cache_layout(tmp_path: Path, parquet_calls: dict[Path, Any]) -> None:
    written = fixtures.hub_task_data(tmp_path, {("owner/name", "default", "train"): [{"a": 1}]})
    folder = tmp_path / "task_data" / "owner--name" / "default" / "train"
    assert written == ["task_data/owner--name/default/train"]
    assert (folder / "manifest.json").read_text(encoding="utf-8") == '["00000.parquet"]'
    assert parquet_calls == {folder / "00000.parquet": [{"a": 1}]}


def test_local_dataset_folders_carry_a_card(tmp_path: Path, parquet_calls: dict[Path, Any]) -> None:
    repos = fixtures.local_datasets(tmp_path, fixtures.task_rows())
    assert repos == ["HuggingFaceTB/smol-smoltalk", "cais/mmlu", "openai/gsm8k"]
    meta = yaml.safe_load((tmp_path / "cais/mmlu/README.md").read_text(encoding="utf-8").split("---")[1])
    configs = {c["config_name"]: {f["split"]: f["path"] for f in c["data_files"]} for c in meta["configs"]}
    assert configs == {"all": {"test": "all/test-*.parquet"},
                       "auxiliary_train": {"train": "auxiliary_train/train-*.parquet"}}
    assert tmp_path / "cais/mmlu/auxiliary_train/train-00000.parquet" in parquet_calls
    assert not (tmp_path / "cais/mmlu/all/auxiliary_train-00000.parquet").exists()


def test_side_files(tmp_path: Path) -> None:
    fixtures.side_files(tmp_path)
    lines = (tmp_path / "identity_conversations.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == fixtures.SIZES["identity"] and lines[0].startswith('[{"role": "user"')
    assert len((tmp_path / "words_alpha.txt").read_text(encoding="utf-8").split()) > 100


def test_subprocess_env_is_offline_and_drops_harness_variables(tmp_path: Path) -> None:
    env = fixtures.env_for(tmp_path / "tree", tmp_path / "base",
                           {"PATH": "/bin", "UNSLOTH_ALLOW_CPU": "1", "SKEWMATRIX_SOURCE_NANOCHAT": "/x"})
    assert env["PATH"] == "/bin" and "UNSLOTH_ALLOW_CPU" not in env and "SKEWMATRIX_SOURCE_NANOCHAT" not in env
    assert env["PYTHONPATH"] == str(tmp_path / "tree") and env["NANOCHAT_BASE_DIR"] == str(tmp_path / "base")
    assert env["HF_DATASETS_OFFLINE"] == env["HF_HUB_OFFLINE"] == "1" and env["WANDB_MODE"] == "disabled"


def tree(root: Path, files: tuple[str, ...] = (source.GPT, source.SFT)) -> Path:
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# stand-in\n", encoding="utf-8")
    return root


def test_tree_from_the_handoff(tmp_path: Path) -> None:
    root = tree(tmp_path)
    assert source.find_tree({"nanochat": str(root)}) == root.resolve()


def test_a_tree_without_the_script_is_refused_by_name(tmp_path: Path) -> None:
    root = tree(tmp_path, (source.GPT,))
    with pytest.raises(source.NoTree, match=r"scripts/chat_sft\.py"):
        source.find_tree({"nanochat": str(root)})


def test_no_tree_at_all_is_a_clear_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source.importlib.util, "find_spec", lambda name: None)
    r = static.detect()
    assert r["verdict"] == "unknown" and "no --tree nanochat=PATH given" in r["reason"]
    assert r["loop"]["verdict"] == "unknown"
