"""``RangeFile``: the stdlib ``zipfile`` reading an archive through range requests, zip64 included."""

from __future__ import annotations

import io
import os
import zipfile

import pytest

from matrix.index import RangeFile


class Server:
    """Serves byte ranges of ``data`` and counts requests."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[tuple[int, int]] = []

    def fetch(self, start: int, end: int) -> bytes:
        self.calls.append((start, end))
        return self.data[start:end + 1]


def archive(members: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED, filler: int = 0) -> bytes:
    """A zip of ``members``; ``filler`` empty members first (more than 65535 entries make it a zip64 archive)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression, allowZip64=True) as zf:
        for i in range(filler):
            zf.writestr(zipfile.ZipInfo(f"f/{i}"), b"")
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


BIG = os.urandom(3 * 1024 * 1024)  # incompressible: the archive is large, like a wheel with a binary in it


@pytest.mark.parametrize("zip64", [False, True])
def test_zipfile_reads_members_through_ranges(zip64: bool) -> None:
    data = archive({"pkg/a.py": b"A = 1\n", "pkg/blob.bin": BIG, "pkg/b.py": b"B = 2\n" * 1000},
                   filler=70_000 if zip64 else 0)
    assert (b"PK\x06\x06" in data[-200:]) is zip64  # the zip64 end-of-central-directory record
    server = Server(data)
    rf = RangeFile(server.fetch, len(data))
    with zipfile.ZipFile(rf) as zf:
        assert zf.namelist()[-3:] == ["pkg/a.py", "pkg/blob.bin", "pkg/b.py"]
        assert zf.read("pkg/b.py") == b"B = 2\n" * 1000
        assert zf.read("pkg/a.py") == b"A = 1\n"
    assert rf.fetched < len(data) - len(BIG) // 2  # the 3 MiB member was never downloaded
    assert all(0 <= a <= b < len(data) for a, b in server.calls)


def test_prefetch_coalesces_nearby_members_into_one_request() -> None:
    members = {f"pkg/m{i}.py": f"X{i} = {i}\n".encode() * 50 for i in range(40)}
    data = archive({"pkg/blob.bin": BIG, **members})
    server = Server(data)
    rf = RangeFile(server.fetch, len(data), block=64 * 1024)
    with zipfile.ZipFile(rf) as zf:
        infos = [i for i in zf.infolist() if i.filename.endswith(".py")]
        before = len(server.calls)
        rf.prefetch([(i.header_offset, i.header_offset + 30 + len(i.filename) + i.compress_size) for i in infos])
        assert len(server.calls) - before <= 1  # 40 small members next to each other: at most one request
        after = len(server.calls)
        assert {n: zf.read(n) for n in members} == members
        assert len(server.calls) == after  # reading them costs nothing more


def test_a_corrupt_member_fails_its_crc() -> None:
    data = bytearray(archive({"pkg/a.py": b"A = 1\n" * 100}, compression=zipfile.ZIP_STORED))
    at = data.find(b"A = 1")
    data[at] = ord("B")
    with zipfile.ZipFile(RangeFile(Server(bytes(data)).fetch, len(data))) as zf, \
            pytest.raises(zipfile.BadZipFile, match="CRC"):
        zf.read("pkg/a.py")


def test_seek_and_read_semantics() -> None:
    data = bytes(range(256)) * 10
    rf = RangeFile(Server(data).fetch, len(data), block=100, tail=50)
    assert rf.seek(-10, io.SEEK_END) == len(data) - 10 and rf.read() == data[-10:]
    assert rf.read() == b""
    rf.seek(95)
    assert rf.read(10) == data[95:105] and rf.tell() == 105  # across a block edge
    buf = bytearray(7)
    assert rf.readinto(buf) == 7 and bytes(buf) == data[105:112]
    with pytest.raises(ValueError, match="negative seek"):
        rf.seek(-1)


def test_a_short_answer_is_an_error() -> None:
    data = b"x" * 1000
    with pytest.raises(OSError, match="expected"):
        RangeFile(lambda a, b: data[a:b], len(data))  # one byte short: the end is inclusive
