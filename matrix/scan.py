"""The wide static scan: every zoo and unsloth release on the index, classified without installing anything.

For each ``unsloth_zoo`` release the scan reads
``unsloth_zoo/fused_losses/cross_entropy_loss.py`` straight out of the wheel
(or the sdist when there is no wheel) and hands it to the static detector
(``probes.checks.fused_ce_masked_nan.static.analyze_source``). For each ``unsloth`` release it reads the
core metadata (``Requires-Dist`` on ``unsloth_zoo``: the admitted zoo range,
its floor, and whether that floor is vulnerable) and looks for a guard by
static reading: our backport's marker and guard module, and heuristically any
code that assigns ``UnslothFusedLoss.forward``. Nothing is imported or
installed.

The pipeline: list releases (``ScanIndex``, a caching wrapper of
``matrix.index.IndexClient``) -> pick one file per release -> fetch the few
members needed into a persistent cache (``Fetcher``: a full download with its
sha256 checked against the index for small files; HTTP range reads of the zip
central directory and the wanted members for large wheels, checked by CRC32
and against the wheel's RECORD) -> analyse (``classify_zoo``,
``analyze_unsloth``, cached per file sha256) -> timeline -> ``scan.json`` (schema
``reports/scan.schema.json``) and ``scan.md``.

The cache (``SKEWMATRIX_CACHE``, default ``~/.cache/skewmatrix/scan``) holds
the last good index page per project and, per file sha256, the extracted
members (not whole wheels). Verdicts are recomputed from the cached members on
every run, so a change to the detector never needs a new download. When the
index cannot be reached, the cached page is used and the scan says so.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import functools
import hashlib
import json
import os
import re
import resource
import struct
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from matrix.errors import IndexLookupError, SkewmatrixError
from matrix.index import TIMEOUT_S, IndexClient, redact

SCHEMA = "skewmatrix.scan/1"
CACHE_ENV = "SKEWMATRIX_CACHE"
# Bump when the set of members an extract keeps changes: old extracts are then fetched again.
EXTRACT_VERSION = 1
ZOO = "unsloth-zoo"
UNSLOTH = "unsloth"
CE_MEMBER = "unsloth_zoo/fused_losses/cross_entropy_loss.py"
GUARD_MEMBER = "unsloth/fused_ce_guard.py"
INIT_MEMBER = "unsloth/__init__.py"
MARKER_NAME = "SKEWMATRIX_BACKPORT.json"
CLASS_NAME = "UnslothFusedLoss"
# Files at most this big are downloaded whole (sha256 checked); larger wheels are read by range.
FULL_DOWNLOAD_MAX = 16 * 1024 * 1024
MAX_WORKERS = 8
TAIL_BYTES = 64 * 1024
# Adjacent members closer than this are fetched in one range request.
COALESCE_GAP = 256 * 1024
CHUNK = 1024 * 1024


class ScanError(SkewmatrixError):
    """The scan cannot run (bad option, index unreachable with nothing cached)."""


class FetchError(Exception):
    """One file could not be fetched or verified; becomes an ``unknown`` verdict with this reason."""


def cache_dir() -> Path:
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "skewmatrix" / "scan"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------- index


@dataclass(frozen=True)
class DistFile:
    """One file of a release as the index lists it."""

    filename: str
    url: str
    sha256: str | None
    size: int | None
    yanked: bool
    yanked_reason: str | None = None
    metadata_sha256: str | None = None  # PEP 658/714: a .metadata file exists (its sha256, or "" if unhashed)
    has_metadata: bool = False

    @property
    def kind(self) -> str:
        if self.filename.endswith(".whl"):
            return "wheel"
        if self.filename.endswith((".tar.gz", ".tgz", ".zip", ".tar")):
            return "sdist"
        return "other"


@dataclass
class Release:
    version: Version
    files: list[DistFile] = field(default_factory=list)

    @property
    def yanked(self) -> bool:
        return bool(self.files) and all(f.yanked for f in self.files)

    def yanked_reason(self) -> str | None:
        return next((f.yanked_reason for f in self.files if f.yanked and f.yanked_reason), None)

    def pick(self) -> DistFile | None:
        """The file to read: a pure-Python wheel, else any wheel, else the sdist."""
        wheels = [f for f in self.files if f.kind == "wheel"]
        pure = [f for f in wheels if f.filename.endswith("-none-any.whl")]
        sdists = [f for f in self.files if f.kind == "sdist" and f.filename.endswith((".tar.gz", ".tgz", ".zip"))]
        for group in (pure, wheels, sdists):
            if group:
                return group[0]
        return None


def _version_of(filename: str, project: str) -> Version | None:
    """The version in a wheel or sdist file name (``name-version[-...]``)."""
    stem = filename
    for ext in (".whl", ".tar.gz", ".tgz", ".zip", ".tar"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    else:
        return None
    prefix = re.sub(r"[-_.]+", "_", project).lower()
    head = re.sub(r"[-_.]+", "_", stem).lower()
    if not head.startswith(prefix + "_"):
        return None
    rest = stem[len(prefix) + 1:]
    raw = rest.split("-", 1)[0] if filename.endswith(".whl") else rest
    try:
        return Version(raw)
    except InvalidVersion:
        return None


class ScanIndex(IndexClient):
    """``IndexClient`` plus a persistent copy of each project page, used when the index fails."""

    def __init__(self, url: str | None = None, cache: Path | None = None, offline: bool = False) -> None:
        super().__init__(url)
        self.cache = cache
        self.offline = offline
        self.warnings: list[str] = []

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
                data = self._page(project)
            except IndexLookupError as exc:
                if path is None or not path.is_file():
                    raise ScanError(f"{exc}; nothing cached for it in {self.cache} either") from exc
                self.warnings.append(f"{exc}; using the copy cached at {path}")
            else:
                if path is not None:
                    _write_atomic(path, json.dumps(data))
                return data, "index"
        if path is None or not path.is_file():
            raise ScanError(f"{canonicalize_name(project)}: offline and no cached index page in {self.cache}")
        return json.loads(path.read_text(encoding="utf-8")), "cache"

    def page_url(self, project: str) -> str:
        return f"{self.url}/{canonicalize_name(project)}/"

    def releases(self, project: str) -> tuple[list[Release], str]:
        """Every release with its files, ascending, and the page's origin."""
        data, origin = self.page(project)
        base = self.page_url(project)
        by_version: dict[Version, Release] = {}
        for raw in data.get("versions") or []:
            with contextlib.suppress(InvalidVersion):
                v = Version(raw)
                by_version.setdefault(v, Release(v))
        for f in data.get("files", []):
            v = _version_of(f["filename"], project)
            if v is None:
                continue
            yanked = f.get("yanked", False)
            meta = f.get("core-metadata", f.get("data-dist-info-metadata", False))
            by_version.setdefault(v, Release(v)).files.append(DistFile(
                filename=f["filename"], url=urllib.parse.urljoin(base, f["url"]),
                sha256=(f.get("hashes") or {}).get("sha256"), size=f.get("size"),
                yanked=bool(yanked), yanked_reason=yanked if isinstance(yanked, str) else None,
                metadata_sha256=(meta.get("sha256") if isinstance(meta, dict) else None),
                has_metadata=bool(meta)))
        return [by_version[v] for v in sorted(by_version)], origin


