"""The names of the harness's environment variables, the repository root, and the scan cache's place.

The run's own settings (output directory, strict, run id, shard) are read
once, into the run value (``matrix.cells.runs``); what is left here is shared by
modules that have no run in hand. Nothing here starts a tool or touches the
network.
"""

from __future__ import annotations

import os
from pathlib import Path

from matrix import REPO_ROOT

__all__ = ["CACHE_ENV", "OUT_ENV", "REPO_ROOT", "RUN_ID_ENV", "STRICT_ENV", "scan_cache_dir"]
OUT_ENV = "SKEWMATRIX_OUT"
CACHE_ENV = "SKEWMATRIX_CACHE"
RUN_ID_ENV = "SKEWMATRIX_RUN_ID"
STRICT_ENV = "SKEWMATRIX_STRICT"


def scan_cache_dir() -> Path:
    """The scan's persistent cache: ``$SKEWMATRIX_CACHE``, else ``~/.cache/skewmatrix/scan``."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "skewmatrix" / "scan"
