"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's fused CE forward, read from a wheel.

The static detector (``static/``) follows re-exports and helpers across
modules, so the scan hands it the kernel's package and every zoo module it
reaches by imports; ``runtime.run`` backs ``--confirm``; an unsloth release
carries a guard when it ships our guard module wired into
``unsloth/__init__.py``, or replaces the class's ``forward`` some other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.checks.capabilities import GuardScan, ScanTarget

from . import GUARD_MODULE, static


def detect(files: Mapping[str, str]) -> dict[str, Any]:
    """See ``ScanTarget.detect``: ``static.analyze_files`` on the wheel's zoo modules."""
    v = static.analyze_files(files)
    return {"verdict": v.verdict, "reason": v.reason, "evidence_line": v.evidence_line}


TARGET = ScanTarget(
    package="unsloth_zoo",
    file=static.CE_PATH,
    function=f"{static.CLASS_NAME}.forward",
    detect=detect,
    detector=static,
    follow_imports=True,
    runtime=__name__.rsplit(".", 1)[0] + ".runtime:run",
    guard=GuardScan(module=GUARD_MODULE, owner=static.CLASS_NAME, attribute="forward"),
)
