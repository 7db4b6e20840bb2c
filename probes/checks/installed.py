"""What the kernel checks read from the zoo installed in a cell: one module's source, and a function's identity.

:func:`detect_installed` runs a check's static detector on one module of the
installed ``unsloth_zoo`` (found without importing it); :func:`fingerprint`
names a function by where its code lives and a digest of its bytecode, so a
guard step can tell zoo's own function from a replacement.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any


def detect_installed(rel: tuple[str, ...], analyze_source: Callable[[str, str], dict[str, Any]],
                     missing: str) -> dict[str, Any]:
    """``analyze_source(text, path)`` on ``unsloth_zoo/<rel>``; ``absent`` with ``missing`` when zoo has no such
    file, or when zoo is not installed."""
    spec = importlib.util.find_spec("unsloth_zoo")
    if spec is None or not spec.submodule_search_locations:
        return {"verdict": "absent", "reason": "unsloth_zoo is not installed"}
    for loc in spec.submodule_search_locations:
        path = Path(loc).joinpath(*rel)
        if path.is_file():
            return analyze_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
    return {"verdict": "absent", "reason": missing}


def fingerprint(fn: Any) -> dict[str, Any]:
    """Module, qualified name, file, first line and bytecode digest of ``fn`` (None where it has no code)."""
    code = getattr(fn, "__code__", None)
    return {"module": getattr(fn, "__module__", None), "qualname": getattr(fn, "__qualname__", None),
            "file": getattr(code, "co_filename", None), "line": getattr(code, "co_firstlineno", None),
            "code_sha256": hashlib.sha256(code.co_code).hexdigest() if code is not None else None}
