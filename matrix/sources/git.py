"""``source = "git"``: a repository URL and a ref (branch, tag or sha).

Keys: ``url`` and ``ref`` (required), ``subdirectory`` (optional). ``url`` is
a URL or a local repository or git bundle (a path relative to the matrix
file's directory); ``ref`` is a branch, tag, commit sha or any ref the remote
has (``refs/pull/619/head``). A local remote is asked for the ref when the
matrix file loads, so a missing ref is named before any cell runs. The ref is
fetched with git, the resolved commit sha is recorded, and the checkout is
built into a wheel (or, for a subject that is a source tree, used as the tree);
its identity is the tree digest of the checkout.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from matrix.envs.tools import run_tool
from matrix.errors import BuildError
from matrix.sources.interface import BuildSource, Materialized, sha256_file, sha256_tree
from matrix.sources.path import build_wheel


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
        return out or self.ref_problems(where)

    def describe(self) -> str:
        return f"git {self.url}@{self.ref}"

    @property
    def local(self) -> Path | None:
        """The repository or bundle on this machine when ``url`` is a local path (relative to the matrix
        file's directory), else None (a URL: ``https://``, ``ssh://``, ``file://``, ``git@host:...``)."""
        if "://" in self.url or re.match(r"^[\w.-]+@[\w.-]+:", self.url):
            return None
        return (self.base_dir / self.url).resolve()

    @property
    def remote(self) -> str:
        """What git fetches from: the URL, or the local path resolved against the matrix file."""
        return self.url if self.local is None else str(self.local)

    def remote_ref_problems(self, where: str) -> list[str]:
        """A remote URL asked for the ref (``git ls-remote --exit-code``, network): named when it is not there,
        "cannot check" when the remote cannot be asked (the cell's fetch then says what happened). Local
        remotes were asked at load time (:meth:`ref_problems`); a commit sha is checked by the fetch."""
        if self.local is not None or re.fullmatch(r"[0-9a-f]{7,40}", self.ref):
            return []
        res = run_tool(["git", "ls-remote", "--exit-code", self.url, self.ref], timeout=60)
        if res.returncode == 2:
            return [f"{where}: ref {self.ref!r} is not in {self.url} (git ls-remote finds no such ref)"]
        if not res.ok:
            return [f"{where}: cannot check ref {self.ref!r} on {self.url}: {res.tail(2).strip()}"]
        return []

    def ref_problems(self, where: str) -> list[str]:
        """A local repository or bundle is asked for the ref at load time (offline, milliseconds), so a missing
        or unreadable ref is named before any cell runs; a remote one is checked when the cell fetches it."""
        local = self.local
        if local is None or not self.url or not self.ref:
            return []
        if not local.exists():
            return [f"{where}: url {self.url!r}: no repository or bundle at {local}"]
        if re.fullmatch(r"[0-9a-f]{7,40}", self.ref):
            return []  # a commit sha: ls-remote lists refs only; the fetch checks it
        res = run_tool(["git", "ls-remote", str(local)], timeout=60)
        if not res.ok:
            return [f"{where}: url {self.url!r}: git cannot read it ({res.tail(3).strip()})"]
        refs = [line.split("\t", 1)[1] for line in res.stdout.splitlines() if "\t" in line]
        wanted = {self.ref, f"refs/heads/{self.ref}", f"refs/tags/{self.ref}"}
        if not wanted & set(refs):
            near = difflib.get_close_matches(self.ref, refs, n=1, cutoff=0.5)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            return [f"{where}: ref {self.ref!r} is not in {self.url}{hint}; refs there: {', '.join(refs[:8])}"]
        return []

    def _checkout(self, workdir: Path, label: str) -> tuple[Path, str]:
        """Fetch ``ref`` (a branch, tag, sha or any ref the remote has, e.g. ``refs/pull/N/head``) into a fresh
        repository; return the checkout (``subdirectory`` applied) and the resolved commit sha."""
        clone = workdir / "clone"
        git = ["git", "-c", "advice.detachedHead=false"]
        steps = [
            [*git, "init", "-q", str(clone)],
            [*git, "-C", str(clone), "fetch", "-q", "--depth", "1", self.remote, self.ref],
            [*git, "-C", str(clone), "checkout", "-q", "FETCH_HEAD"],
        ]
        for argv in steps:
            res = run_tool(argv, timeout=600)
            if not res.ok:
                raise BuildError(f"{label}: `{' '.join(argv[3:])}` failed (is the ref in that repository?):\n"
                                 f"{res.tail()}")
        sha = run_tool([*git, "-C", str(clone), "rev-parse", "HEAD"]).stdout.strip()
        src = clone / self.subdirectory if self.subdirectory else clone
        if not src.is_dir():
            raise BuildError(f"{label}: subdirectory {self.subdirectory!r} is not in commit {sha[:12]}")
        return src, sha

    def materialize_tree(self, workdir: Path) -> Materialized:
        label = f"git build {self.url}@{self.ref}"
        src, sha = self._checkout(workdir, label)
        digest = sha256_tree(src)
        return Materialized(requirement="", pin="", digest=digest, tree=src,
                            details={"url": self.url, "ref": self.ref, "commit": sha, "tree_sha256": digest})

    def materialize(self, workdir: Path) -> Materialized:
        label = f"git build {self.url}@{self.ref}"
        src, sha = self._checkout(workdir, label)
        digest = sha256_tree(src)
        wheel = build_wheel(src, workdir / "wheel", label)
        details = {"url": self.url, "ref": self.ref, "commit": sha, "tree_sha256": digest,
                   "wheel_sha256": sha256_file(wheel)}
        return Materialized(requirement=str(wheel), pin=f"{self.package} @ {wheel.as_uri()}", digest=digest,
                            details=details)
