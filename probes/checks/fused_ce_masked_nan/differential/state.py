"""Process state a guard could touch: ``os.environ`` and zoo's kernel module globals, comparable across processes.

A global is described, not identified: ``id()`` means nothing in another
process, and a ``repr`` may carry addresses or hash-ordered sets. So simple
values are their ``repr``, containers are described element by element
(sets sorted), functions by module, qualified name, file, first line and a
digest of their bytecode, classes and modules by name, anything else by its
type. The kernel class's own attributes (other than ``forward``, which a
guard is there to replace) count as globals too, under ``Class.attr``.
Stdlib only, plus zoo's modules once imported.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any

GLOBAL_MODULES = ("unsloth_zoo.fused_losses.cross_entropy_loss", "unsloth_zoo.loss_utils")
CLASS_NAME = "UnslothFusedLoss"
# Set differently for each phase by the harness itself (probes/phases.py): never a guard's doing.
PHASE_KEYS = frozenset({"UNSLOTH_IS_PRESENT", "UNSLOTH_ALLOW_CPU"})
_SIMPLE = (type(None), bool, int, float, complex, str, bytes)


def describe(value: Any, depth: int = 0) -> str:
    """A description of ``value`` that two processes agree on when the value is the same."""
    if isinstance(value, _SIMPLE):
        return repr(value)[:200]
    if depth > 2:
        return f"<{type(value).__name__}>"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}{{{', '.join(sorted(describe(v, depth + 1) for v in value)[:40])}}}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{', '.join(describe(v, depth + 1) for v in value[:40])}]"
    if isinstance(value, dict):
        items = sorted((describe(k, depth + 1), describe(v, depth + 1)) for k, v in list(value.items())[:60])
        return "dict{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, (staticmethod, classmethod)):
        return f"{type(value).__name__}({describe(value.__func__, depth + 1)})"
    inner = getattr(value, "__wrapped__", None)
    code = getattr(value, "__code__", None)
    if code is None and inner is not None and callable(value):
        return f"{type(value).__name__}({describe(inner, depth + 1)})"
    if code is not None:
        where = f"{Path(code.co_filename).name}:{code.co_firstlineno}"
        return (f"function {getattr(value, '__module__', None)}.{getattr(value, '__qualname__', None)} {where} "
                f"{hashlib.sha256(code.co_code).hexdigest()[:12]}")
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}"
    tp = type(value)
    if tp.__module__ == "torch" and tp.__name__ in ("dtype", "device"):
        return repr(value)
    return f"<{tp.__module__}.{tp.__qualname__}>"


def globals_snapshot() -> dict[str, str]:
    """``module:name`` -> description, for zoo's kernel modules and the kernel class's attributes."""
    out: dict[str, str] = {}
    for name in GLOBAL_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        short = name.rsplit(".", 1)[-1]
        for attr, value in list(vars(module).items()):
            if attr.startswith("__") and attr.endswith("__"):
                continue
            out[f"{short}:{attr}"] = describe(value)
    cls = getattr(sys.modules.get(GLOBAL_MODULES[0]), CLASS_NAME, None)
    if isinstance(cls, type):
        for attr, value in list(vars(cls).items()):
            if attr == "forward" or (attr.startswith("__") and attr.endswith("__")) or attr.startswith("_abc"):
                continue
            out[f"{CLASS_NAME}.{attr}"] = describe(value)
    return out


def env_snapshot() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in PHASE_KEYS}


def _env_reads(tree: ast.AST) -> set[str]:
    """String keys read from the environment: ``os.environ.get("K")``, ``os.getenv("K")``,
    ``os.environ["K"]`` (load), ``"K" in os.environ``."""
    def is_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ")

    keys: set[str] = set()
    for node in ast.walk(tree):
        first = None
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "get" and is_environ(f.value)) or (
                    isinstance(f, (ast.Attribute, ast.Name)) and getattr(f, "attr", getattr(f, "id", "")) == "getenv"):
                first = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
            first = node.slice
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1 and is_environ(node.comparators[0]):
            first = node.left
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            keys.add(first.value)
    return keys


def kernel_env_keys() -> set[str]:
    """The environment keys zoo's kernel modules read (from their installed source)."""
    keys: set[str] = set()
    for name in GLOBAL_MODULES:
        path = getattr(sys.modules.get(name), "__file__", None)
        if path and Path(path).is_file():
            keys |= _env_reads(ast.parse(Path(path).read_text(encoding="utf-8", errors="replace")))
    return keys


def guard_files(protocol_module: str | None) -> list[str]:
    """Source files of whatever replaced the forward, and of the guard protocol module if imported."""
    files = []
    cls = getattr(sys.modules.get(GLOBAL_MODULES[0]), CLASS_NAME, None)
    entry = getattr(cls, "__dict__", {}).get("forward")
    fn = getattr(entry, "__func__", entry)
    zoo_file = getattr(sys.modules.get(GLOBAL_MODULES[0]), "__file__", None)
    try:
        src = inspect.getsourcefile(fn) if fn is not None else None
    except TypeError:
        src = None
    if src and (zoo_file is None or os.path.realpath(src) != os.path.realpath(zoo_file)):
        files.append(src)
    module = sys.modules.get(protocol_module or "")
    path = getattr(module, "__file__", None)
    if path and path not in files:
        files.append(path)
    return [f for f in files if Path(f).is_file()]


def named_keys(files: list[str]) -> set[str]:
    """Upper-case string literals in the guard's source: the environment keys it could set."""
    keys: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if 3 <= len(text) <= 80 and text.replace("_", "").isalnum() and text.upper() == text \
                        and text[0].isalpha():
                    keys.add(text)
    return keys


def diff(a: dict[str, str], b: dict[str, str],
         keys: set[str] | None = None) -> dict[str, tuple[str | None, str | None]]:
    """name -> (value in a, value in b) where they differ (only ``keys`` if given)."""
    names = (set(a) | set(b)) if keys is None else keys
    return {k: (a.get(k), b.get(k)) for k in sorted(names) if a.get(k) != b.get(k)}
