"""Offline stand-ins for a ``chat_sft.py`` run, built with the tree's own code into a ``NANOCHAT_BASE_DIR``.

Nothing in the tree is edited; everything lands in ``base`` (and a ``hub/``
folder inside it that is the run's working directory):

* pretraining shards ``base_data_climbmix/shard_0000{0,1}.parquet`` (column
  ``text``, the last shard is val), so the tree's own ``scripts/tok_train.py``
  trains the tokenizer and writes ``tokenizer/tokenizer.pkl`` and
  ``tokenizer/token_bytes.pt``, unmodified, as a subprocess;
* a base checkpoint ``base_checkpoints/d2/model_000000.pt`` + ``meta_000000.json``
  written by the tree's ``checkpoint_manager.save_checkpoint`` from a tiny
  ``GPTConfig`` built and initialised the tree's way (meta device,
  ``init_weights``; parameters zeroed first, see :func:`model.zero_fill`);
* task data, in both forms the refs read:
  - ``tasks/common.py:load_hub_dataset`` (master) downloads only when
    ``task_data/<owner--name>/<subset>/<split>/manifest.json`` is missing:
    the manifest and its parquet shard are written here, so it reads them;
  - ``datasets.load_dataset("<owner>/<name>", <config>, split=...)`` (the PR
    heads) loads a *local directory* of that relative path when one exists
    in the working directory, taking configs and splits from the YAML of its
    ``README.md`` -- the hub's own dataset-card format. ``hub/<owner>/<name>/``
    is that directory and the run's cwd is ``hub/`` (with
    ``HF_DATASETS_OFFLINE=1``; no dataset script, no cache surgery);
* ``words_alpha.txt`` and ``identity_conversations.jsonl`` in the base dir,
  where the PR heads' ``download_file_with_lock`` and ``CustomJSON`` look
  first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import corpus

VOCAB = 512  # tok_train's floor is 256 + its special tokens
MAX_SEQ_LEN = 2048  # render_conversation truncates at 2048: a long user turn fills one row with no target
MODEL = {"n_layer": 2, "n_head": 2, "n_kv_head": 2, "n_embd": 32, "window_pattern": "L"}
MODEL_TAG = "d2"
# The val tasks are sliced with stop=5200 (MMLU) and stop=420 (GSM8K) in every ref: they need that many rows.
SIZES = {"smoltalk_train": 600, "smoltalk_every": 40, "small": 150, "val": 40, "mmlu_val": 5200, "gsm8k_val": 420,
         "identity": 40}


class FixtureError(Exception):
    """A stand-in could not be built; the message says which and why."""


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def task_rows() -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Every (repo, config, split) any ref reads, in the column layout that ref expects. The PR heads read MMLU's
    auxiliary_train as config "auxiliary_train", split "train", each row wrapped in a "train" struct."""
    aux = corpus.mmlu(SIZES["small"])
    return {
        ("HuggingFaceTB/smol-smoltalk", "default", "train"): corpus.smoltalk(SIZES["smoltalk_train"],
                                                                              SIZES["smoltalk_every"]),
        ("HuggingFaceTB/smol-smoltalk", "default", "test"): corpus.smoltalk(SIZES["val"], 0, seed=7),
        ("cais/mmlu", "all", "auxiliary_train"): aux,
        ("cais/mmlu", "all", "test"): corpus.mmlu(SIZES["mmlu_val"], seed=8),
        ("cais/mmlu", "auxiliary_train", "train"): [{"train": row} for row in aux],
        ("openai/gsm8k", "main", "train"): corpus.gsm8k(SIZES["small"]),
        ("openai/gsm8k", "main", "test"): corpus.gsm8k(SIZES["gsm8k_val"], seed=9),
    }


