"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's GRPO loss, read from a wheel.

The static detector (``static.py``) reads the one module, so the scan reads
only ``unsloth_zoo/rl_replacements.py`` of each release (``absent`` where
there is none, or where ``grpo_compute_loss`` never divides by the count);
``runtime.run`` backs ``--confirm``. The unsloth side is ``n/a``: our guard
is a floor inside unsloth's generated trainer source, not a replaced
attribute the scan's heuristic could recognise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.checks.capabilities import ScanTarget

from . import static

FILE = "unsloth_zoo/" + "/".join(static.REL)


def detect(files: Mapping[str, str]) -> dict[str, Any]:
    """See ``ScanTarget.detect``: ``static.analyze_source`` on the release's ``rl_replacements.py``."""
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
    runtime=__name__.rsplit(".", 1)[0] + ".runtime:run",
)
