"""The raw phase's reuse key (matrix/cells/rawkey.py): cells share raw findings only when everything the raw
phase reads is the same."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from matrix.cells import rawkey

ZOO = {"name": "unsloth_zoo", "version": "2026.9.3", "tree_sha256": "a" * 64}
TORCH = {"name": "torch", "version": "2.8.0+cpu", "tree_sha256": "b" * 64}
UNSLOTH = {"name": "unsloth", "version": "2026.10.9", "tree_sha256": "c" * 64}
TRL = {"name": "trl", "version": "0.24.0", "tree_sha256": "d" * 64}
ARGV = ["--device", "cpu", "--compile", "off", "--cpu-mode", "allow-cpu", "--step-timeout", "1800",
        "--check", "fused-ce-masked-nan"]
ENV = {"PATH": "/envs/cell-a/bin:/usr/bin", "PYTHONPATH": "/out/cells/a/pythonpath", "HF_HUB_OFFLINE": "1",
       "HOME": "/root"}


def key(installed=None, *, python: Path, options=None, env=None, probes: str = "p1", unimported=None) -> str:
    return rawkey.raw_key([TORCH, ZOO, UNSLOTH, TRL] if installed is None else installed,
                          unimported={"unsloth"} if unimported is None else unimported, interpreter=python,
                          probes=probes, options=ARGV if options is None else options,
                          env=ENV if env is None else env)


@pytest.fixture
def python(tmp_path: Path) -> Path:
    real = tmp_path / "python3.11"
    real.write_text("")
    return real


def with_(dist: dict, **changes: str) -> list[dict]:
    changed = {**copy.deepcopy(dist), **changes}
    return [changed if d["name"] == dist["name"] else d for d in (TORCH, ZOO, UNSLOTH, TRL)]


def test_a_guarded_unsloth_of_the_same_version_shares_the_raw_findings(python: Path) -> None:
    # the default matrix's two unsloth rows: our backport keeps the base version, changes the files
    assert key(with_(UNSLOTH, tree_sha256="e" * 64), python=python) == key(python=python)
    # the order the env lists its distributions in does not matter
    assert key([ZOO, TRL, UNSLOTH, TORCH], python=python) == key(python=python)


@pytest.mark.parametrize("installed", [
    with_(ZOO, tree_sha256="f" * 64),   # a backported zoo of the same version: other files
    with_(ZOO, version="2026.10.9"),
    with_(TORCH, version="2.9.0+cpu"),
    with_(TORCH, tree_sha256="f" * 64),
    with_(TRL, version="0.18.0"),       # the trainer stack
    with_(UNSLOTH, version="2026.11.1"),  # zoo reads whether unsloth is there and its metadata's version
    [TORCH, ZOO, TRL],                  # no unsloth installed at all
    [TORCH, ZOO, UNSLOTH, TRL, {"name": "xformers", "version": "1", "tree_sha256": "0" * 64}],
], ids=["zoo-digest", "zoo-version", "torch-version", "torch-digest", "trl", "unsloth-version", "no-unsloth",
        "one-more-dist"])
def test_anything_else_the_raw_phase_reads_does_not_reuse(python: Path, installed: list[dict]) -> None:
    assert key(installed, python=python) != key(python=python)


def test_unsloth_files_count_where_the_raw_phase_may_read_them(python: Path) -> None:
    # a subject whose raw phase is all there is (nothing left unimported): every distribution's files count
    changed = with_(UNSLOTH, tree_sha256="e" * 64)
    assert key(changed, python=python, unimported=set()) != key(python=python, unimported=set())


def test_options_probes_interpreter_and_environment_count(python: Path, tmp_path: Path) -> None:
    base = key(python=python)
    assert key(python=python, probes="p2") != base
    assert key(python=python, options=[*ARGV, "--no-train"]) != base
    assert key(python=python, options=[*ARGV, "--guard-module=pkg.guard"]) != base
    assert key(python=python, options=[*ARGV, "--check", "grpo-normalizer-nan"]) != base
    assert key(python=python, options=[a.replace("allow-cpu", "cpu-backend") for a in ARGV]) != base
    assert key(python=python, env={**ENV, "UNSLOTH_VLLM_STANDBY": "1"}) != base
    assert key(python=python, env={k: v for k, v in ENV.items() if k != "HF_HUB_OFFLINE"}) != base
    other = tmp_path / "python3.12"
    other.write_text("")
    assert key(python=other) != base


def test_the_cells_own_paths_and_noxs_bookkeeping_do_not_count(python: Path, tmp_path: Path) -> None:
    base = key(python=python)
    moved = {**ENV, "PATH": "/envs/cell-b/bin:/usr/bin", "PYTHONPATH": "/out/cells/b/pythonpath",
             "NOXSESSION": "cell(b)"}
    assert key(python=python, env=moved) == base
    link = tmp_path / "envs" / "cell-b" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(python)  # each cell env's bin/python points at the same interpreter
    assert key(python=link) == base


def test_prune_keeps_only_this_runs_findings(tmp_path: Path) -> None:
    for run in ("111", "222"):
        d = rawkey.cache_dir(tmp_path, run)
        d.mkdir(parents=True)
        (d / "x.json").write_text("{}")
    rawkey.prune(tmp_path, "222")
    assert [p.name for p in (tmp_path / rawkey.CACHE).iterdir()] == ["222"]
    rawkey.prune(tmp_path / "nowhere", "222")  # no cache yet: nothing to do
