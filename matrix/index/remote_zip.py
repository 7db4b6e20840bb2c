"""A read-only, seekable file object over HTTP range requests, for the stdlib ``zipfile``.

``zipfile.ZipFile(RangeFile(...))`` lists a large wheel and reads a few of its
members while downloading only the end of the file (the central directory)
and the blocks those members live in; ``zipfile`` does the zip and zip64
parsing and checks each member's CRC32. Reads are served from aligned blocks
kept for the life of the object, so the small header-then-data reads that
``zipfile`` makes cost one request per block, not one per call; ``prefetch``
loads the members about to be read in a few coalesced requests.
"""

from __future__ import annotations

import io
from collections.abc import Callable

BLOCK = 256 * 1024
TAIL = 64 * 1024
# Wanted members closer than this are fetched in one request (fewer round trips beat fewer bytes here).
COALESCE_GAP = 256 * 1024


class RangeNotSupportedError(Exception):
    """The server answered a range request with the whole file: read it whole instead."""


class RangeFile(io.RawIOBase):
    """``fetch(start, end_inclusive) -> bytes`` over a file of ``size`` bytes. See the module docstring."""

    def __init__(self, fetch: Callable[[int, int], bytes], size: int, *, block: int = BLOCK,
                 tail: int = TAIL) -> None:
        super().__init__()
        self._fetch = fetch
        self._size = size
        self._block = block
        self._pos = 0
        self._blocks: dict[int, bytes] = {}
        self.fetched = 0  # bytes received
        # The end of the file holds the central directory: one request for it up front.
        start = max(0, size - tail)
        self._load(start - start % block, size)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def _load(self, start: int, end: int) -> None:
        """Fetch the missing blocks of ``[start, end)`` in as few requests as possible."""
        first, last = start // self._block, (max(end, start + 1) - 1) // self._block
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        while missing:
            run = [missing.pop(0)]
            while missing and missing[0] == run[-1] + 1:
                run.append(missing.pop(0))
            lo = run[0] * self._block
            hi = min(self._size, (run[-1] + 1) * self._block)
            data = self._fetch(lo, hi - 1)
            if len(data) != hi - lo:
                raise OSError(f"range {lo}-{hi - 1}: expected {hi - lo} bytes, got {len(data)}")
            self.fetched += len(data)
            for i, b in enumerate(run):
                self._blocks[b] = data[i * self._block:(i + 1) * self._block]

    def prefetch(self, spans: list[tuple[int, int]], gap: int = COALESCE_GAP) -> None:
        """Load ``[start, end)`` spans ahead of reading, merging those closer than ``gap`` into one request."""
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start - merged[-1][1] <= gap:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            self._load(start, min(end, self._size))

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if self._pos >= end:
            return b""
        self._load(self._pos, end)
        out = bytearray()
        pos = self._pos
        while pos < end:
            b, at = divmod(pos, self._block)
            piece = self._blocks[b][at:at + end - pos]
            out += piece
            pos += len(piece)
        self._pos = end
        return bytes(out)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)
