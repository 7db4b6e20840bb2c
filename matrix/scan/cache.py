"""The scan's persistent cache and its output files.

Under the cache directory (``matrix.settings.scan_cache_dir``):
``index/<url key>/<project>.json`` the last good project page (used when the
index fails, or with ``--offline``); ``extract/<want>/<sha>.json`` the members
read out of one file for one scanned check; ``analysis/<analyzer key>/<sha>.json`` the analysis of one
file by the current detector code. Verdicts are recomputed from cached
members whenever the detector changes, so a new detector never needs a new
download. Every file is written atomically, mode 0644 like the reports.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from matrix.errors import IndexLookupError
from matrix.index import IndexClient, Release, releases_from_page
from matrix.scan.terms import ScanError

FILE_MODE = 0o644


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step; readable by everyone (``mkstemp`` would leave 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any | None:
    """The JSON in ``path``, or None when it is missing or unreadable (a cache miss, never an error)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class ScanIndex:
    """An ``IndexClient`` plus a persistent copy of each project page, used when the index fails."""

    def __init__(self, client: IndexClient | None = None, cache: Path | None = None, offline: bool = False) -> None:
        self.client = client or IndexClient()
        self.cache = cache
        self.offline = offline
        self.warnings: list[str] = []

    @property
    def url(self) -> str:
        return self.client.url

    def _cached_page_path(self, project: str) -> Path | None:
        if self.cache is None:
            return None
        key = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        return self.cache / "index" / key / f"{canonicalize_name(project)}.json"

    def page(self, project: str) -> tuple[dict[str, Any], str]:
        """The project page and where it came from (``index`` or ``cache``)."""
        path = self._cached_page_path(project)
        if not self.offline:
            try:
                data = self.client._page(project)
            except IndexLookupError as exc:
                if path is None or not path.is_file():
                    raise ScanError(f"{exc}; nothing cached for it in {self.cache} either") from exc
                self.warnings.append(f"{exc}; using the copy cached at {path}")
            else:
                if path is not None:
                    write_atomic(path, json.dumps(data))
                return data, "index"
        data = read_json(path) if path is not None else None
        if not isinstance(data, dict):
            raise ScanError(f"{canonicalize_name(project)}: offline and no cached index page in {self.cache}")
        return data, "cache"

    def releases(self, project: str) -> tuple[list[Release], str]:
        """Every release with its files, ascending, and the page's origin."""
        data, origin = self.page(project)
        return releases_from_page(data, self.client.page_url(project), project), origin


def extract_path(cache: Path, sha256: str, want: str = "") -> Path:
    return cache / "extract" / (want or "any") / sha256[:2] / f"{sha256}.json"


def analysis_path(cache: Path, analyzer: str, sha256: str) -> Path:
    return cache / "analysis" / analyzer / f"{sha256}.json"
