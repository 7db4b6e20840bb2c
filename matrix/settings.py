"""Where the harness reads and writes: the output directory, the scan cache, the run id.

Plain functions over environment variables, shared by the pipeline, the scan
and the commands, so that none of them has to import another to learn a path.
Nothing here starts a tool or touches the network.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT_ENV = "SKEWMATRIX_OUT"
CACHE_ENV = "SKEWMATRIX_CACHE"
RUN_ID_ENV = "SKEWMATRIX_RUN_ID"
STRICT_ENV = "SKEWMATRIX_STRICT"


def out_dir() -> Path:
    """Reports and cell results: ``$SKEWMATRIX_OUT``, else ``reports/out`` in the repository."""
    value = os.environ.get(OUT_ENV, "").strip()
    return Path(value).resolve() if value else REPO_ROOT / "reports" / "out"


def scan_cache_dir() -> Path:
    """The scan's persistent cache: ``$SKEWMATRIX_CACHE``, else ``~/.cache/skewmatrix/scan``."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".cache" / "skewmatrix" / "scan"


def run_id() -> str:
    """Identity of this run, shared by the parallel session processes nox spawns
    (they inherit the environment of the process that loaded the noxfile)."""
    value = os.environ.get(RUN_ID_ENV)
    if not value:
        value = os.environ[RUN_ID_ENV] = f"{os.getpid()}"
    return value


def strict(matrix_strict: bool = False) -> bool:
    """Does ``missing`` fail the gate even where its reach is latent? The matrix file's ``[gate] strict``,
    or ``--strict`` / ``SKEWMATRIX_STRICT=1`` for this run."""
    return matrix_strict or os.environ.get(STRICT_ENV, "").strip() in ("1", "true", "yes")