# --------------------------------------------------------------------------- fetching


@dataclass(frozen=True)
class Extract:
    """The members of one file that the scan needs, read and verified once, cached by the file's sha256."""

    filename: str
    sha256: str | None
    integrity: str  # how the content was checked (see Fetcher)
    members: dict[str, str]  # archive member (sdist prefix stripped) -> text
    scanned: int  # how many candidate members were looked at
    metadata: str | None = None  # core metadata text (METADATA / PKG-INFO / PEP 658)

    def to_dict(self) -> dict[str, Any]:
        return {"extract_version": EXTRACT_VERSION, "filename": self.filename, "sha256": self.sha256,
                "integrity": self.integrity, "members": self.members, "scanned": self.scanned,
                "metadata": self.metadata}


# Which members to keep: a predicate on the name (decides fetching) and one on the text (decides keeping).
@dataclass(frozen=True)
class Want:
    name: Callable[[str], bool]
    keep: Callable[[str, str], bool]
    metadata: bool = False


def _zoo_want() -> Want:
    return Want(name=lambda n: n == CE_MEMBER, keep=lambda n, t: True)


def _unsloth_want() -> Want:
    def name(n: str) -> bool:
        return (n.startswith("unsloth/") and n.endswith(".py")) or n.endswith(f".dist-info/{MARKER_NAME}")

    def keep(n: str, t: str) -> bool:
        return (n in (GUARD_MEMBER, INIT_MEMBER) or n.endswith(MARKER_NAME) or CLASS_NAME in t
                or "fused_ce_guard" in t)

    return Want(name=name, keep=keep, metadata=True)


def _record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _strip_sdist_root(name: str) -> str:
    parts = name.split("/", 1)
    rel = parts[1] if len(parts) == 2 else name
    return rel[4:] if rel.startswith("src/") else rel


