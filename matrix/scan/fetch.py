"""Reading the few members the scan needs out of index files, verified, into the cache.

Small files (and every sdist) are downloaded whole and checked against the
index's sha256. Large wheels are read through ``RangeFile`` with the stdlib
``zipfile``: only the central directory and the wanted members travel, each
member is checked by its CRC32 (``zipfile``) and by its sha256 in the wheel's
RECORD (the index hash covers the whole file, which a range read never sees).
A server that ignores Range gets a whole download instead.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import tarfile
import tempfile
import threading
import zipfile
from pathlib import Path
from typing import IO

from matrix.index import DistFile, HTTPFetchError, IndexHTTP, RangeFile, RangeNotSupportedError
from matrix.scan.cache import extract_path, read_json, write_atomic
from matrix.scan.terms import Extract, FetchError, Want

# Files at most this big are downloaded whole (sha256 checked); larger wheels are read by range.
FULL_DOWNLOAD_MAX = 16 * 1024 * 1024


def record_digest(data: bytes) -> str:
    """A RECORD line's hash field for ``data`` (PEP 376/427: urlsafe base64 sha256, no padding)."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_hashes(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1]:
            out[parts[0]] = parts[1]
    return out


def strip_sdist_root(name: str) -> str:
    parts = name.split("/", 1)
    rel = parts[1] if len(parts) == 2 else name
    return rel[4:] if rel.startswith("src/") else rel


def is_metadata(name: str, sdist: bool) -> bool:
    if sdist:
        return name == "PKG-INFO"
    return name.endswith(".dist-info/METADATA") and name.count("/") == 1


def _spans(zf: zipfile.ZipFile, chosen: list[zipfile.ZipInfo]) -> list[tuple[int, int]]:
    """Byte spans of ``chosen`` members: from a local header to the next member (or the central directory)."""
    starts = sorted({i.header_offset for i in zf.infolist()} | {zf.start_dir})
    following = dict(itertools.pairwise(starts))
    return [(i.header_offset, following.get(i.header_offset, zf.start_dir)) for i in chosen]


def _closed(want: Want, members: dict[str, str]) -> dict[str, str]:
    """``members`` narrowed by the want's closure, when it has one (for archives read whole)."""
    return want.closure(list(members), members.__getitem__) if want.closure is not None else members


