"""The installed-tree digest does not depend on where the env lives; the env a cell probed stays put."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from matrix.cells.installed import tree_digest


def record(tmp: Path, name: str, shebang_hash: str) -> Path:
    p = tmp / name
    p.write_text(
        "demo/__init__.py,sha256=AAA,10\n"
        "demo/__pycache__/__init__.cpython-311.pyc,,\n"
        f"../../../bin/demo,sha256={shebang_hash},200\n"
        "demo-1.0.dist-info/INSTALLER,sha256=CCC,3\n"
        "demo-1.0.dist-info/RECORD,,\n"
    )
    return p


def test_digest_ignores_scripts_and_installer_files(tmp_path: Path) -> None:
    assert tree_digest(record(tmp_path, "a", "X1")) == tree_digest(record(tmp_path, "b", "X2"))


def test_digest_changes_with_package_content(tmp_path: Path) -> None:
    a = record(tmp_path, "a", "X")
    b = tmp_path / "b"
    b.write_text(a.read_text().replace("sha256=AAA", "sha256=AAB"))
    assert tree_digest(a) != tree_digest(b)


# --- the pair under test stays put (issue #30): the before/after comparison ---

def dist(sp: Path, name: str, version: str, files: dict[str, str]) -> None:
    """A distribution installed into ``sp`` the way an installer leaves it: its files, METADATA and RECORD."""
    info = sp / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    rows = []
    for rel, text in files.items():
        (sp / rel).parent.mkdir(parents=True, exist_ok=True)
        (sp / rel).write_text(text, encoding="utf-8")
        rows.append(f"{rel},sha256={text.encode().hex()},{len(text)}")  # RECORD's digest column: any stand-in
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/RECORD,,"]) + "\n", encoding="utf-8")


def env(tmp_path: Path) -> tuple[Path, Path]:
    sp = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    dist(sp, "unsloth_zoo", "2024.12.1", {"unsloth_zoo/__init__.py": "old = 1\n", "unsloth_zoo/loss.py": "x\n"})
    dist(sp, "torch", "2.12.1", {"torch/__init__.py": "t\n"})
    (sp / "_virtualenv.pth").write_text("import _virtualenv\n", encoding="utf-8")  # an installer's own file
    return tmp_path / "env", sp


def test_an_untouched_env_has_no_changes(tmp_path: Path) -> None:
    from matrix.cells.installed import changes, snapshot

    root, _ = env(tmp_path)
    deep = {"unsloth-zoo"}
    assert changes(snapshot(root, deep), snapshot(root, deep)) == []


def test_an_upgrade_during_the_probes_names_the_package_and_both_versions(tmp_path: Path) -> None:
    import shutil

    from matrix.cells.installed import changes, snapshot

    root, sp = env(tmp_path)
    before = snapshot(root, {"unsloth-zoo"})
    # what `pip install --upgrade unsloth_zoo` inside `import unsloth` does: another version's dist-info
    shutil.rmtree(sp / "unsloth_zoo-2024.12.1.dist-info")
    dist(sp, "unsloth_zoo", "2025.3.17", {"unsloth_zoo/__init__.py": "new = 1\n"})
    assert changes(before, snapshot(root, {"unsloth-zoo"})) == ["unsloth_zoo 2024.12.1 -> 2025.3.17"]


def test_installs_removals_edits_in_place_and_loose_files_are_named(tmp_path: Path) -> None:
    import shutil

    from matrix.cells.installed import changes, snapshot

    root, sp = env(tmp_path)
    before = snapshot(root, {"unsloth-zoo"})
    dist(sp, "tiny", "1.0", {"tiny/__init__.py": ""})  # a package installed at import
    shutil.rmtree(sp / "torch-2.12.1.dist-info")  # one uninstalled
    shutil.rmtree(sp / "torch")
    (sp / "unsloth_zoo" / "loss.py").write_text("patched\n", encoding="utf-8")  # the pair's file edited in place
    (sp / "sneaky.py").write_text("", encoding="utf-8")  # a module written into site-packages
    assert changes(before, snapshot(root, {"unsloth-zoo"})) == [
        "tiny 1.0 installed (absent before)",
        "torch 2.12.1 removed",
        "unsloth_zoo 2024.12.1: installed files changed on disk (unsloth_zoo/loss.py)",
        "site-packages/sneaky.py appeared",
    ]


def test_a_cell_whose_probes_changed_the_env_is_an_error_naming_the_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from matrix.cells import cell as cell_mod
    from matrix.envs import envrun
    from matrix.envs.tools import Ran
    from matrix.spec import CellOptions

    root, sp = env(tmp_path)

    def probes_that_upgrade_zoo(argv: list[str], *, cwd: Path, env: dict[str, str], **_: Any) -> Ran:
        assert env["PATH"].split(":")[0] == str(root / "bin")  # `pip` is the env's own, as when activated
        assert env["UNSLOTH_DISABLE_AUTO_UPDATES"] == "1" and env["PIP_NO_INDEX"] == "1"
        shutil.rmtree(sp / "unsloth_zoo-2024.12.1.dist-info")
        dist(sp, "unsloth_zoo", "2025.3.17", {"unsloth_zoo/__init__.py": "new = 1\n"})
        (cwd / "probes.json").write_text('{"checks": {}}', encoding="utf-8")  # the probes themselves passed
        return Ran(argv, 0)

    monkeypatch.setattr(envrun, "run", probes_that_upgrade_zoo)
    monkeypatch.setattr(cell_mod, "installed", lambda env_dir: [])  # no index look-ups
    builds = {"unsloth": {"package": "unsloth"}, "zoo": {"package": "unsloth-zoo"}}
    run = cell_mod.CellRun("u__z", builds, CellOptions(), "m", tmp_path / "out")
    record = cell_mod.record_and_probe(run, root, root / "bin" / "python", lambda _: None)
    assert record["error"]["kind"] == "probe"
    assert "unsloth_zoo 2024.12.1 -> 2025.3.17" in record["error"]["message"]
    assert record["stay_put"]["changes"] == ["unsloth_zoo 2024.12.1 -> 2025.3.17"]
    # the same probes leaving the env alone: no error
    monkeypatch.setattr(envrun, "run", lambda argv, *, cwd, **_: (cwd / "probes.json").write_text(
        '{"checks": {}}', encoding="utf-8") and Ran(argv, 0))
    again = cell_mod.record_and_probe(cell_mod.CellRun("u__z", builds, CellOptions(), "m", tmp_path / "out"), root,
                                      root / "bin" / "python", lambda _: None)
    assert again["error"] is None and again["stay_put"]["changes"] == []
