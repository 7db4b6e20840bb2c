"""Helpers shared by the probe processes: result files, timing, versions.

Every probe process writes exactly one JSON file (path given with
``--out``) atomically, so a crash leaves either a complete result or none,
and the parent judges the process by its exit code and that file together.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@contextmanager
def timed(sink: dict[str, float], key: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        sink[key] = round(time.perf_counter() - start, 3)


def error_text(exc: BaseException, limit: int = 6) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(tb[-limit:]).strip()
    return f"{type(exc).__name__}: {exc}\n{tail}"


def main_guarded(run: Any, out: str) -> int:
    """Run ``run()`` -> dict; write it to ``out``; never lose the error."""
    try:
        data = run()
    except BaseException as exc:  # a probe's own failure is a finding, kept in its JSON
        write_json(out, {"ok": False, "error": error_text(exc)})
        print(error_text(exc), file=sys.stderr)
        return 1
    data.setdefault("ok", True)
    write_json(out, data)
    return 0
