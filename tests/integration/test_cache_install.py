"""An install from uv's cache, with real uv and a real index (``matrix.cells.install``).

A private uv cache starts cold, so the first install cannot come from it and falls back to the index; the
second comes from the cache, and the index's answer agrees with the env. An env moved off that answer (another
version of the package installed into it) is named by the check, which asks for a redo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.cells import install
from matrix.cells.installed import installed
from matrix.envs.recipe import Recipe
from matrix.envs.tools import run_tool, uv_bin

pytestmark = pytest.mark.integration
HOW = Recipe(python="3.11", requirements=("packaging",), overrides=("packaging==24.1",))


def install_and_check(env: Path, work: Path, moved: str | None = None) -> tuple[bool, dict]:
    """Install HOW into ``env`` the way a cell does (``moved``: a pin installed over it before the check is
    read); whether the install came from the cache, and the check."""
    cached = install.prepare(env, HOW.python, True, HOW, True)
    assert cached  # an empty env and requirement lines: the cache is tried first
    with install.asking(HOW, work, [], env / "bin" / "python", cached) as asked:
        res, _ = install.install(HOW, env, HOW.python, work, 300, lambda _: None, asked, cached, work / "log")
        assert res.ok, res.tail()
        if moved:
            assert run_tool([uv_bin(), "pip", "install", "-q", "--python", str(env / "bin" / "python"), moved]).ok
        record = {"installed": installed(env)}
        asked.read(record, lambda *a, **k: None)
    return asked.from_cache, record


def test_a_cold_cache_falls_back_to_the_index_and_a_warm_one_is_confirmed_by_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    work = tmp_path / "work"
    work.mkdir()
    from_cache, record = install_and_check(tmp_path / "cold", work)
    assert not from_cache and record["install_check"]["from_cache"] is False
    log = (work / "log").read_text()
    assert "== from uv's cache (exit 1)" in log and "== from the index (exit 0)" in log  # offline: no versions
    assert record["admissible"]["value"] is True
    from_cache, record = install_and_check(tmp_path / "warm", work)
    assert from_cache and [(d["name"], d["version"]) for d in record["installed"]] == [("packaging", "24.1")]
    assert record["install_check"]["matches_index"] is True and record["install_check"]["redo"] is False
    from_cache, record = install_and_check(tmp_path / "moved", work, moved="packaging==23.2")
    check = record["install_check"]
    assert from_cache and check["redo"] is True and check["matches_index"] is False
    assert check["drift"] == ["packaging: the env has 23.2, the index resolves 24.1"]
