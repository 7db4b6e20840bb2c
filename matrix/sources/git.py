"""``source = "git"``: a repository URL and a ref (branch, tag or sha).

Keys: ``url`` and ``ref`` (required), ``subdirectory`` (optional). The ref
is cloned with git, the resolved commit sha is recorded, and the checkout is
built into a wheel; its identity is the tree digest of the checkout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from matrix.errors import BuildError
from matrix.sources.interface import BuildSource, Materialized, sha256_file, sha256_tree
from matrix.sources.path import build_wheel
from matrix.tools import run_tool


@dataclass(frozen=True)
class GitSource(BuildSource):
    KIND: ClassVar[str] = "git"
    KEYS: ClassVar[dict[str, type]] = {"url": str, "ref": str, "subdirectory": str}
    REQUIRED: ClassVar[tuple[str, ...]] = ("url", "ref")

    url: str = ""
    ref: str = ""
    subdirectory: str = ""

    def problems(self, where: str) -> list[str]:
        out = []
        if not self.url:
            out.append(f"{where}: url is empty")
        if not self.ref:
            out.append(f"{where}: ref is empty (give a branch, tag or commit sha)")
        if Path(self.subdirectory).is_absolute() or ".." in Path(self.subdirectory).parts:
            out.append(f"{where}: subdirectory {self.subdirectory!r} must be relative and stay inside the clone")
        return out

    def describe(self) -> str:
        return f"git {self.url}@{self.ref}"

    def materialize(self, workdir: Path) -> Materialized:
        label = f"git build {self.url}@{self.ref}"
        clone = workdir / "clone"
        git = ["git", "-c", "advice.detachedHead=false"]
        steps = [
            [*git, "init", "-q", str(clone)],
            [*git, "-C", str(clone), "fetch", "-q", "--depth", "1", self.url, self.ref],
            [*git, "-C", str(clone), "checkout", "-q", "FETCH_HEAD"],
        ]
        for argv in steps:
            res = run_tool(argv, timeout=600)
            if not res.ok:
                raise BuildError(f"{label}: `{' '.join(argv[3:])}` failed:\n{res.tail()}")
        sha = run_tool([*git, "-C", str(clone), "rev-parse", "HEAD"]).stdout.strip()
        src = clone / self.subdirectory if self.subdirectory else clone
        digest = sha256_tree(src)
        wheel = build_wheel(src, workdir / "wheel", label)
        details = {"url": self.url, "ref": self.ref, "commit": sha, "tree_sha256": digest,
                   "wheel_sha256": sha256_file(wheel)}
        return Materialized(requirement=str(wheel), pin=f"{self.package} @ {wheel.as_uri()}", digest=digest,
                            details=details)
