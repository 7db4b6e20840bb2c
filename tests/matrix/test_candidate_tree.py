"""The gate's structural verdict for a candidate tree (``matrix.scan.history.candidate_tree``), on trees and zoo
sources written here: the zoo side is the pair reader's real symbol table of a small zoo written here."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from matrix.cli import release_gate
from matrix.scan.history import candidate_tree as trees
from matrix.scan.history import readers

ZOO = {  # the zoo release every test judges against
    "unsloth_zoo/__init__.py": "__version__ = '2026.9.1'\n",
    "unsloth_zoo/utils.py": "def Version(v):\n    return v\n\ndef _get_dtype(x):\n    return x\n",
    "unsloth_zoo/rl_replacements.py": "RL_REPLACEMENTS = {}\n",
}
GOOD = {  # references only names ZOO defines
    "unsloth/__init__.py": "from unsloth_zoo.utils import Version\nfrom .models import rl\n",
    "unsloth/models/__init__.py": "",
    "unsloth/models/rl.py": "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS\n",
}
# the same tree, but its import-time module imports a name ZOO lacks: `import unsloth` fails
BAD = {**GOOD, "unsloth/models/rl.py": "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS, sanitize_logprob\n"}
PYPROJECT = '''[project]
name = "unsloth"
version = "2026.11.1.dev0"
dependencies = ["unsloth_zoo>=2026.9.1", "torch>=2.4"]

[project.optional-dependencies]
huggingface = ["unsloth_zoo>=2026.9.5; python_version >= '3.9'", "trl"]
'''


def write(root: Path, files: dict[str, str]) -> Path:
    for member, text in files.items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_text(text, encoding="utf-8")
    return root


def zoo_row(version: str, files: dict[str, str] = ZOO) -> dict[str, Any]:
    _, t = readers.pair_target()
    return {"version": version, "table": t.definitions(files), "error": None}


def test_a_checkouts_floor_comes_from_its_pyproject(tmp_path: Path) -> None:
    from matrix.scan.history.metadata_caps import unsloth_side

    tree = write(tmp_path, {**GOOD, "pyproject.toml": PYPROJECT})
    meta = trees.tree_metadata(tree)
    side = unsloth_side(meta)
    assert (side["plain"], side["floor"]) == (">=2026.9.1", "2026.9.1")  # the extra's higher floor is not plain
    assert trees.version_of(meta) == "2026.11.1.dev0"
    dynamic = write(tmp_path / "dyn", {"pyproject.toml": '[project]\nname = "unsloth"\ndynamic = ["dependencies"]\n'})
    assert trees.tree_metadata(dynamic) is None and unsloth_side(None)["floor"] is None


def test_an_unpacked_wheel_and_a_wheel_file_read_alike(tmp_path: Path) -> None:
    meta = "Metadata-Version: 2.1\nName: unsloth\nVersion: 2026.10.9\nRequires-Dist: unsloth_zoo>=2026.10.9\n"
    tree = write(tmp_path / "unpacked", {**GOOD, "unsloth-2026.10.9.dist-info/METADATA": meta})
    wheel = tmp_path / "unsloth-2026.10.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for member, text in {**GOOD, "unsloth-2026.10.9.dist-info/METADATA": meta}.items():
            zf.writestr(member, text)
    assert trees.read_candidate(tree, "unsloth") == trees.read_candidate(wheel, "unsloth") == (GOOD, meta)
    # a src layout, and a path that is the package folder itself
    src = write(tmp_path / "srclayout", {f"src/{k}": v for k, v in GOOD.items()})
    assert trees.tree_sources(src, "unsloth") == GOOD
    assert trees.tree_sources(tree / "unsloth", "unsloth") == GOOD
    assert trees.tree_sources(tmp_path, "unsloth") == {}


def test_a_tree_that_imports_a_name_the_zoo_lacks_is_incompatible() -> None:
    bad = trees.judge_tree(BAD, None, [zoo_row("2026.9.1")], "dev")
    assert [p["verdict"] for p in bad["pairs"]] == ["incompatible"] and len(bad["bad"]) == 1
    missing = bad["bad"][0]["missing"][0]
    assert missing["name"] == "unsloth_zoo.rl_replacements.sanitize_logprob" and missing["breaks"] == "import"
    assert missing["where"][0]["file"] == "unsloth/models/rl.py"
    assert "sanitize_logprob" in bad["line"]
    good = trees.judge_tree(GOOD, None, [zoo_row("2026.9.1")], "dev")
    assert [p["verdict"] for p in good["pairs"]] == ["compatible"] and not good["bad"]


def test_only_zoo_releases_a_plain_install_can_pick_fail_it() -> None:
    meta = "Metadata-Version: 2.1\nName: unsloth\nVersion: 1\nRequires-Dist: unsloth_zoo>=2026.9.2\n"
    fixed_zoo = {**ZOO, "unsloth_zoo/rl_replacements.py": "RL_REPLACEMENTS = {}\nsanitize_logprob = None\n"}
    got = trees.judge_tree(BAD, meta, [zoo_row("2026.9.1"), zoo_row("2026.9.2", fixed_zoo)], "1")
    assert {p["zoo"]: p["verdict"] for p in got["pairs"]} == {"2026.9.1": "incompatible", "2026.9.2": "compatible"}
    assert got["floor"] == "2026.9.2" and not got["bad"]  # the broken zoo is below the floor: a pin reaches it
    low = meta.replace(">=2026.9.2", ">=2026.9.1")
    assert [p["zoo"] for p in trees.judge_tree(BAD, low, [zoo_row("2026.9.1")], "1")["bad"]] == ["2026.9.1"]


def test_the_tree_gate_reads_the_floor_and_fails_on_an_incompatible_pick(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def rows(spec: str, log: Any, **kw: Any) -> tuple[list[dict[str, Any]], str]:
        asked.append(spec)
        return [zoo_row("2026.9.1")], "2026.9.1"

    monkeypatch.setattr(trees, "zoo_rows", rows)
    lines: list[str] = []
    bad = write(tmp_path / "bad", {**BAD, "pyproject.toml": PYPROJECT})
    assert trees.structural_tree_gate(bad, lines.append) is True
    assert asked == [">=2026.9.1"]
    assert any("zoo 2026.9.1: incompatible, missing unsloth_zoo.rl_replacements.sanitize_logprob "
               "(unsloth/models/rl.py:1)" in x for x in lines)
    good = write(tmp_path / "good", {**GOOD, "pyproject.toml": PYPROJECT})
    assert trees.structural_tree_gate(good, lines.append, upto="2026.9.9") is False
    assert asked[-1] == ">=2026.9.1,<=2026.9.9"
    # no readable floor: the newest zoo only, and the log says so
    nofloor = write(tmp_path / "nofloor", GOOD)
    assert trees.structural_tree_gate(nofloor, lines.append) is False and asked[-1] == "=={newest}"
    assert any("judged against the newest zoo only" in x for x in lines)
    assert trees.structural_tree_gate(tmp_path / "nofloor" / "unsloth" / "models", lines.append) is False
    assert "n/a: no unsloth package" in lines[-1]


def test_the_gate_judges_path_candidates_from_their_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(trees, "structural_tree_gate", lambda path, log: seen.append(path) or True)
    monkeypatch.setattr("matrix.scan.history.structural_gate", lambda version, log: seen.append(version) or False)
    out = tmp_path / "gate"
    write(tmp_path / "checkout", {**BAD, "pyproject.toml": PYPROJECT})
    candidate, _ = release_gate.candidate_build(str(tmp_path / "checkout"), out)
    assert release_gate.structural_verdict(candidate, out, lambda _m: None) is True
    assert seen == [out / "candidate" / "checkout"]
    assert release_gate.structural_verdict({"source": "pypi", "version": "2026.10.9"}, out, lambda _m: None) is False
    assert seen[-1] == "2026.10.9"


def test_a_git_candidate_is_read_from_its_checkout(tmp_path: Path) -> None:
    import subprocess

    repo = write(tmp_path / "repo", {**BAD, "pyproject.toml": PYPROJECT})
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "tree"]):
        subprocess.run([*git, *argv], check=True, capture_output=True)
    lines: list[str] = []
    tree = trees.candidate_path({"source": "git", "url": str(repo), "ref": "main"}, tmp_path / "gate", lines.append)
    assert tree is not None and trees.read_candidate(tree, "unsloth")[0] == BAD
    assert trees.candidate_path({"source": "git", "url": str(repo), "ref": "nope"}, tmp_path / "gate",
                                lines.append) is None
    assert lines[-1].startswith("gate: structural: n/a: cannot check out")
