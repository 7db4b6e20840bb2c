"""``source = "backport"``: a base build plus our edits, rebuilt as a wheel.

Keys: ``base`` (required, the name of another build of the same package in
the matrix file) and ``backport`` (required, a folder under
``matrix/backports/`` or a path relative to the matrix file holding a
``backport.toml``; see ``matrix.sources.backport_build``). The base is materialised to a
wheel first (a PyPI base is downloaded from the index and its sha256 checked
against the index), then edited and repacked. The digest is the new wheel's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from packaging.utils import canonicalize_name, parse_wheel_filename

from matrix import settings
from matrix.errors import BackportError, BuildError
from matrix.index import IndexClient, redact
from matrix.sources.backport_build import Manifest, apply_edits, build_backport, confined, load_manifest
from matrix.sources.interface import BuildSource, Materialized, copy_tree, sha256_file, sha256_tree
from matrix.sources.pypi import PypiSource

BACKPORTS_DIR = Path(__file__).resolve().parent.parent / "backports"


def wheel_cache() -> Path:
    """Where base wheels of backports are kept between runs (checked against the index's sha256 on reuse)."""
    value = settings.value(settings.WHEEL_CACHE_ENV)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "skewmatrix" / "wheels"


def download_wheel(package: str, version: str, dest: Path, index: IndexClient | None = None) -> Path:
    """Download the pure-Python wheel of ``package==version`` and verify its sha256."""
    index = index or IndexClient()
    for f in index.files(package):
        if not f.filename.endswith(".whl"):
            continue
        name, ver, _, tags = parse_wheel_filename(f.filename)
        if canonicalize_name(name) != canonicalize_name(package) or str(ver) != version:
            continue
        if not any(t.abi == "none" and t.platform == "any" for t in tags):
            continue
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / f.filename
        if not (target.is_file() and f.sha256 and sha256_file(target) == f.sha256):
            url = f"{index.url}/{canonicalize_name(package)}/"
            page = index._page(package)
            href = next(x["url"] for x in page["files"] if x["filename"] == f.filename)
            href = urllib.parse.urljoin(url, href)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.part")  # parallel cells share the cache
            with tmp.open("wb") as fh:  # the index's keep-alive client: retries, and credentials where they belong
                index.http.download(href, fh)
            tmp.replace(target)
        if f.sha256 and sha256_file(target) != f.sha256:
            raise BuildError(f"{package} {version}: downloaded {f.filename} does not match the index's sha256")
        return target
    raise BuildError(f"{package} {version}: no pure-Python wheel on the index {redact(index.url)}")


def manifest_digest(manifest_dir: Path) -> str:
    """Digest of a backport's folder: its manifest and every file it adds or applies."""
    h = hashlib.sha256()
    for p in sorted(manifest_dir.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(p.relative_to(manifest_dir).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def cached_backport(manifest: Manifest, base_wheel: Path, base_digest: str, workdir: Path, name: str) -> Path:
    """Build the backport once per (base wheel, backport folder and name, builder) and reuse it.

    Repacking a large wheel costs seconds; the result is deterministic, so the
    same inputs give the same bytes, and its digest is rechecked on reuse.
    """
    builder = hashlib.sha256(Path(build_backport.__code__.co_filename).read_bytes()).hexdigest()
    # The backport's name is written into the wheel (its marker), so it is part of what the wheel is: the same
    # files under another folder name are another wheel, never this one's cached bytes with the wrong name.
    key = hashlib.sha256(
        f"{base_digest}:{manifest_digest(manifest.directory)}:{manifest.name}:{builder}".encode()).hexdigest()
    slot = wheel_cache() / "backports" / key[:32]
    cached = slot / base_wheel.name
    stamp = slot / "sha256"
    if cached.is_file() and stamp.is_file() and sha256_file(cached) == stamp.read_text().strip():
        target = workdir / "wheel" / base_wheel.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, target)
        return target
    wheel = build_backport(manifest, base_wheel, base_digest, workdir, name)
    slot.mkdir(parents=True, exist_ok=True)
    tmp = slot / f".{base_wheel.name}.{os.getpid()}.tmp"
    shutil.copy2(wheel, tmp)
    tmp.replace(cached)
    stamp.write_text(sha256_file(cached) + "\n")
    return wheel


@dataclass(frozen=True)
class BackportSource(BuildSource):
    KIND: ClassVar[str] = "backport"
    KEYS: ClassVar[dict[str, type]] = {"base": str, "backport": str}
    REQUIRED: ClassVar[tuple[str, ...]] = ("base", "backport")

    base: str = ""
    backport: str = ""
    # Filled in by the spec loader once every build is known.
    base_source: BuildSource | None = None

    @property
    def directory(self) -> Path:
        local = (self.base_dir / self.backport)
        if (local / "backport.toml").is_file():
            return confined(self.base_dir, self.backport, "backport", f"backport {self.backport}")
        return confined(BACKPORTS_DIR, self.backport, "backport", f"backport {self.backport}")

    def problems(self, where: str) -> list[str]:
        try:
            manifest = load_manifest(self.directory)
        except BackportError as exc:
            known = sorted(p.name for p in BACKPORTS_DIR.iterdir() if (p / "backport.toml").is_file())
            return [f"{where}: {exc} (shipped backports: {', '.join(known) or 'none'})"]
        if canonicalize_name(manifest.package) != canonicalize_name(self.package):
            return [f"{where}: backport {self.backport!r} patches {manifest.package!r}, "
                    f"but this build is a {self.package!r} build"]
        return []

    def describe(self) -> str:
        base = self.base_source.describe() if self.base_source else self.base
        return f"backport {self.backport} on {base}"

    def version_hint(self) -> str | None:
        return self.base_source.version_hint() if self.base_source else None

    def materialize(self, workdir: Path) -> Materialized:
        if self.base_source is None:
            raise BuildError(f"backport {self.backport}: base build {self.base!r} was not resolved")
        if isinstance(self.base_source, PypiSource):
            base_wheel = download_wheel(self.package, self.base_source.version, wheel_cache())
            base_digest = sha256_file(base_wheel)
        else:
            m = self.base_source.materialize(workdir / "base")
            base_wheel = Path(m.requirement)
            base_digest = sha256_file(base_wheel)
        manifest = load_manifest(self.directory)
        wheel = cached_backport(manifest, base_wheel, base_digest, workdir, self.backport)
        digest = sha256_file(wheel)
        details = {"backport": self.backport, "base": self.base, "base_wheel_sha256": base_digest,
                   "wheel_sha256": digest}
        return Materialized(requirement=str(wheel), pin=f"{self.package} @ {wheel.as_uri()}", digest=digest,
                            details=details)

    def materialize_tree(self, workdir: Path) -> Materialized:
        """The base's tree, copied, with the backport's edits applied (a subject that is a source tree)."""
        if self.base_source is None:
            raise BuildError(f"backport {self.backport}: base build {self.base!r} was not resolved")
        base = self.base_source.materialize_tree(workdir / "base")
        manifest = load_manifest(self.directory)
        tree = copy_tree(base.tree or workdir, workdir / "tree")
        apply_edits(tree, manifest, f"backport {manifest.name} (build on {self.base})")
        digest = sha256_tree(tree)
        details = {"backport": self.backport, "base": self.base, "base_tree_sha256": base.digest,
                   "tree_sha256": digest, **{k: v for k, v in base.details.items() if k in ("url", "ref", "commit")}}
        return Materialized(requirement="", pin="", digest=digest, tree=tree, details=details)