class Fetcher:
    """Reads the wanted members of index files into the cache. Thread-safe; one instance per run.

    ``integrity`` of an extract: ``sha256`` (the whole file matched the index), ``crc32+record`` (a large wheel
    read by range, every member checked by CRC32 and against RECORD), or a sentence saying what was missing.
    """

    def __init__(self, cache: Path, http: IndexHTTP, full_max: int = FULL_DOWNLOAD_MAX) -> None:
        self.cache = cache
        self.http = http
        self.full_max = full_max
        self.stats = {"downloaded_bytes": 0, "cache_hits": 0, "fetched": 0}
        self._lock = threading.Lock()

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def cached(self, f: DistFile, want: Want) -> Extract | None:
        data = read_json(extract_path(self.cache, f.sha256, want.key)) if f.sha256 else None
        return Extract.from_dict(data) if isinstance(data, dict) else None

    def get(self, f: DistFile, want: Want) -> Extract:
        hit = self.cached(f, want)
        if hit is not None:
            self.count("cache_hits")
            return hit
        try:
            if f.kind == "wheel" and f.size and f.size > self.full_max:
                ex = self._ranged_wheel(f, want)
            else:
                ex = self._full(f, want)
            if want.metadata and ex.metadata is None and f.has_metadata:
                ex = Extract(ex.filename, ex.sha256, ex.integrity, ex.members, ex.scanned, self._pep658(f))
        except HTTPFetchError as exc:
            raise FetchError(str(exc)) from exc
        self.count("fetched")
        if f.sha256:
            write_atomic(extract_path(self.cache, f.sha256, want.key), json.dumps(ex.to_dict()))
        return ex

    def _range(self, f: DistFile, start: int, end: int) -> bytes:
        status, data = self.http.get_bytes(f.url, {"Range": f"bytes={start}-{end}"})
        if status != 206:
            raise RangeNotSupportedError(f"{f.filename}: HTTP {status} to a range request")
        self.count("downloaded_bytes", len(data))
        return data

    def _pep658(self, f: DistFile) -> str:
        _, data = self.http.get_bytes(f.url + ".metadata")
        self.count("downloaded_bytes", len(data))
        if f.metadata_sha256 and hashlib.sha256(data).hexdigest() != f.metadata_sha256:
            raise FetchError(f"{f.filename}.metadata: sha256 does not match the index")
        return data.decode("utf-8", errors="replace")

    def _full(self, f: DistFile, want: Want) -> Extract:
        tmpdir = self.cache / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=tmpdir) as tmp:
            sha, n = self.http.download(f.url, tmp)
            self.count("downloaded_bytes", n)
            if f.sha256 is None:
                integrity = "none (the index publishes no sha256)"
            elif sha != f.sha256:
                raise FetchError(f"{f.filename}: sha256 {sha} does not match the index's {f.sha256}")
            else:
                integrity = "sha256"
            tmp.seek(0)
            if f.filename.endswith((".whl", ".zip")):
                return self._from_zip(f, tmp, want, integrity, sdist=f.kind != "wheel", check_record=False)
            return self._from_tar(f, tmp, want, integrity)

    def _ranged_wheel(self, f: DistFile, want: Want) -> Extract:
        assert f.size is not None
        try:
            return self._from_zip(f, RangeFile(lambda a, b: self._range(f, a, b), f.size), want, "crc32+record",
                                  sdist=False, check_record=True)
        except RangeNotSupportedError:
            return self._full(f, want)

    def _from_zip(self, f: DistFile, fh: IO[bytes], want: Want, integrity: str, *, sdist: bool,
                  check_record: bool) -> Extract:
        members: dict[str, str] = {}
        metadata = None
        scanned = 0
        try:
            with zipfile.ZipFile(fh) as zf:
                infos = [i for i in zf.infolist() if not i.is_dir()]
                hashes: dict[str, str] = {}
                if check_record:
                    record = next((i for i in infos if i.filename.endswith(".dist-info/RECORD")
                                   and i.filename.count("/") == 1), None)
                    if record is None:
                        integrity = "crc32 (no RECORD in the wheel)"
                    else:
                        hashes = record_hashes(zf.read(record).decode("utf-8", errors="replace"))
                named = [(i, strip_sdist_root(i.filename) if sdist else i.filename) for i in infos]
                if want.closure is not None and not check_record and not want.metadata:
                    # Read only what the closure follows (zipfile decompresses member by member).
                    by_name = {n: i for i, n in named if want.name(n)}
                    members = want.closure(list(by_name), lambda n: zf.read(by_name[n]).decode(
                        "utf-8", errors="replace"))
                    return Extract(f.filename, f.sha256, integrity, members, len(by_name), None)
                chosen = [(i, n) for i, n in named if want.name(n) or (want.metadata and is_metadata(n, sdist))]
                if isinstance(fh, RangeFile):
                    fh.prefetch(_spans(zf, [i for i, _ in chosen]))
                for info, name in chosen:
                    meta = want.metadata and metadata is None and is_metadata(name, sdist)
                    if not meta and not want.name(name):
                        continue
                    data = zf.read(info)  # zipfile checks the CRC32
                    expected = hashes.get(info.filename)
                    if check_record and expected and expected != record_digest(data):
                        raise FetchError(f"{f.filename}: {info.filename} does not match the wheel's RECORD")
                    text = data.decode("utf-8", errors="replace")
                    if meta:
                        metadata = text
                        continue
                    scanned += 1
                    if want.keep(name, text):
                        members[name] = text
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as exc:
            raise FetchError(f"{f.filename}: cannot read the zip ({exc})") from exc
        return Extract(f.filename, f.sha256, integrity, _closed(want, members), scanned, metadata)

    def _from_tar(self, f: DistFile, fh: IO[bytes], want: Want, integrity: str) -> Extract:
        members: dict[str, str] = {}
        metadata = None
        scanned = 0
        try:
            with tarfile.open(fileobj=fh, mode="r:*") as tf:
                for info in tf:
                    if not info.isfile():
                        continue
                    name = strip_sdist_root(info.name)
                    meta = want.metadata and metadata is None and is_metadata(name, True)
                    if not meta and not want.name(name):
                        continue
                    src = tf.extractfile(info)
                    if src is None:
                        continue
                    text = src.read().decode("utf-8", errors="replace")
                    if meta:
                        metadata = text
                        continue
                    scanned += 1
                    if want.keep(name, text):
                        members[name] = text
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise FetchError(f"{f.filename}: cannot read the sdist ({exc})") from exc
        return Extract(f.filename, f.sha256, integrity, _closed(want, members), scanned, metadata)
