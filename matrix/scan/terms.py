"""The scan's vocabulary: its errors, the members it reads out of a file, and what an extract holds.

``Want`` says which archive members a project's analysis needs (decided by
name before reading, by text after, or by a closure that reads as it goes);
``Extract`` is what was read and verified, cached per file sha256.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from matrix.errors import SkewmatrixError

# CPython 3.11 builds ASTs with interpreter-global recursion bookkeeping that concurrent `ast.parse` calls
# corrupt ("SystemError: AST constructor recursion depth mismatch", seen here under the scan's download
# threads). Every AST reading in the scan holds this lock; downloads still overlap, and the analyses are
# CPU-bound under the GIL anyway.
AST_LOCK = threading.RLock()

SCHEMA = "skewmatrix.scan/2"
# Bump when the set of members an extract keeps changes: old extracts are then fetched again.
EXTRACT_VERSION = 2
ZOO = "unsloth-zoo"
UNSLOTH = "unsloth"


class ScanError(SkewmatrixError):
    """The scan cannot run (bad option, index unreachable with nothing cached)."""


class FetchError(Exception):
    """One file could not be fetched or verified; becomes an ``unknown`` verdict with this reason."""


@dataclass(frozen=True)
class Want:
    """Which members of a file an analysis needs."""

    name: Callable[[str], bool]  # read this member? (by name, before reading)
    keep: Callable[[str, str], bool] = lambda name, text: True  # keep it? (by name and text)
    metadata: bool = False  # also the core metadata (METADATA / PKG-INFO / PEP 658)
    # What to store, from the candidate names and a reader: lets a zip be read member by member.
    closure: Callable[[list[str], Callable[[str], str]], dict[str, str]] | None = None
    key: str = ""  # who wants it (the scanned check): extracts of one file for two wants are cached apart


@dataclass(frozen=True)
class Extract:
    """The members of one file that the scan needs, read and verified once, cached by the file's sha256."""

    filename: str
    sha256: str | None
    integrity: str  # how the content was checked (see ``matrix.scan.fetch.Fetcher``)
    members: dict[str, str] = field(default_factory=dict)  # archive member (sdist root stripped) -> text
    scanned: int = 0  # how many candidate members were looked at
    metadata: str | None = None  # core metadata text

    def to_dict(self) -> dict[str, Any]:
        return {"extract_version": EXTRACT_VERSION, "filename": self.filename, "sha256": self.sha256,
                "integrity": self.integrity, "members": self.members, "scanned": self.scanned,
                "metadata": self.metadata}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Extract | None:
        if data.get("extract_version") != EXTRACT_VERSION:
            return None
        return cls(data["filename"], data["sha256"], data["integrity"], data["members"], data["scanned"],
                   data.get("metadata"))
