"""Project pages of the JSON simple API (PEP 691 / PEP 700 / PEP 592 / PEP 658) as releases and files.

File names are read with ``packaging.utils.parse_wheel_filename`` and
``parse_sdist_filename``: a file whose name is not a valid wheel or sdist
name of the project is ignored, never guessed at.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

FileKind = Literal["wheel", "sdist"]


def parse_filename(filename: str) -> tuple[str, Version, FileKind] | None:
    """``(canonical project name, version, kind)`` of a distribution file name, or None when it is neither."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
            return name, version, "wheel"
        name, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return name, version, "sdist"


@dataclass(frozen=True)
class DistFile:
    """One file of a release as the index lists it."""

    filename: str
    url: str
    sha256: str | None
    size: int | None
    yanked: bool
    kind: FileKind
    yanked_reason: str | None = None
    metadata_sha256: str | None = None  # PEP 658/714: sha256 of the .metadata file, when published
    has_metadata: bool = False

    @property
    def pure(self) -> bool:
        return self.kind == "wheel" and self.filename.endswith("-none-any.whl")


@dataclass(frozen=True)
class Release:
    version: Version
    files: tuple[DistFile, ...] = ()

    @property
    def yanked(self) -> bool:
        return bool(self.files) and all(f.yanked for f in self.files)

    def yanked_reason(self) -> str | None:
        return next((f.yanked_reason for f in self.files if f.yanked and f.yanked_reason), None)

    def pick(self) -> DistFile | None:
        """The file to read: a pure-Python wheel, else any wheel, else the sdist."""
        for ok in (lambda f: f.pure, lambda f: f.kind == "wheel", lambda f: f.kind == "sdist"):
            found = next((f for f in self.files if ok(f)), None)
            if found is not None:
                return found
        return None


def releases_from_page(page: dict[str, Any], page_url: str, project: str) -> list[Release]:
    """Every release on a project page with its files, ascending by version."""
    want = canonicalize_name(project)
    files: dict[Version, list[DistFile]] = {}
    for raw in page.get("versions") or []:
        with contextlib.suppress(InvalidVersion):
            files.setdefault(Version(raw), [])
    for f in page.get("files", []):
        parsed = parse_filename(f["filename"])
        if parsed is None or parsed[0] != want:
            continue
        _, version, kind = parsed
        yanked = f.get("yanked", False)
        meta = f.get("core-metadata", f.get("data-dist-info-metadata", False))
        files.setdefault(version, []).append(DistFile(
            filename=f["filename"], url=urllib.parse.urljoin(page_url, f["url"]),
            sha256=(f.get("hashes") or {}).get("sha256"), size=f.get("size"), yanked=bool(yanked), kind=kind,
            yanked_reason=yanked if isinstance(yanked, str) else None,
            metadata_sha256=meta.get("sha256") if isinstance(meta, dict) else None, has_metadata=bool(meta)))
    return [Release(v, tuple(files[v])) for v in sorted(files)]
