"""A small client for the package index's JSON simple API (PEP 691 / PEP 700).

Used to check that a requested version exists (listing the nearest ones when
it does not) and to look up the published sha256 of the exact wheel that was
installed into a cell. The index is the one uv and pip are configured with
(``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``, ``PIP_INDEX_URL``), never a
hard-coded host, except the PyPI default when nothing is configured.
Responses are memoised per process; nothing is fetched at import.
"""

from __future__ import annotations

import functools
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from matrix.errors import IndexLookupError
from matrix.tools import redact_text

DEFAULT_INDEX = "https://pypi.org/simple"
ACCEPT = "application/vnd.pypi.simple.v1+json"
TIMEOUT_S = 30


def index_url() -> str:
    """The configured index, in uv's order of precedence, then pip's."""
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        value = os.environ.get(var, "").strip()
        if value:
            return value.rstrip("/")
    return DEFAULT_INDEX


def redact(url: str) -> str:
    """Drop credentials from a URL before it reaches a log or a report (see ``matrix.tools.redact_text``)."""
    return redact_text(url)


@dataclass(frozen=True)
class IndexFile:
    filename: str
    sha256: str | None
    yanked: bool


class IndexClient:
    """Reads project pages of one index. See the module docstring."""

    def __init__(self, url: str | None = None) -> None:
        self.url = (url or index_url()).rstrip("/")

    @functools.lru_cache(maxsize=256)  # noqa: B019 -- clients live for one run
    def _page(self, project: str) -> dict:
        name = canonicalize_name(project)
        req = urllib.request.Request(f"{self.url}/{name}/", headers={"Accept": ACCEPT})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise IndexLookupError(f"{name}: no such project on the index {redact(self.url)}") from exc
            raise IndexLookupError(f"{name}: the index {redact(self.url)} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise IndexLookupError(f"{name}: the index {redact(self.url)} is unreachable ({reason})") from exc

    def versions(self, project: str) -> list[Version]:
        """Every version the index lists, sorted ascending."""
        page = self._page(project)
        raw = page.get("versions")
        if raw is None:  # PEP 700 absent: derive from file names
            raw = []
            for f in page.get("files", []):
                if f["filename"].endswith(".whl"):
                    raw.append(str(parse_wheel_filename(f["filename"])[1]))
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


def nearest_versions(wanted: Version, available: list[Version], n: int = 5) -> list[Version]:
    """The ``n`` available versions closest to ``wanted`` (by release tuple)."""

    def distance(v: Version) -> tuple[int, ...]:
        a = (*wanted.release, 0, 0, 0)[:4]
        b = (*v.release, 0, 0, 0)[:4]
        return tuple(abs(x - y) for x, y in zip(a, b, strict=True))

    return sorted(sorted(available, key=distance)[:n])
