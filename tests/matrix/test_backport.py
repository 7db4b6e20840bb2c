"""The backport builder on a small wheel of our own making."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from matrix import settings
from matrix.errors import BackportError
from matrix.sources.backport_build import build_backport, load_manifest, pack, unpack

INIT = "import os\nfrom .core import thing\nVALUE = 1\nVALUE = 1\n"


def make_wheel(tmp: Path) -> Path:
    root = tmp / "src"
    (root / "demo").mkdir(parents=True, exist_ok=True)
    (root / "demo" / "__init__.py").write_text(INIT)
    (root / "demo" / "core.py").write_text("thing = 2\n")
    di = root / "demo-1.0.dist-info"
    di.mkdir(exist_ok=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    (di / "WHEEL").write_text("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    (di / "RECORD").write_text("")
    wheel = tmp / "demo-1.0-py3-none-any.whl"
    pack(root, wheel)
    return wheel


def backport(tmp: Path, manifest: str, files: dict[str, str] | None = None) -> Path:
    d = tmp / "bp"
    d.mkdir(exist_ok=True)
    (d / "backport.toml").write_text(manifest)
    for rel, text in (files or {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return d


def build(tmp: Path, manifest: str, files: dict[str, str] | None = None) -> Path:
    wheel = make_wheel(tmp)
    return build_backport(load_manifest(backport(tmp, manifest, files)), wheel, "abc", tmp / "out", "demo-bp")


def read(wheel: Path, member: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member).decode()


def test_add_and_insert_keep_version_and_rewrite_record(tmp_path: Path) -> None:
    wheel = build(tmp_path, """package = "demo"
