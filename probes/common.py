"""Helpers shared by the probe processes: result files, versions, error text.

Every probe process writes exactly one JSON file (path given with
``--out``) atomically, so a crash leaves either a complete result or none,
and the parent judges the process by its exit code and that file together.
"""

from __future__ import annotations

import json
import os
import traceback
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


def error_text(exc: BaseException, limit: int = 6) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(tb[-limit:]).strip()
    return f"{type(exc).__name__}: {exc}\n{tail}"

