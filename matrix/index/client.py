"""A small client for the package index's JSON simple API (PEP 691 / PEP 700).

Used to check that a requested version exists (listing the nearest ones when
it does not), to look up the published sha256 of the exact wheel installed
into a cell, and by the scan to list every release. The index is the one uv
and pip are configured with (``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``,
``PIP_INDEX_URL``), never a hard-coded host, except the PyPI default when
nothing is configured. Credentials in that URL are handled like uv does
(``matrix.index.http``). Pages are memoised per client; nothing is fetched at
import or construction.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

import httpx
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from matrix.errors import IndexLookupError
from matrix.index.http import HTTPFetchError, IndexHTTP, IndexURL, redact
from matrix.index.pages import Release, parse_filename, releases_from_page

DEFAULT_INDEX = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json"


def index_url() -> str:
    """The configured index, in uv's order of precedence, then pip's (may carry credentials: redact it)."""
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        value = os.environ.get(var, "").strip()
        if value:
            return value.rstrip("/")
    return DEFAULT_INDEX


@dataclass(frozen=True)
class IndexFile:
    filename: str
    sha256: str | None
    yanked: bool


class IndexClient:
    """Reads project pages of one index. See the module docstring.

    ``url`` is the index without credentials (safe to print); ``http`` holds them.
    """

    def __init__(self, url: str | None = None, *, transport: httpx.BaseTransport | None = None,
                 http: IndexHTTP | None = None) -> None:
        self.http = http or IndexHTTP(url or index_url(), transport=transport)
        self.url = self.http.index.url

    def page_url(self, project: str) -> str:
        return f"{self.url}/{canonicalize_name(project)}/"

    @functools.lru_cache(maxsize=256)  # noqa: B019 -- clients live for one run
    def _page(self, project: str) -> dict[str, Any]:
        name = canonicalize_name(project)
        where = redact(self.url)
        try:
            _status, body = self.http.get_bytes(self.page_url(name), {"Accept": ACCEPT})
            data = json.loads(body)
        except HTTPFetchError as exc:
            if exc.status == 404:
                raise IndexLookupError(f"{name}: no such project on the index {where}") from exc
            if exc.status is not None:
                raise IndexLookupError(f"{name}: the index {where} answered HTTP {exc.status}") from exc
            raise IndexLookupError(f"{name}: the index {where} is unreachable ({exc})") from exc
        except ValueError as exc:
            raise IndexLookupError(f"{name}: the index {where} sent a page that is not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise IndexLookupError(f"{name}: the index {where} sent a page that is not a JSON object")
        return data

    def versions(self, project: str) -> list[Version]:
        """Every version the index lists, sorted ascending."""
        page = self._page(project)
        raw = page.get("versions")
        if raw is None:  # PEP 700 absent: derive from file names
            parsed = (parse_filename(f["filename"]) for f in page.get("files", []))
            return sorted({p[1] for p in parsed if p is not None and p[0] == canonicalize_name(project)})
        out = set()
        for v in raw:
            try:
                out.add(Version(v))
            except InvalidVersion:
                continue
        return sorted(out)

    def files(self, project: str) -> list[IndexFile]:
        page = self._page(project)
        return [
            IndexFile(f["filename"], f.get("hashes", {}).get("sha256"), bool(f.get("yanked")))
            for f in page.get("files", [])
        ]

    def releases(self, project: str) -> list[Release]:
        """Every release with its files, ascending (``matrix.index.pages``)."""
        return releases_from_page(self._page(project), self.page_url(project), project)


def nearest_versions(wanted: Version, available: list[Version], n: int = 5) -> list[Version]:
    """The ``n`` available versions closest to ``wanted`` (by release tuple)."""

    def distance(v: Version) -> tuple[int, ...]:
        a = (*wanted.release, 0, 0, 0)[:4]
        b = (*v.release, 0, 0, 0)[:4]
        return tuple(abs(x - y) for x, y in zip(a, b, strict=True))

    return sorted(sorted(available, key=distance)[:n])


__all__ = ["ACCEPT", "DEFAULT_INDEX", "IndexClient", "IndexFile", "IndexURL", "index_url", "nearest_versions",
           "redact"]