[[add]]
src = "files/guard.py"
dest = "demo/guard.py"
[[insert]]
file = "demo/__init__.py"
anchor = '^from \\.core import thing$'
text = "from .guard import install\\n"
""", {"files/guard.py": "def install():\n    return True\n"})
    assert wheel.name == "demo-1.0-py3-none-any.whl"
    assert read(wheel, "demo/__init__.py") == "import os\nfrom .core import thing\nfrom .guard import install\n" \
        "VALUE = 1\nVALUE = 1\n"
    record = read(wheel, "demo-1.0.dist-info/RECORD").splitlines()
    assert any(r.startswith("demo/guard.py,sha256=") for r in record)
    assert "demo-1.0.dist-info/RECORD,," in record
    assert '"backport": "bp"' in read(wheel, "demo-1.0.dist-info/SKEWMATRIX_BACKPORT.json")


def test_rebuild_is_deterministic(tmp_path: Path) -> None:
    manifest = ('package = "demo"\n[[insert]]\nfile = "demo/core.py"\nanchor = "^thing"\nwhere = "before"\n'
                'text = "x = 1"\n')
    a = build(tmp_path, manifest).read_bytes()
    b = build(tmp_path, manifest).read_bytes()
    assert a == b


def test_missing_anchor_names_file_anchor_and_build(tmp_path: Path) -> None:
    with pytest.raises(BackportError) as err:
        build(tmp_path,
              'package = "demo"\n[[insert]]\nfile = "demo/__init__.py"\nanchor = "^import sys$"\ntext = "x"\n')
    msg = str(err.value)
    assert "build demo-bp" in msg and "'^import sys$'" in msg and "matches no line" in msg and "demo/__init__.py" in msg


def test_ambiguous_anchor_lists_the_lines(tmp_path: Path) -> None:
    with pytest.raises(BackportError) as err:
        build(tmp_path, 'package = "demo"\n[[insert]]\nfile = "demo/__init__.py"\nanchor = "^VALUE"\ntext = "x"\n')
    assert "matches 2 lines (3, 4)" in str(err.value) and "exactly one line" in str(err.value)


def test_patch_that_does_not_apply(tmp_path: Path) -> None:
    diff = "--- a/demo/core.py\n+++ b/demo/core.py\n@@ -1 +1 @@\n-thing = 3\n+thing = 4\n"
    with pytest.raises(BackportError) as err:
        build(tmp_path, 'package = "demo"\n[[patch]]\nfile = "fix.diff"\n', {"fix.diff": diff})
    assert "patch fix.diff does not apply" in str(err.value) and "demo-bp" in str(err.value)


def test_patch_that_applies(tmp_path: Path) -> None:
    diff = "--- a/demo/core.py\n+++ b/demo/core.py\n@@ -1 +1 @@\n-thing = 2\n+thing = 4\n"
    wheel = build(tmp_path, 'package = "demo"\n[[patch]]\nfile = "fix.diff"\n', {"fix.diff": diff})
    assert read(wheel, "demo/core.py") == "thing = 4\n"


def test_patch_applies_when_the_build_dir_is_inside_a_git_repository(tmp_path: Path) -> None:
    # The default output directory (reports/out) lies inside our checkout. From a subdirectory of a repository
    # `git apply` reads a git-style diff's paths from the top of that repository and skips, silently and with
    # exit 0, every one outside the subdirectory: all the wheel's files.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    diff = ("diff --git a/demo/core.py b/demo/core.py\n--- a/demo/core.py\n+++ b/demo/core.py\n@@ -1 +1 @@\n"
            "-thing = 2\n+thing = 4\n")
    wheel = build(tmp_path, 'package = "demo"\n[[patch]]\nfile = "fix.diff"\n', {"fix.diff": diff})
    assert read(wheel, "demo/core.py") == "thing = 4\n"


@pytest.mark.parametrize("dest", ["../evil.py", "/tmp/evil.py", "demo/../../evil.py"])
def test_edits_cannot_escape_the_wheel(tmp_path: Path, dest: str) -> None:
    with pytest.raises(BackportError, match=r"escapes|relative path"):
        build(tmp_path, f'package = "demo"\n[[add]]\nsrc = "f.py"\ndest = "{dest}"\n', {"f.py": "x = 1\n"})


def test_sources_cannot_escape_the_backport_dir(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s")
    with pytest.raises(BackportError, match="escapes"):
        build(tmp_path, 'package = "demo"\n[[add]]\nsrc = "../secret.txt"\ndest = "demo/s.txt"\n')


def test_manifest_unknown_key(tmp_path: Path) -> None:
    with pytest.raises(BackportError, match="unknown key 'anchr'"):
        load_manifest(backport(tmp_path, 'package = "demo"\n[[insert]]\nfile = "a"\nanchr = "x"\n'))


def test_unpack_refuses_member_outside(tmp_path: Path) -> None:
    evil = tmp_path / "evil.whl"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../outside.txt", "x")
    with pytest.raises(BackportError, match="escapes"):
        unpack(evil, tmp_path / "u")


def test_backport_builds_are_cached_and_rechecked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matrix.sources import backport as bp

    monkeypatch.setenv(settings.WHEEL_CACHE_ENV, str(tmp_path / "cache"))
    calls = []
    real = bp.build_backport
    monkeypatch.setattr(bp, "build_backport", lambda *a: calls.append(a) or real(*a))
    wheel = make_wheel(tmp_path)
    manifest = load_manifest(backport(tmp_path, 'package = "demo"\n[[insert]]\nfile = "demo/core.py"\n'
                                                'anchor = "^thing"\ntext = "x = 1"\n'))
    first = bp.cached_backport(manifest, wheel, "base", tmp_path / "w1", "b").read_bytes()
    second = bp.cached_backport(manifest, wheel, "base", tmp_path / "w2", "b").read_bytes()
    assert first == second and len(calls) == 1
    # a tampered cache entry is not trusted: it is rebuilt
    (cached,) = (tmp_path / "cache" / "backports").glob("*/demo-1.0-py3-none-any.whl")
    cached.write_bytes(b"tampered")
    assert bp.cached_backport(manifest, wheel, "base", tmp_path / "w3", "b").read_bytes() == first
    assert len(calls) == 2
    # another edit is another build
    (manifest.directory / "backport.toml").write_text('package = "demo"\n')
    bp.cached_backport(load_manifest(manifest.directory), wheel, "base", tmp_path / "w4", "b")
    assert len(calls) == 3


def test_the_same_files_under_another_backport_name_are_another_wheel(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The name is written into the wheel's marker: a copy of a backport folder under another name (as a test
    builds the shipped guard under its own name) must not get the first one's cached bytes and name."""
    import json
    import shutil
    import zipfile

    from matrix.sources import backport as bp

    monkeypatch.setenv(settings.WHEEL_CACHE_ENV, str(tmp_path / "cache"))
    wheel = make_wheel(tmp_path)
    first = backport(tmp_path, 'package = "demo"\n[[insert]]\nfile = "demo/core.py"\n'
                               'anchor = "^thing"\ntext = "x = 1"\n')
    copy = tmp_path / "shipped"
    shutil.copytree(first, copy)

    def marker(path: Path) -> str:
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist() if n.endswith("SKEWMATRIX_BACKPORT.json"))
            return str(json.loads(zf.read(name))["backport"])

    a = marker(bp.cached_backport(load_manifest(first), wheel, "base", tmp_path / "w1", "b"))
    b = marker(bp.cached_backport(load_manifest(copy), wheel, "base", tmp_path / "w2", "b"))
    assert (a, b) == (load_manifest(first).name, "shipped") and a != b