class Fetcher:
    """Reads the wanted members of index files into the cache. Thread-safe; one instance per run.

    Integrity, recorded per extract:
    * ``sha256``: the whole file was downloaded and its sha256 matched the index;
    * ``crc32+record``: a large wheel read by HTTP range: every member's CRC32 matched the zip
      directory and its sha256 matched the wheel's RECORD (the index hash covers the whole file,
      which a range read never sees).
    """

    def __init__(self, cache: Path, full_max: int = FULL_DOWNLOAD_MAX) -> None:
        self.cache = cache
        self.full_max = full_max
        self.stats = {"downloaded_bytes": 0, "requests": 0, "cache_hits": 0, "fetched": 0}
        self._lock = threading.Lock()

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def _path(self, sha: str) -> Path:
        return self.cache / "extract" / sha[:2] / f"{sha}.json"

    def cached(self, f: DistFile) -> Extract | None:
        if not f.sha256:
            return None
        path = self._path(f.sha256)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if data.get("extract_version") != EXTRACT_VERSION:
            return None
        return Extract(data["filename"], data["sha256"], data["integrity"], data["members"], data["scanned"],
                       data.get("metadata"))

    def get(self, f: DistFile, want: Want) -> Extract:
        hit = self.cached(f)
        if hit is not None:
            self._count("cache_hits")
            return hit
        if f.kind == "wheel" and f.size and f.size > self.full_max:
            ex = self._ranged_wheel(f, want)
        else:
            ex = self._full(f, want)
        if want.metadata and ex.metadata is None and f.has_metadata:
            ex = Extract(ex.filename, ex.sha256, ex.integrity, ex.members, ex.scanned, self._pep658(f))
        self._count("fetched")
        if f.sha256:
            _write_atomic(self._path(f.sha256), json.dumps(ex.to_dict()))
        return ex

    # -- HTTP
    def _open(self, url: str, headers: dict[str, str] | None = None) -> Any:
        self._count("requests")
        req = urllib.request.Request(url, headers=headers or {})
        try:
            return urllib.request.urlopen(req, timeout=TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            raise FetchError(f"{redact(url)}: HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise FetchError(f"{redact(url)}: unreachable ({getattr(exc, 'reason', exc)})") from exc

    def _range(self, f: DistFile, start: int, end: int) -> bytes | None:
        """Bytes ``start..end`` inclusive, or None when the server ignores Range."""
        with self._open(f.url, {"Range": f"bytes={start}-{end}"}) as resp:
            if resp.status != 206:
                return None
            data = resp.read()
        self._count("downloaded_bytes", len(data))
        if len(data) != end - start + 1:
            raise FetchError(f"{f.filename}: range {start}-{end} returned {len(data)} bytes")
        return data

    def _pep658(self, f: DistFile) -> str:
        with self._open(f.url + ".metadata") as resp:
            data = resp.read()
        self._count("downloaded_bytes", len(data))
        if f.metadata_sha256 and hashlib.sha256(data).hexdigest() != f.metadata_sha256:
            raise FetchError(f"{f.filename}.metadata: sha256 does not match the index")
        return data.decode("utf-8", errors="replace")

    # -- whole file
    def _full(self, f: DistFile, want: Want) -> Extract:
        tmpdir = self.cache / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with tempfile.TemporaryFile(dir=tmpdir) as tmp:
            with self._open(f.url) as resp:
                while chunk := resp.read(CHUNK):
                    digest.update(chunk)
                    tmp.write(chunk)
                    self._count("downloaded_bytes", len(chunk))
            if f.sha256 is None:
                integrity = "none (the index publishes no sha256)"
            elif digest.hexdigest() != f.sha256:
                raise FetchError(f"{f.filename}: sha256 {digest.hexdigest()} does not match the index's {f.sha256}")
            else:
                integrity = "sha256"
            tmp.seek(0)
            if f.kind == "wheel" or f.filename.endswith(".zip"):
                return self._from_zip(f, tmp, want, integrity, sdist=f.kind != "wheel")
            return self._from_tar(f, tmp, want, integrity)

    def _from_zip(self, f: DistFile, fh: Any, want: Want, integrity: str, sdist: bool) -> Extract:
        try:
            zf = zipfile.ZipFile(fh)
        except zipfile.BadZipFile as exc:
            raise FetchError(f"{f.filename}: not a zip file ({exc})") from exc
        members: dict[str, str] = {}
        metadata = None
        scanned = 0
        with zf:
            for info in zf.infolist():
                name = _strip_sdist_root(info.filename) if sdist else info.filename
                if want.metadata and metadata is None and _is_metadata(name, sdist):
                    metadata = zf.read(info).decode("utf-8", errors="replace")
                if info.is_dir() or not want.name(name):
                    continue
                scanned += 1
                text = zf.read(info).decode("utf-8", errors="replace")
                if want.keep(name, text):
                    members[name] = text
        return Extract(f.filename, f.sha256, integrity, members, scanned, metadata)

    def _from_tar(self, f: DistFile, fh: Any, want: Want, integrity: str) -> Extract:
        members: dict[str, str] = {}
        metadata = None
        scanned = 0
        try:
            with tarfile.open(fileobj=fh, mode="r:*") as tf:
                for info in tf:
                    if not info.isfile():
                        continue
                    name = _strip_sdist_root(info.name)
                    is_meta = want.metadata and metadata is None and _is_metadata(name, True)
                    if not is_meta and not want.name(name):
                        continue
                    src = tf.extractfile(info)
                    if src is None:
                        continue
                    text = src.read().decode("utf-8", errors="replace")
                    if is_meta:
                        metadata = text
                        continue
                    scanned += 1
                    if want.keep(name, text):
                        members[name] = text
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise FetchError(f"{f.filename}: cannot read the sdist ({exc})") from exc
        return Extract(f.filename, f.sha256, integrity, members, scanned, metadata)

    # -- range reads of a wheel
    def _ranged_wheel(self, f: DistFile, want: Want) -> Extract:
        assert f.size is not None
        size = f.size
        tail_len = min(TAIL_BYTES, size)
        tail = self._range(f, size - tail_len, size - 1)
        if tail is None:  # no Range support: read it whole
            return self._full(f, want)
        entries, cd_offset = _central_directory(tail, size, lambda a, b: self._range(f, a, b) or b"", f.filename)
        wanted = [e for e in entries if not e.name.endswith("/") and (
            want.name(e.name) or (want.metadata and _is_metadata(e.name, False))
            or e.name.endswith(".dist-info/RECORD"))]
        blobs = self._read_members(f, wanted, entries, cd_offset)
        record = next((blobs[e.name] for e in wanted if e.name.endswith(".dist-info/RECORD")), None)
        hashes = _record_hashes(record.decode("utf-8", errors="replace")) if record is not None else {}
        members: dict[str, str] = {}
        metadata = None
        scanned = 0
        for e in wanted:
            data = blobs[e.name]
            if e.name.endswith(".dist-info/RECORD"):
                continue
            expected = hashes.get(e.name)
            if record is not None and expected and expected != _record_digest(data):
                raise FetchError(f"{f.filename}: {e.name} does not match the wheel's RECORD")
            text = data.decode("utf-8", errors="replace")
            if want.metadata and _is_metadata(e.name, False):
                metadata = text
                continue
            scanned += 1
            if want.keep(e.name, text):
                members[e.name] = text
        integrity = "crc32+record" if record is not None else "crc32 (no RECORD in the wheel)"
        return Extract(f.filename, f.sha256, integrity, members, scanned, metadata)

    def _read_members(self, f: DistFile, wanted: list[ZipEntry], entries: list[ZipEntry],
                      cd_offset: int) -> dict[str, bytes]:
        """Member bytes, fetched in coalesced ranges (a member ends where the next one starts)."""
        starts = sorted({e.offset for e in entries} | {cd_offset})
        end_of = {s: (starts[i + 1] if i + 1 < len(starts) else cd_offset) for i, s in enumerate(starts)}
        spans: list[tuple[int, int, list[ZipEntry]]] = []
        for e in sorted(wanted, key=lambda e: e.offset):
            end = end_of[e.offset]
            if spans and e.offset - spans[-1][1] <= COALESCE_GAP:
                s, _, group = spans[-1]
                spans[-1] = (s, max(end, spans[-1][1]), [*group, e])
            else:
                spans.append((e.offset, end, [e]))
        out: dict[str, bytes] = {}
        for start, end, group in spans:
            blob = self._range(f, start, end - 1)
            if blob is None:
                raise FetchError(f"{f.filename}: the server stopped honouring Range")
            for e in group:
                out[e.name] = _member_bytes(blob, e.offset - start, e, f.filename)
        return out


def _is_metadata(name: str, sdist: bool) -> bool:
    if sdist:
        return name == "PKG-INFO"
    return name.endswith(".dist-info/METADATA") and name.count("/") == 1


@dataclass(frozen=True)
class ZipEntry:
    name: str
    method: int
    csize: int
    usize: int
    crc: int
    offset: int


def _central_directory(tail: bytes, size: int, fetch: Callable[[int, int], bytes],
                       label: str) -> tuple[list[ZipEntry], int]:
    """Parse the zip central directory; ``tail`` is the last bytes of the file, ``fetch`` reads more."""
    pos = tail.rfind(b"PK\x05\x06")
    if pos < 0:
        raise FetchError(f"{label}: no end-of-central-directory record in the last {len(tail)} bytes")
    tail_start = size - len(tail)
    (_, _, _, _, count, cd_size, cd_offset, _) = struct.unpack("<4sHHHHIIH", tail[pos:pos + 22])
    loc = tail.rfind(b"PK\x06\x07", 0, pos)
    if loc >= 0 and (cd_offset == 0xFFFFFFFF or count == 0xFFFF or cd_size == 0xFFFFFFFF):
        (eocd64,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
        rec = tail[eocd64 - tail_start:eocd64 - tail_start + 56] if eocd64 >= tail_start else fetch(
            eocd64, eocd64 + 55)
        count, cd_size, cd_offset = struct.unpack("<QQQ", rec[32:56])
    if cd_offset >= tail_start:
        cd = tail[cd_offset - tail_start:cd_offset - tail_start + cd_size]
    else:
        cd = fetch(cd_offset, cd_offset + cd_size - 1)
    entries: list[ZipEntry] = []
    i = 0
    for _ in range(count):
        if cd[i:i + 4] != b"PK\x01\x02":
            raise FetchError(f"{label}: corrupt central directory at entry {len(entries)}")
        (method, _, _, crc, csize, usize, nlen, elen, clen, _, _, _, offset) = struct.unpack(
            "<HHHIIIHHHHHII", cd[i + 10:i + 46])
        name = cd[i + 46:i + 46 + nlen].decode("utf-8", errors="replace")
        extra = cd[i + 46 + nlen:i + 46 + nlen + elen]
        if 0xFFFFFFFF in (csize, usize, offset):
            usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
        entries.append(ZipEntry(name, method, csize, usize, crc, offset))
        i += 46 + nlen + elen + clen
    return entries, cd_offset


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    j = 0
    while j + 4 <= len(extra):
        tag, ln = struct.unpack("<HH", extra[j:j + 4])
        if tag == 1:
            vals = list(struct.unpack(f"<{ln // 8}Q", extra[j + 4:j + 4 + (ln // 8) * 8]))
            if usize == 0xFFFFFFFF:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF:
                csize = vals.pop(0)
            if offset == 0xFFFFFFFF:
                offset = vals.pop(0)
        j += 4 + ln
    return usize, csize, offset


def _member_bytes(blob: bytes, at: int, e: ZipEntry, label: str) -> bytes:
    if blob[at:at + 4] != b"PK\x03\x04":
        raise FetchError(f"{label}: no local header for {e.name}")
    nlen, elen = struct.unpack("<HH", blob[at + 26:at + 30])
    start = at + 30 + nlen + elen
    raw = blob[start:start + e.csize]
    if e.method == 0:
        data = raw
    elif e.method == 8:
        data = zlib.decompress(raw, -15)
    else:
        raise FetchError(f"{label}: {e.name} uses zip method {e.method}, which the scan does not read")
    if zlib.crc32(data) != e.crc or len(data) != e.usize:
        raise FetchError(f"{label}: {e.name} fails its CRC32 check")
    return data


def _record_hashes(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1]:
            out[parts[0]] = parts[1]
    return out


# --------------------------------------------------------------------------- classification


def classify_zoo(ex: Extract) -> dict[str, Any]:
    """Verdict of one zoo file's extract (see ``probes.checks.fused_ce_masked_nan.static``)."""
    from probes.checks.fused_ce_masked_nan.static import analyze_source

    text = ex.members.get(CE_MEMBER)
    if text is None:
        return {"verdict": "absent", "reason": f"no {CE_MEMBER} in {ex.filename}", "evidence_line": None}
    v = analyze_source(text, CE_MEMBER)
    return {"verdict": v.verdict, "reason": v.reason, "evidence_line": v.evidence_line}


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


# A cheap text test before the AST walk: an attribute write to ``forward`` or any ``setattr`` call.
WRITES_FORWARD = re.compile(r"\.[\s\\]*forward[\s\\)]*[-+*/|&@%^]?=(?!=)|\bsetattr\s*\(")
FORWARD_TEXT = re.compile(rf"\b{CLASS_NAME}\s*\.\s*forward\s*=(?!=)|setattr\(\s*{CLASS_NAME}\s*,\s*['\"]forward['\"]")


def guard_in_source(text: str, name: str) -> tuple[str, str]:
    """``(state, evidence)`` for one module: does it replace ``UnslothFusedLoss.forward``?

    ``present``: an assignment or ``setattr`` of ``forward`` on a name ``UnslothFusedLoss`` or an alias bound
    from an expression that names it (``X = mod.UnslothFusedLoss``, ``X = getattr(mod, "UnslothFusedLoss")``),
    or generated code in a string doing the same. ``unknown``: the module names the class in code and writes a
    ``forward`` attribute on something we cannot resolve. ``absent``: neither.
    """
    if not WRITES_FORWARD.search(text):
        return "absent", ""  # every present/unknown case below needs one of these spellings
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return "unknown", f"{name}: cannot parse ({exc.msg}, line {exc.lineno})"
    # One walk collects everything; the alias pass below only looks at assignments near a reference.
    refs: list[tuple[int, int]] = []
    assigns: list[ast.Assign | ast.AnnAssign] = []
    writes: list[tuple[ast.AST, ast.AST]] = []  # (statement or call, object whose forward is written)
    unresolved: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == CLASS_NAME:
                refs.append((node.lineno, node.col_offset))
            elif FORWARD_TEXT.search(node.value):
                return "present", f"{name}:{node.lineno}: generated code assigns {CLASS_NAME}.forward"
        elif isinstance(node, ast.Name | ast.Attribute) and _name_of(node) == CLASS_NAME:
            refs.append((node.lineno, node.col_offset))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            if not isinstance(node, ast.AugAssign) and node.value is not None:
                assigns.append(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            writes += [(node, t.value) for t in targets if isinstance(t, ast.Attribute) and t.attr == "forward"]
        elif isinstance(node, ast.Call) and _name_of(node.func) == "setattr" and len(node.args) >= 2:
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and attr.value == "forward":
                writes.append((node, node.args[0]))
            elif not isinstance(attr, ast.Constant):
                unresolved.append(node.lineno)
    if not refs:
        return "absent", ""

    def inside(pos: tuple[int, int], n: ast.AST) -> bool:
        end = (getattr(n, "end_lineno", None) or n.lineno, getattr(n, "end_col_offset", None) or 0)
        return (n.lineno, n.col_offset) <= pos <= end

    aliases = {CLASS_NAME}
    for a in assigns:
        if a.value is not None and any(inside(r, a.value) for r in refs):
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            aliases |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for stmt, obj in writes:
        what = _name_of(obj)
        if what in aliases:
            how = "setattr on" if isinstance(stmt, ast.Call) else "assigns"
            return "present", f"{name}:{stmt.lineno}: {how} {what}.forward"
        unresolved.append(stmt.lineno)
    if unresolved:
        lines = ", ".join(str(n) for n in sorted(set(unresolved))[:5])
        return "unknown", (f"{name}: names {CLASS_NAME} and writes a forward attribute (or a computed attribute) "
                           f"on an object the static reading cannot resolve (line {lines})")
    return "absent", ""


def guard_state(ex: Extract) -> dict[str, Any]:
    """Guard present / absent / unknown in one unsloth extract, with the evidence."""
    evidence: list[str] = []
    marker = next((n for n in ex.members if n.endswith(MARKER_NAME)), None)
    if marker is not None:
        with contextlib.suppress(ValueError):
            info = json.loads(ex.members[marker])
            evidence.append(f"{marker}: skewmatrix backport {info.get('backport', info.get('name', '?'))!r}")
    if GUARD_MEMBER in ex.members:
        wired = "fused_ce_guard" in ex.members.get(INIT_MEMBER, "")
        if wired:
            evidence.append(f"{GUARD_MEMBER} ships and {INIT_MEMBER} imports it")
            return {"state": "present", "kind": "skewmatrix-backport", "evidence": evidence}
        return {"state": "unknown", "kind": "skewmatrix-backport",
                "evidence": [*evidence, f"{GUARD_MEMBER} ships but {INIT_MEMBER} never imports it"]}
    if marker is not None:
        return {"state": "unknown", "kind": "skewmatrix-backport",
                "evidence": [*evidence, f"a backport marker but no {GUARD_MEMBER}"]}
    unknown: list[str] = []
    for name in sorted(ex.members):
        if not name.endswith(".py"):
            continue
        state, why = guard_in_source(ex.members[name], name)
        if state == "present":
            return {"state": "present", "kind": "heuristic", "evidence": [why]}
        if state == "unknown":
            unknown.append(why)
    if unknown:
        return {"state": "unknown", "kind": "heuristic", "evidence": unknown}
    if ex.scanned == 0:
        return {"state": "unknown", "kind": None, "evidence": [f"no unsloth/*.py found in {ex.filename}"]}
    return {"state": "absent", "kind": None,
            "evidence": [f"{ex.scanned} module(s) read; none replaces {CLASS_NAME}.forward"]}


ZOO_REQ = re.compile(r"\s*unsloth[-_.]+zoo\b", re.IGNORECASE)


def zoo_requirements(metadata: str | None) -> dict[str, Any]:
    """The ``unsloth_zoo`` requirements in core metadata: the plain-install range and per-extra ranges."""
    if metadata is None:
        return {"known": False, "reason": "no core metadata found", "requirements": [], "plain": None, "extras": {}}
    msg = HeaderParser().parsestr(metadata)
    extras = [canonicalize_name(e) for e in msg.get_all("Provides-Extra") or []]
    env = {**default_environment(), "extra": ""}
    reqs: list[dict[str, Any]] = []
    plain: SpecifierSet | None = None
    by_extra: dict[str, SpecifierSet] = {}
    for line in msg.get_all("Requires-Dist") or []:
        if not ZOO_REQ.match(line):  # parsing every requirement is slow; the name must lead the line
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            if "zoo" in line.lower():
                reqs.append({"requirement": line, "invalid": True})
            continue
        if canonicalize_name(req.name) != ZOO:
            continue
        marker = str(req.marker) if req.marker else None
        in_plain = req.marker is None or req.marker.evaluate(env)
        via = [e for e in extras if req.marker is not None and not in_plain
               and req.marker.evaluate({**env, "extra": e})]
        reqs.append({"requirement": line, "specifier": str(req.specifier), "marker": marker,
                     "extras_of_zoo": sorted(req.extras), "plain_install": in_plain, "via_extras": via})
        if in_plain:
            plain = req.specifier if plain is None else plain & req.specifier
        for e in via:
            by_extra[e] = req.specifier if e not in by_extra else by_extra[e] & req.specifier
    return {"known": True, "requirements": reqs, "plain": None if plain is None else str(plain),
            "extras": {e: str(s) for e, s in sorted(by_extra.items())}}


@functools.lru_cache(maxsize=4096)
def _version(text: str) -> Version:
    return Version(text)


def admitted_floor(spec: str, zoo: list[dict[str, Any]], include_yanked: bool) -> dict[str, Any] | None:
    """Lowest zoo release the specifier admits (yanked ones only when asked), with its verdict."""
    by_version = {_version(z["version"]): z for z in zoo if include_yanked or not z["yanked"]}
    # filter() follows PEP 440: pre-releases only when named or when nothing else matches.
    admitted = [by_version[v] for v in sorted(SpecifierSet(spec).filter(by_version))]
    if not admitted:
        return None
    floor = admitted[0]
    return {"version": floor["version"], "verdict": floor["verdict"],
            "admits_vulnerable": [z["version"] for z in admitted if z["verdict"] == "vulnerable"]}


def exposure(floor: dict[str, Any] | None, guard: str, required: bool = True) -> str:
    """``exposed`` / ``guarded`` / ``safe`` / ``not-required`` / ``unknown`` for one admitted floor and guard state."""
    if not required:
        return "not-required"
    if floor is None:
        return "unknown"
    if floor["verdict"] in ("fixed", "absent"):
        return "safe"
    if floor["verdict"] != "vulnerable":
        return "unknown"
    return {"present": "guarded", "absent": "exposed"}.get(guard, "unknown")


def timeline(zoo: list[dict[str, Any]], include_yanked: bool) -> dict[str, Any]:
    """First fixed release, the release from which every later one is fixed, and regressions."""
    considered = [z for z in zoo if include_yanked or not z["yanked"]]
    first_fixed = None
    last_fixed: str | None = None
    regressions = []
    for z in considered:
        if z["verdict"] == "fixed":
            first_fixed = first_fixed or z["version"]
            last_fixed = z["version"]
        elif z["verdict"] == "vulnerable" and last_fixed is not None:
            regressions.append({"version": z["version"], "after_fixed": last_fixed})
            last_fixed = None
    vulnerable = [z["version"] for z in considered if z["verdict"] == "vulnerable"]
    fixed_since = None
    if first_fixed is not None:
        later = considered if not vulnerable else [
            z for z in considered if Version(z["version"]) > Version(vulnerable[-1])]
        fixed_since = next((z["version"] for z in later if z["verdict"] == "fixed"), None)
    return {"first_fixed": first_fixed, "fixed_since": fixed_since, "last_vulnerable": vulnerable[-1] if vulnerable
            else None, "regressions": regressions}


# --------------------------------------------------------------------------- the run


@dataclass
class ScanOptions:
    zoo: str = ""
    unsloth: str = ""
    include_yanked: bool = False
    workers: int = 6
    offline: bool = False
    skip_unsloth: bool = False
    skip_zoo: bool = False


def _parse_spec(value: str, flag: str) -> SpecifierSet:
    try:
        return SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise ScanError(f"{flag} {value!r}: not a valid version specifier set (e.g. '>=2026.9,<2026.11'): "
                        f"{exc}") from exc


def _select(releases: list[Release], spec: SpecifierSet) -> list[Release]:
    """Releases the spec selects. Yanked ones stay listed (marked); ``timeline`` and floors skip them."""
    return [r for r in releases if not spec or spec.contains(r.version, prereleases=True)]


def _base(r: Release) -> dict[str, Any]:
    f = r.pick()
    return {"version": str(r.version), "yanked": r.yanked, "yanked_reason": r.yanked_reason(),
            "all_sha256": sorted(x.sha256 for x in r.files if x.sha256),
            "file": None if f is None else {"filename": f.filename, "sha256": f.sha256, "size": f.size,
                                            "kind": f.kind, "integrity": None}}


def analyzer_key() -> str:
    """Identifies the code that turns an extract into an analysis: cached analyses of other code are ignored."""
    from probes.checks.fused_ce_masked_nan import static

    h = hashlib.sha256()
    for mod_file in (static.__file__, __file__):
        h.update(Path(mod_file).read_bytes())
    return h.hexdigest()[:16]


def analyze_unsloth(ex: Extract) -> dict[str, Any]:
    """The per-file part of an unsloth verdict (cacheable): its zoo requirements and its guard."""
    return {"zoo_requirement": zoo_requirements(ex.metadata), "guard": guard_state(ex)}


def _classify_all(releases: list[Release], fetcher: Fetcher, want: Want, workers: int,
                  analyze: Callable[[Extract], dict[str, Any]],
                  unknown: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """Release entries with the analysis of their file; analyses are cached by file sha256 and analyzer."""
    key = analyzer_key()

    def one(r: Release) -> dict[str, Any]:
        entry = _base(r)
        f = r.pick()
        if f is None:
            return {**entry, **unknown(f"no wheel or sdist listed for {r.version}")}
        path = fetcher.cache / "analysis" / key / f"{f.sha256}.json" if f.sha256 else None
        if path is not None and path.is_file():
            with contextlib.suppress(OSError, ValueError):
                cached = json.loads(path.read_text(encoding="utf-8"))
                entry["file"]["integrity"] = cached.pop("integrity")
                fetcher._count("cache_hits")
                return {**entry, **cached}
        try:
            ex = fetcher.get(f, want)
        except FetchError as exc:
            return {**entry, **unknown(str(exc))}
        result = analyze(ex)
        if path is not None:
            _write_atomic(path, json.dumps({**result, "integrity": ex.integrity}))
        entry["file"]["integrity"] = ex.integrity
        return {**entry, **result}

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_WORKERS, workers))) as pool:
        return list(pool.map(one, releases))


def _finish_unsloth(u: dict[str, Any], zoo_all: list[dict[str, Any]], include_yanked: bool) -> dict[str, Any]:
    """Add the floors and exposures, which depend on the zoo verdicts of this run."""
    reqs, guard = u["zoo_requirement"], u["guard"]["state"]
    floor = admitted_floor(reqs["plain"], zoo_all, include_yanked) if reqs["plain"] is not None else None
    extra_floors = {e: admitted_floor(s, zoo_all, include_yanked) for e, s in reqs["extras"].items()}
    required = not reqs["known"] or reqs["plain"] is not None
    return {**u, "floor": floor, "extra_floors": extra_floors, "exposure": exposure(floor, guard, required),
            "extra_exposure": {e: exposure(f, guard) for e, f in extra_floors.items()}}


def run(opts: ScanOptions, cache: Path | None = None, index: ScanIndex | None = None,
        fetcher: Fetcher | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole scan as data (the ``scan.json`` document)."""
    zoo_spec = _parse_spec(opts.zoo, "--zoo")
    uns_spec = _parse_spec(opts.unsloth, "--unsloth")
    cache = cache or cache_dir()
    index = index or ScanIndex(cache=cache, offline=opts.offline)
    fetcher = fetcher or Fetcher(cache)
    started = time.monotonic()
    origins: dict[str, str] = {}
    errors: list[str] = []

    zoo_releases, origins[ZOO] = index.releases(ZOO)
    zoo_sel = _select(zoo_releases, zoo_spec)
    zoo: list[dict[str, Any]] = []
    if not opts.skip_zoo or not opts.skip_unsloth:
        # The unsloth floors need every zoo verdict, so all zoo releases are classified; --zoo selects the table.
        need = zoo_releases if not opts.skip_unsloth else zoo_sel
        results = _classify_all(need, fetcher, _zoo_want(), opts.workers, classify_zoo,
                                lambda why: {"verdict": "unknown", "reason": why, "evidence_line": None})
        zoo_all = results
        keep = {str(r.version) for r in zoo_sel}
        zoo = [z for z in zoo_all if z["version"] in keep]
    else:
        zoo_all = []

    unsloth: list[dict[str, Any]] = []
    if not opts.skip_unsloth:
        try:
            uns_releases, origins[UNSLOTH] = index.releases(UNSLOTH)
        except ScanError as exc:
            errors.append(str(exc))
            uns_releases = []
        uns_sel = _select(uns_releases, uns_spec)

        raw = _classify_all(uns_sel, fetcher, _unsloth_want(), opts.workers, analyze_unsloth,
                            lambda why: {"zoo_requirement": {"known": False, "reason": why, "requirements": [],
                                                             "plain": None, "extras": {}},
                                         "guard": {"state": "unknown", "kind": None, "evidence": [why]}})
        unsloth = [_finish_unsloth(u, zoo_all, opts.include_yanked) for u in raw]

    return {
        "schema": SCHEMA,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "index": {"url": redact(index.url), "origin": origins},
        "options": {"zoo": opts.zoo, "unsloth": opts.unsloth, "include_yanked": opts.include_yanked},
        "zoo": zoo,
        "timeline": timeline(zoo, opts.include_yanked),
        "unsloth": unsloth,
        "warnings": list(index.warnings),
        "errors": errors,
        "stats": {**fetcher.stats, "seconds": round(time.monotonic() - started, 3),
                  "zoo_classified": sum(1 for z in zoo_all if z["verdict"] != "unknown"),
                  "unsloth_classified": len(unsloth)},
    }


# --------------------------------------------------------------------------- rendering


def render_markdown(doc: dict[str, Any]) -> str:
    """The ``scan.md`` timeline and unsloth table."""
    t = doc["timeline"]
    lines = ["# Static scan: unsloth_zoo fused CE x unsloth", "",
             f"Index: `{doc['index']['url']}` ({', '.join(f'{k}: {v}' for k, v in doc['index']['origin'].items())}). "
             f"Generated {doc['generated']}.", ""]
    for w in doc["warnings"] + doc["errors"]:
        lines.append(f"> **warning:** {w}")
    if doc["warnings"] or doc["errors"]:
        lines.append("")
    lines += ["## unsloth_zoo timeline", ""]
    if t["first_fixed"]:
        lines.append(f"- **First fixed release: {t['first_fixed']}**.")
    else:
        lines.append("- **No fixed release found.**")
    if t["fixed_since"] and t["fixed_since"] != t["first_fixed"]:
        lines.append(f"- Fixed in every release from {t['fixed_since']} on.")
    if t["last_vulnerable"]:
        lines.append(f"- Last vulnerable release: {t['last_vulnerable']}.")
    if t["regressions"]:
        for r in t["regressions"]:
            lines.append(f"- **Regression: {r['version']} is vulnerable again after {r['after_fixed']} was fixed.**")
    else:
        lines.append("- No regression (no vulnerable release after a fixed one).")
    lines += ["", "| zoo | verdict | file | reason |", "|---|---|---|---|"]
    for z in doc["zoo"]:
        mark = " (yanked)" if z["yanked"] else ""
        fname = z["file"]["filename"] if z["file"] else "-"
        lines.append(f"| {z['version']}{mark} | {z['verdict']} | {fname} | {z['reason']} |")
    if doc["unsloth"]:
        lines += ["", "## unsloth releases", "",
                  "| unsloth | admitted zoo (plain install) | floor | floor verdict | exposure | guard | evidence |",
                  "|---|---|---|---|---|---|---|"]
        for u in doc["unsloth"]:
            mark = " (yanked)" if u["yanked"] else ""
            req = u["zoo_requirement"]
            rng = req["plain"] if req["plain"] is not None else ("not required" if req["known"] else "unknown")
            if req["plain"] == "":
                rng = "any"
            if req.get("extras"):
                rng += " · extras: " + ", ".join(f"[{e}] {s or 'any'}" for e, s in req["extras"].items())
            floor = u["floor"] or {}
            ev = "; ".join(u["guard"]["evidence"])[:160]
            lines.append(f"| {u['version']}{mark} | {rng} | {floor.get('version', '-')} | "
                         f"{floor.get('verdict', '-')} | {u['exposure']} | {u['guard']['state']} | {ev} |")
    lines.append("")
    return "\n".join(lines)


def summary(doc: dict[str, Any]) -> str:
    t = doc["timeline"]
    counts: dict[str, int] = {}
    for z in doc["zoo"]:
        counts[z["verdict"]] = counts.get(z["verdict"], 0) + 1
    exp: dict[str, int] = {}
    for u in doc["unsloth"]:
        exp[u["exposure"]] = exp.get(u["exposure"], 0) + 1
    parts = [f"scan: {len(doc['zoo'])} zoo release(s): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
             f"  first fixed: {t['first_fixed'] or 'none'}; fixed since: {t['fixed_since'] or 'n/a'}; "
             f"regressions: {', '.join(r['version'] for r in t['regressions']) or 'none'}"]
    if doc["unsloth"]:
        parts.append(f"  {len(doc['unsloth'])} unsloth release(s), exposure: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(exp.items())))
    parts += [f"  warning: {w}" for w in doc["warnings"] + doc["errors"]]
    return "\n".join(parts)


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "scan.json", out / "scan.md"]
    _write_atomic(paths[0], json.dumps(doc, indent=1) + "\n")
    _write_atomic(paths[1], render_markdown(doc))
    return paths


# --------------------------------------------------------------------------- comparison with cells


def _dynamic_zoo(cell: dict[str, Any]) -> str:
    cls = cell.get("classification")
    if isinstance(cls, dict) and cls.get("zoo"):
        return str(cls["zoo"])
    from reports.classify import zoo_state

    return zoo_state(cell)[0].value


def compare_with_cells(scan: dict[str, Any], cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scan verdict vs dynamic verdict for every cell whose zoo build is a PyPI release the scan classified.

    ``status``: ``consistent``, ``inconsistent`` (the verdicts differ, or the cell's own detectors
    disagree), ``not-comparable`` (the cell could not decide: unknown), or ``different-build`` (the cell's
    digest is not the sha256 of any file of that release on the index).
    """
    by_version = {z["version"]: z for z in scan.get("zoo", [])}
    out = []
    for cell in cells:
        build = (cell.get("builds") or {}).get("zoo") or {}
        if build.get("source") != "pypi" or not build.get("version"):
            continue
        try:
            key = str(Version(str(build["version"])))
        except InvalidVersion:
            continue
        z = by_version.get(key)
        if z is None or z["verdict"] == "unknown":
            continue
        dyn = _dynamic_zoo(cell)
        row = {"cell_id": cell.get("cell_id"), "zoo_version": key, "scan": z["verdict"], "dynamic": dyn,
               "scan_file": (z.get("file") or {}).get("filename")}
        digest = build.get("digest")
        scan_sha = (z.get("file") or {}).get("sha256")
        if digest and scan_sha and digest != scan_sha and digest not in (z.get("all_sha256") or []):
            row.update(status="different-build",
                       reason=f"cell digest {digest[:12]} is not the scanned file's sha256 {scan_sha[:12]}")
        elif dyn == "unknown":
            row.update(status="not-comparable", reason="the cell could not decide the zoo state")
        elif dyn == z["verdict"]:
            row.update(status="consistent", reason=f"both say {dyn}")
        else:
            row.update(status="inconsistent", reason=f"scan says {z['verdict']} ({z['reason']}); cell says {dyn}")
        out.append(row)
    return out


# --------------------------------------------------------------------------- CLI


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Statically classify every unsloth_zoo and unsloth "
                                "release on the configured index, without installing anything.")
    p.add_argument("--zoo", default="", metavar="SPEC", help="zoo releases to list (packaging specifier set; "
                   "default: every release)")
    p.add_argument("--unsloth", default="", metavar="SPEC", help="unsloth releases to list (default: every release)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: reports/out)")
    p.add_argument("--include-yanked", action="store_true", help="use yanked releases as candidates too")
    p.add_argument("--cache", type=Path, default=None, help=f"cache directory (default: ${CACHE_ENV} or "
                   "~/.cache/skewmatrix/scan)")
    p.add_argument("--workers", type=int, default=6, help=f"parallel downloads (1..{MAX_WORKERS})")
    p.add_argument("--offline", action="store_true", help="use only the cache (index pages and extracts)")
    p.add_argument("--no-unsloth", action="store_true", help="classify zoo releases only")
    return p


def _options(ns: argparse.Namespace) -> ScanOptions:
    if not 1 <= ns.workers <= MAX_WORKERS:
        raise ScanError(f"--workers {ns.workers}: must be between 1 and {MAX_WORKERS}")
    return ScanOptions(zoo=ns.zoo, unsloth=ns.unsloth, include_yanked=ns.include_yanked, workers=ns.workers,
                       offline=ns.offline, skip_unsloth=ns.no_unsloth)


def main(argv: list[str]) -> int:
    """``nox -s scan -- ARGS``: scan, write scan.json and scan.md, print a summary. 0 when written, 2 on error."""
    from matrix.pipeline import out_dir

    ns = _parser("skewmatrix scan").parse_args(argv)
    try:
        doc = run(_options(ns), cache=ns.cache)
        paths = write(doc, ns.out or out_dir())
    except SkewmatrixError as exc:
        print(f"skewmatrix scan: {exc}", file=sys.stderr)
        return exc.return_code
    print(summary(doc))
    for p in paths:
        print(f"wrote {p}")
    return 0


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def bench(argv: list[str]) -> int:
    """``nox -s bench -- scan``: releases classified, seconds cold and warm, peak RSS -> bench-scan.json."""
    from matrix.pipeline import out_dir

    p = argparse.ArgumentParser(prog="skewmatrix bench scan")
    p.add_argument("what", nargs="?", default="scan")
    p.add_argument("--zoo", default="")
    p.add_argument("--with-unsloth", action="store_true", help="also scan every unsloth release")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--out", type=Path, default=None)
    ns = p.parse_args(argv)
    opts = ScanOptions(zoo=ns.zoo, workers=ns.workers, skip_unsloth=not ns.with_unsloth)
    figures: dict[str, Any] = {"workers": ns.workers, "with_unsloth": ns.with_unsloth}
    try:
        with tempfile.TemporaryDirectory(prefix="skewmatrix-bench-") as tmp:
            for label in ("cold", "warm"):
                t0 = time.monotonic()
                doc = run(opts, cache=Path(tmp), index=ScanIndex(cache=Path(tmp)), log=lambda s: None)
                figures[f"{label}_s"] = round(time.monotonic() - t0, 3)
                figures[f"{label}_stats"] = doc["stats"]
    except SkewmatrixError as exc:
        print(f"skewmatrix bench scan: {exc}", file=sys.stderr)
        return exc.return_code
    figures.update(releases_listed=len(doc["zoo"]), zoo_classified=doc["stats"]["zoo_classified"],
                   unsloth_classified=doc["stats"]["unsloth_classified"], peak_rss_mib=round(_peak_rss_mib(), 1),
                   first_fixed=doc["timeline"]["first_fixed"], cpus=os.cpu_count())
    out = ns.out or out_dir()
    _write_atomic(out / "bench-scan.json", json.dumps(figures, indent=1) + "\n")
    print(f"bench scan: {figures['zoo_classified']} zoo release(s) classified"
          + (f", {figures['unsloth_classified']} unsloth" if ns.with_unsloth else "")
          + f"; cold {figures['cold_s']} s, warm {figures['warm_s']} s; peak RSS {figures['peak_rss_mib']} MiB")
    print(f"wrote {out / 'bench-scan.json'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
