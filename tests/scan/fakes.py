"""An index and file host in memory, served to the real clients through ``httpx.MockTransport``.

Wheels and sdists are built here with ``zipfile``/``tarfile``; the host
answers project pages (JSON simple API) and files, honours ``Range`` like a
real file host, and records every request so tests can count round trips and
check which requests carried credentials.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from matrix.index import IndexClient
from matrix.scan import Fetcher, ScanIndex, record_digest

INDEX = "https://index.invalid/simple"
FILES = "https://index.invalid/files/"


def wheel(name: str, version: str, files: dict[str, str], metadata: str = "", *, record: bool = True,
          zip64: bool = False) -> bytes:
    buf = io.BytesIO()
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        for path, text in files.items():
            if zip64:  # force zip64 extra fields, as a >4 GiB wheel would carry
                with zf.open(zipfile.ZipInfo(path), "w", force_zip64=True) as fh:
                    fh.write(text.encode())
            else:
                zf.writestr(path, text)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}")
        if record:
            records = [f"{p},{record_digest(t.encode())},{len(t)}" for p, t in files.items()]
            zf.writestr(f"{dist}/RECORD", "\n".join([*records, f"{dist}/RECORD,,"]) + "\n")
    return buf.getvalue()


def sdist(name: str, version: str, files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path, text in {**files, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def page(project: str, files: dict[str, bytes], yanked: set[str] = frozenset(), bad_sha: set[str] = frozenset(),
         versions: list[str] | None = None) -> dict[str, Any]:
    out = []
    for fname, data in files.items():
        sha = hashlib.sha256(data + (b"x" if fname in bad_sha else b"")).hexdigest()
        out.append({"filename": fname, "url": f"../../files/{fname}", "hashes": {"sha256": sha}, "size": len(data),
                    "yanked": "broken" if fname in yanked else False})
    return {"name": project, "files": out, "versions": versions or []}


class FakeHost:
    """``handler`` for ``httpx.MockTransport``: pages under ``/simple/<project>/``, files under ``/files/``."""

    def __init__(self, pages: dict[str, dict[str, Any]], blobs: dict[str, bytes]) -> None:
        self.pages = pages
        self.blobs = blobs  # file name -> bytes
        self.requests: list[httpx.Request] = []
        self.fail = False  # every request raises a connection error
        self.ignore_range = False
        self.script: list[Callable[[httpx.Request], httpx.Response]] = []  # one-shot answers, consumed first

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            return self.script.pop(0)(request)
        if self.fail:
            raise httpx.ConnectError("connection refused (test)", request=request)
        parts = request.url.path.strip("/").split("/")
        if parts[0] == "simple" and len(parts) == 2:
            if parts[1] not in self.pages:
                return httpx.Response(404)
            return httpx.Response(200, json=self.pages[parts[1]])
        if parts[0] == "files" and len(parts) == 2 and parts[1] in self.blobs:
            data = self.blobs[parts[1]]
            rng = request.headers.get("Range")
            if rng and not self.ignore_range:
                start, end = (int(x) for x in rng.removeprefix("bytes=").split("-"))
                return httpx.Response(206, content=data[start:end + 1])
            return httpx.Response(200, content=data)
        return httpx.Response(404)

    def file_requests(self) -> list[tuple[str, str | None]]:
        return [(r.url.path.split("/")[-1], r.headers.get("Range")) for r in self.requests
                if r.url.path.startswith("/files/")]


def clients(host: FakeHost, cache: Path, url: str = INDEX, full_max: int | None = None) -> tuple[ScanIndex, Fetcher]:
    """A ``ScanIndex`` and ``Fetcher`` over ``host`` sharing one HTTP client, as ``scan.run`` builds them."""
    client = IndexClient(url, transport=httpx.MockTransport(host.handler))
    client.http.sleep = lambda s: None  # no real backoff in unit tests
    index = ScanIndex(client, cache=cache)
    fetcher = Fetcher(cache, client.http) if full_max is None else Fetcher(cache, client.http, full_max)
    return index, fetcher
