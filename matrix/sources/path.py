"""``source = "path"``: a local checkout (directory) or a wheel file.

Keys: ``path`` (required), relative to the matrix file's directory and
confined to it: absolute paths, ``..`` and symlinks that lead outside are
refused (a matrix file must not be able to point the harness at arbitrary
files). A directory is built into a wheel with ``uv build``; its digest is the
tree digest (content, not mtime), so an edited checkout is a new build.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from matrix.envs.tools import run_tool, uv_bin
from matrix.errors import BuildError
from matrix.sources.interface import BuildSource, Materialized, copy_tree, sha256_file, sha256_tree


def build_wheel(src: Path, out_dir: Path, label: str) -> Path:
    """Build ``src`` into exactly one wheel under ``out_dir`` with uv."""
    out_dir.mkdir(parents=True, exist_ok=True)
    res = run_tool([uv_bin(), "build", "--wheel", "--out-dir", str(out_dir), str(src)], timeout=900)
    if not res.ok:
        raise BuildError(f"{label}: building a wheel from {src} failed (uv exit {res.returncode}):\n{res.tail()}")
    wheels = sorted(out_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"{label}: expected one wheel in {out_dir}, found {len(wheels)}")
    return wheels[0]


@dataclass(frozen=True)
class PathSource(BuildSource):
    KIND: ClassVar[str] = "path"
    KEYS: ClassVar[dict[str, type]] = {"path": str}
    REQUIRED: ClassVar[tuple[str, ...]] = ("path",)

    path: str = ""

    @property
    def resolved(self) -> Path:
        return (self.base_dir / self.path).resolve()

    def problems(self, where: str) -> list[str]:
        if Path(self.path).is_absolute():
            return [f"{where}: path {self.path!r} is absolute; give a path relative to the matrix file's "
                    f"directory ({self.base_dir})"]
        p = self.resolved
        root = self.base_dir.resolve()
        if p != root and root not in p.parents:
            return [f"{where}: path {self.path!r} leaves the matrix file's directory {root} (resolves to {p}); "
                    "put the checkout or wheel inside it (a symlink out is refused too)"]
        if not p.exists():
            return [f"{where}: path {self.path!r} does not exist (resolved to {p})"]
        if p.is_file() and p.suffix != ".whl":
            return [f"{where}: path {self.path!r} is a file but not a wheel (.whl); give a wheel or a directory"]
        return []

    def describe(self) -> str:
        return f"path {self.path}"

    def materialize(self, workdir: Path) -> Materialized:
        p = self.resolved
        if p.is_file():
            wheel = p
            digest = sha256_file(p)
            details = {"path": str(p), "wheel_sha256": digest}
        else:
            digest = sha256_tree(p)
            wheel = build_wheel(p, workdir / "wheel", f"path build {self.path}")
            details = {"path": str(p), "tree_sha256": digest, "wheel_sha256": sha256_file(wheel)}
        pin = f"{self.package} @ {wheel.as_uri()}"
        return Materialized(requirement=str(wheel), pin=pin, digest=digest, details=details)

    def materialize_tree(self, workdir: Path) -> Materialized:
        p = self.resolved
        if not p.is_dir():
            raise BuildError(f"path build {self.path}: {p} is not a directory (a source tree is a checkout)")
        digest = sha256_tree(p)
        tree = copy_tree(p, workdir / "tree")  # the run writes nothing into the user's checkout
        return Materialized(requirement="", pin="", digest=digest, tree=tree,
                            details={"path": str(p), "tree_sha256": digest})
