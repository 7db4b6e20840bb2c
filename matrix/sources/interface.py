"""The interface every build source implements.

``BuildSource`` subclasses are frozen dataclasses built from one ``[[build]]``
table of a matrix file. ``KEYS`` lists the keys a kind accepts beyond the
common ``name``, ``package`` and ``source``; the spec loader rejects any
other key against that list, so every option of every kind is declared here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class Materialized:
    """What a source produced for one run.

    ``requirement`` is handed to ``uv pip install`` as is (``name==ver`` or a
    local wheel path); ``pin`` goes into the overrides file so that the
    resolver cannot swap the build for another version; ``digest`` is the
    sha256 of the wheel or tree (``None`` when only the index knows it, for
    PyPI builds it is filled in from the installed record).
    """

    requirement: str
    pin: str
    digest: str | None
    details: dict[str, Any] = field(default_factory=dict)
    # A source tree (``materialize_tree``): the checkout the cell's env is made from and its probes read.
    tree: Path | None = None


@dataclass(frozen=True)
class BuildSource:
    """One way of obtaining a build. Subclasses document their keys."""

    KIND: ClassVar[str] = ""
    KEYS: ClassVar[dict[str, type]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    package: str
    base_dir: Path

    @classmethod
    def from_table(cls, package: str, table: dict[str, Any], base_dir: Path) -> BuildSource:
        """Build from a validated table (keys and types already checked)."""
        return cls(package=package, base_dir=base_dir, **{k: table[k] for k in cls.KEYS if k in table})

    def problems(self, where: str) -> list[str]:
        """Offline validation problems, each message starting with ``where``."""
        return []

    def describe(self) -> str:
        """A short human label, e.g. ``pypi 2026.10.9``."""
        raise NotImplementedError

    def version_hint(self) -> str | None:
        """The version this build claims, when known before building."""
        return None

    def materialize(self, workdir: Path) -> Materialized:
        """Produce an installable under ``workdir`` (may clone, build, download)."""
        raise NotImplementedError

    def materialize_tree(self, workdir: Path) -> Materialized:
        """Produce a source tree under ``workdir`` (a package that is not installed as a wheel: its digest is
        the tree's, ``tree`` is its path). Only checkouts can: a git ref, a directory, a backport of one."""
        from matrix.errors import BuildError

        raise BuildError(f"{self.describe()}: a {self.KIND} build is not a source tree; give a git ref or a "
                         "checkout's directory")


def copy_tree(src: Path, dest: Path) -> Path:
    """A copy of a checkout without VCS data, caches and envs (what ``sha256_tree`` skips), so that a run
    never writes into the user's checkout."""
    import shutil

    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True,
                    ignore=lambda d, names: [n for n in names if n in TREE_SKIP or n.endswith(".egg-info")])
    return dest


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


TREE_SKIP = frozenset({".git", "__pycache__", ".nox", ".venv", "build", "dist"})


def sha256_tree(root: Path) -> str:
    """Digest of a source tree: relative paths and contents, VCS and caches excluded."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part in TREE_SKIP or part.endswith(".egg-info") for part in rel.parts):
            continue
        if p.is_file() and not p.is_symlink():
            h.update(str(rel).encode() + b"\0")
            h.update(sha256_file(p).encode() + b"\0")
    return h.hexdigest()
