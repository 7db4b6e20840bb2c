"""The installed-tree digest does not depend on where the env lives."""

from __future__ import annotations

from pathlib import Path

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
