"""Gate decisions: exit codes for release gating and plain-words recommendations.

Exit codes of ``nox -s gate`` and ``nox -s pinned`` (documented in the README):
  0  every cell passes (activates, no-ops, not-needed)
  1  some cell is ``missing`` or ``broken``: the exposure is real
  2  some cell is ``error`` (or the harness failed): no verdict could be reached
An ``error`` outranks a finding: a gate that could not look must not pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EXIT_PASS, EXIT_EXPOSED, EXIT_ERROR = 0, 1, 2


def exit_code(report: dict[str, Any]) -> int:
    states = {c["classification"]["guard"] for c in report["cells"]}
    if "error" in states:
        return EXIT_ERROR
    if {"missing", "broken"} & states:
        return EXIT_EXPOSED
    return EXIT_PASS


def first_fixed_zoo(out_dir: Path) -> str | None:
    """The first fixed zoo release according to a scan in ``out_dir`` (``scan.json``), if any."""
    path = out_dir / "scan.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    timeline = data.get("timeline") if isinstance(data, dict) else None
    value = timeline.get("first_fixed") if isinstance(timeline, dict) else None
    return value if isinstance(value, str) else None


def recommendation(cell: dict[str, Any], first_fixed: str | None) -> str:
    """One paragraph a maintainer can act on, for one classified cell."""
    c = cell["classification"]
    zoo_v = cell["builds"]["zoo"].get("installed_version") or cell["builds"]["zoo"].get("version")
    uns_v = cell["builds"]["unsloth"].get("installed_version") or cell["builds"]["unsloth"].get("version")
    fixed = (f"unsloth_zoo>={first_fixed} (the first release that carries the fix, per the scan)"
             if first_fixed else "a zoo release that carries the fix (`nox -s scan` lists them)")
    guard = c["guard"]
    if guard == "missing":
        return (f"EXPOSED: unsloth_zoo {zoo_v} turns an all-masked microbatch into a NaN loss and unsloth {uns_v} "
                f"does not guard it. Either upgrade to {fixed}, or install an unsloth build carrying the guard "
                "(the `unsloth-guard` backport in matrix/backports/).")
    if guard == "broken":
        return (f"EXPOSED: a guard is present but misbehaves ({c['guard_reason']}). Remove that unsloth build "
                f"or upgrade to {fixed}, where no guard is needed.")
    if guard == "error":
        return (f"NO VERDICT: the environment could not be probed ({c['guard_reason']}). Fix the cause and rerun; "
                "until then treat it as exposed.")
    if guard == "activates":
        return (f"Protected: unsloth_zoo {zoo_v} is vulnerable, but the guard in unsloth {uns_v} activates and "
                f"passes the behaviour suite. Upgrading to {fixed} would remove the need for it.")
    if guard == "no-ops":
        return f"Safe: unsloth_zoo {zoo_v} carries the fix; the guard in unsloth {uns_v} correctly stays idle."
    return f"Safe: unsloth_zoo {zoo_v} carries the fix (or has no fused cross-entropy); no guard is needed."
