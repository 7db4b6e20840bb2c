"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's CPU-backend chunked CE, from a wheel.

The static detector (``static.py``) reads the one module, so the scan reads
only ``unsloth_zoo/cpu/ops.py`` of each release (``absent`` where there is
none: the releases before zoo's CPU backend). No guard for this kernel
exists, so the unsloth side of the scan is ``n/a``; ``--confirm`` is ``n/a``
too (the runtime detector runs inside a cell's raw probe process only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.checks.capabilities import ScanTarget

from . import static

FILE = "unsloth_zoo/" + "/".join(static.REL)


def detect(files: Mapping[str, str]) -> dict[str, Any]:
    """See ``ScanTarget.detect``: ``static.analyze_source`` on the release's ``cpu/ops.py``."""
    if FILE not in files:
        return {"verdict": "absent", "reason": f"no {FILE}", "evidence_line": None}
    r = static.analyze_source(files[FILE], FILE)
    return {"verdict": r["verdict"], "reason": r["reason"], "evidence_line": r.get("line")}


TARGET = ScanTarget(
    package="unsloth_zoo",
    file=FILE,
    function=static.FUNCTION,
    detect=detect,
    detector=static,
    follow_imports=False,
)