def hub_task_data(base: Path, rows: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    """master's ``load_hub_dataset`` cache: manifest + one shard per (repo, subset, split)."""
    written = []
    for (repo, subset, split), data in rows.items():
        folder = base / "task_data" / repo.replace("/", "--") / subset / split
        write_parquet(folder / "00000.parquet", data)
        (folder / "manifest.json").write_text(json.dumps(["00000.parquet"]), encoding="utf-8")
        written.append(str(folder.relative_to(base)))
    return written


def card(configs: dict[str, list[str]]) -> str:
    """A dataset card whose YAML maps each config's splits to its parquet files (the hub's own format)."""
    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split in splits:
            lines += [f"  - split: {split}", f"    path: {config}/{split}-*.parquet"]
    return "\n".join([*lines, "---", "", "Synthetic stand-in written by skewmatrix; not the real dataset.", ""])


def local_datasets(hub: Path, rows: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    """``hub/<owner>/<name>/`` folders that ``datasets.load_dataset("<owner>/<name>", ...)`` loads from the cwd."""
    by_repo: dict[str, dict[str, list[str]]] = {}
    for (repo, config, split), data in rows.items():
        if (repo, config, split) == ("cais/mmlu", "all", "auxiliary_train"):
            continue  # load_dataset reads this split as config "auxiliary_train", split "train"
        write_parquet(hub / repo / config / f"{split}-00000.parquet", data)
        by_repo.setdefault(repo, {}).setdefault(config, []).append(split)
    for repo, configs in by_repo.items():
        (hub / repo / "README.md").write_text(card(configs), encoding="utf-8")
    return sorted(by_repo)


def side_files(base: Path) -> None:
    (base / "words_alpha.txt").write_text("\n".join(corpus.word_list()) + "\n", encoding="utf-8")
    (base / "identity_conversations.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in corpus.identity(SIZES["identity"])), encoding="utf-8")


def env_for(tree: Path, base: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every subprocess on this tree: the tree importable, the base dir, offline."""
    source = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in source.items() if not k.startswith(("UNSLOTH_", "SKEWMATRIX_"))}
    env.update(PYTHONPATH=str(tree), NANOCHAT_BASE_DIR=str(base), HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               HF_HOME=str(base / "hf_home"), HF_DATASETS_CACHE=str(base / "hf_datasets"), WANDB_MODE="disabled",
               OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"), PYTHONUNBUFFERED="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def python_argv() -> list[str]:
    """``python -P``: the cwd (``hub/``, full of dataset folders) is not put on sys.path."""
    return [sys.executable, "-P"] if sys.version_info >= (3, 11) else [sys.executable]


def tokenizer(tree: Path, base: Path, timeout: float = 600) -> dict[str, Any]:
    """The tree's ``scripts/tok_train.py``, unmodified, on the pretraining shards."""
    docs = corpus.pretraining_docs()
    write_parquet(base / "base_data_climbmix" / "shard_00000.parquet", [{"text": d} for d in docs])
    write_parquet(base / "base_data_climbmix" / "shard_00001.parquet", [{"text": d} for d in docs[:40]])
    argv = [*python_argv(), "-m", "scripts.tok_train", f"--vocab-size={VOCAB}",
            f"--max-chars={sum(map(len, docs)) + 1}"]
    out = subprocess.run(argv, cwd=base, env=env_for(tree, base), capture_output=True, text=True,
                         timeout=timeout, check=False)
    if out.returncode != 0 or not (base / "tokenizer" / "token_bytes.pt").is_file():
        raise FixtureError(f"scripts/tok_train.py exited {out.returncode}: {(out.stderr or out.stdout)[-600:]}")
    return {"argv": ["python", *argv[1:]], "stdout_tail": out.stdout.strip().splitlines()[-3:]}


def checkpoint(tree: Path, base: Path) -> dict[str, Any]:
    """A tiny base checkpoint through the tree's own GPT and checkpoint manager (step 0), and checks on the data
    made with the tree's own tokenizer: every long conversation renders with no trainable token."""
    import dataclasses

    import torch

    from . import model as tiny

    tiny.nanochat(tree)
    old = os.environ.get("NANOCHAT_BASE_DIR")
    os.environ["NANOCHAT_BASE_DIR"] = str(base)
    try:
        from nanochat import checkpoint_manager, gpt
        from nanochat.tokenizer import get_tokenizer

        tok = get_tokenizer()
        vocab = tok.get_vocab_size()
        fields = {f.name for f in dataclasses.fields(gpt.GPTConfig)}
        cfg = {k: v for k, v in {"sequence_len": MAX_SEQ_LEN, "vocab_size": vocab, **MODEL}.items() if k in fields}
        torch.manual_seed(0)
        with torch.device("meta"):
            model = gpt.GPT(gpt.GPTConfig(**cfg))
        model.to_empty(device="cpu")
        tiny.zero_fill(model)
        model.init_weights()
        meta = {"step": 0, "model_config": cfg, "user_config": {}, "max_seq_len": MAX_SEQ_LEN,
                "device_batch_size": 1, "total_batch_size": MAX_SEQ_LEN}
        checkpoint_manager.save_checkpoint(str(base / "base_checkpoints" / MODEL_TAG), 0,
                                           {k: v.float() for k, v in model.state_dict().items()}, None, meta)
        checks = verify(tok)
    finally:
        if old is None:
            os.environ.pop("NANOCHAT_BASE_DIR", None)
        else:
            os.environ["NANOCHAT_BASE_DIR"] = old
    return {"model_config": cfg, "vocab_size": vocab, **checks}


def verify(tok: Any) -> dict[str, Any]:
    """With the tree's tokenizer: the long conversations keep no trainable token, the long words pass the limit."""
    rows = corpus.smoltalk(SIZES["smoltalk_train"], SIZES["smoltalk_every"])
    masked = [r for r in rows if corpus.is_masked(r)]
    kept = [sum(tok.render_conversation(r)[1]) for r in masked]
    if not masked or any(kept):
        raise FixtureError(f"a long conversation kept trainable tokens after render_conversation: {kept}")
    longs = [w for w in corpus.word_list() if len(w) >= corpus.LONG_WORD_CHARS]
    tokens = [len(tok.encode(w)) for w in longs]
    if any(n <= corpus.RENDER_LIMIT for n in tokens):
        raise FixtureError(f"a long spelling word is only {min(tokens)} tokens (needs > {corpus.RENDER_LIMIT})")
    return {"masked_conversations": len(masked), "conversations": len(rows), "long_word_tokens": tokens}


def build(tree: Path, base: Path) -> dict[str, Any]:
    """Every stand-in for ``tree`` into ``base``; what was written and how long each part took."""
    times: dict[str, float] = {}
    base.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    rows = task_rows()
    manifest: dict[str, Any] = {"base_dir": str(base), "hub_dir": str(base / "hub"),
                                "task_data": hub_task_data(base, rows),
                                "local_datasets": local_datasets(base / "hub", rows)}
    side_files(base)
    times["data_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    manifest["tokenizer"] = tokenizer(tree, base)
    times["tokenizer_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    manifest["checkpoint"] = checkpoint(tree, base)
    times["checkpoint_s"] = round(time.perf_counter() - t, 3)
    manifest["seconds"] = times
    return manifest
