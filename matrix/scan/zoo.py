"""The zoo side of the scan: which members of a zoo file to read, and the static verdict on them.

The static detector is the check's own (``probes.checks.fused_ce_masked_nan.static``).
When it offers ``analyze_files({relpath: text})`` (following re-exports and
helpers across the wheel's modules), the scan hands it the fused-loss package
and the top-level zoo modules it imports; otherwise ``analyze_source`` on the
cross-entropy module alone.
"""

from __future__ import annotations

import ast
from typing import Any

from matrix.scan.model import Extract, Want

CE_MEMBER = "unsloth_zoo/fused_losses/cross_entropy_loss.py"
FUSED_DIR = "unsloth_zoo/fused_losses/"


def _static() -> Any:
    from probes.checks.fused_ce_masked_nan import static

    return static


def _top_level_py(name: str) -> bool:
    return name.startswith("unsloth_zoo/") and name.count("/") == 1 and name.endswith(".py")


def _imported_zoo_modules(text: str) -> set[str]:
    """Top-level ``unsloth_zoo`` modules a fused-loss module imports (absolute or relative)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.startswith("unsloth_zoo."):
                out.add(node.module.split(".")[1])
            elif node.level == 0 and node.module == "unsloth_zoo":
                out.update(a.name for a in node.names)
            elif node.level == 2:  # from ..x import y, inside unsloth_zoo/fused_losses/
                out.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("unsloth_zoo."))
    return out


def prune_zoo(members: dict[str, str]) -> dict[str, str]:
    """Keep the fused-loss package and the top-level modules it imports (what a cross-module detector needs)."""
    fused = {n: t for n, t in members.items() if n.startswith(FUSED_DIR)}
    wanted = {f"unsloth_zoo/{m}.py" for t in fused.values() for m in _imported_zoo_modules(t)}
    wanted.add("unsloth_zoo/__init__.py")
    return {**fused, **{n: t for n, t in members.items() if n in wanted}}


def zoo_want() -> Want:
    return Want(name=lambda n: n.endswith(".py") and (n.startswith(FUSED_DIR) or _top_level_py(n)),
                prune=prune_zoo)


def classify_zoo(ex: Extract) -> dict[str, Any]:
    """Verdict of one zoo file's extract: ``verdict``, ``reason``, ``evidence_line``."""
    text = ex.members.get(CE_MEMBER)
    if text is None:
        return {"verdict": "absent", "reason": f"no {CE_MEMBER} in {ex.filename}", "evidence_line": None}
    static = _static()
    analyze_files = getattr(static, "analyze_files", None)
    if analyze_files is not None:
        v = analyze_files({n: t for n, t in ex.members.items() if n.startswith("unsloth_zoo/")})
    else:
        v = static.analyze_source(text, CE_MEMBER)
    return {"verdict": v.verdict, "reason": v.reason, "evidence_line": getattr(v, "evidence_line", None)}


def detector_files() -> list[str]:
    """Source files whose change invalidates cached zoo analyses (the check's static detector and this module)."""
    from pathlib import Path

    folder = Path(_static().__file__).parent
    return [*sorted(str(p) for p in folder.glob("*.py")), __file__]
