"""Turn ``nox --list --json`` into a GitHub Actions ``strategy.matrix``.

``nox --list --json | python -m matrix ci-matrix`` prints ``matrix=<json>``
for ``$GITHUB_OUTPUT``: one entry per cell session, with the session name
to run and the cell id (used to name its artifact). GitHub allows at most
256 jobs per matrix; a larger matrix is refused with a pointer to
``SKEWMATRIX_SHARD``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from matrix.errors import SkewmatrixError

GITHUB_MAX_JOBS = 256
CELL_SESSION = re.compile(r"^cell\((?P<id>[A-Za-z0-9._-]+)\)$")


class CiMatrixError(SkewmatrixError):
    """The session list cannot become a job matrix."""


def job_matrix(sessions: list[dict[str, Any]]) -> dict[str, list[dict[str, str]]]:
    include = []
    for s in sessions:
        name = s.get("session") or s.get("name") or ""
        m = CELL_SESSION.match(name)
        if m:
            include.append({"session": name, "cell": m.group("id")})
    if not include:
        raise CiMatrixError("nox --list --json listed no cell(...) sessions; is SKEWMATRIX_MATRIX right?")
    if len(include) > GITHUB_MAX_JOBS:
        raise CiMatrixError(f"{len(include)} cells exceed GitHub's {GITHUB_MAX_JOBS} jobs per matrix; "
                            "run several cells per job with SKEWMATRIX_SHARD=K/N")
    return {"include": include}


def from_text(text: str) -> str:
    try:
        sessions = json.loads(text)
    except ValueError as exc:
        raise CiMatrixError(f"nox --list --json output is not JSON: {exc}") from exc
    if not isinstance(sessions, list):
        raise CiMatrixError("nox --list --json output is not a list of sessions")
    return "matrix=" + json.dumps(job_matrix(sessions), separators=(",", ":"))
