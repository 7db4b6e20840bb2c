"""The zoo side of the scan: which check it reads for, which members of a zoo file, and the static verdict.

The scan covers the registered check whose folder offers a cross-module
static reading of a wheel (``static.analyze_files({relpath: text})``, which
follows re-exports and helpers across modules) and a raw-kernel runtime
detector (``runtime.run``); it names no check itself. It hands the detector
the kernel's package and every zoo module reachable from it by imports.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from matrix.scan.model import AST_LOCK, Extract, Want
from probes import checks


@dataclass(frozen=True)
class ScanTarget:
    """The check the scan reads for, and what its static detector says it reads."""

    name: str  # folder under probes/checks/
    id: str  # as cells and reports spell it
    static: ModuleType
    ce_path: str  # the kernel's module inside a wheel, e.g. "unsloth_zoo/<package>/<module>.py"
    class_name: str  # the kernel class a guard would patch

    @property
    def package(self) -> str:
        return checks.package(self.name)


def _find_target() -> ScanTarget:
    for name in checks.REGISTRY:
        pkg = checks.package(name)
        try:
            static = importlib.import_module(f"{pkg}.static")
        except ImportError:
            continue
        # find_spec, not import: the runtime detector imports torch, which the harness never does.
        if hasattr(static, "analyze_files") and importlib.util.find_spec(f"{pkg}.runtime") is not None:
            return ScanTarget(name, checks.info(name).id, static, static.CE_PATH, static.CLASS_NAME)
    raise RuntimeError("no registered check offers static.analyze_files and runtime.run: the scan has no target")


TARGET = _find_target()
CE_MEMBER = TARGET.ce_path
KERNEL_DIR = CE_MEMBER.rsplit("/", 1)[0] + "/"


def _module_of(path: str) -> tuple[str, bool]:
    """``("unsloth_zoo.a.b", is_package)`` for ``unsloth_zoo/a/b.py`` or ``unsloth_zoo/a/b/__init__.py``."""
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _imports(path: str, text: str) -> set[str]:
    """Dotted ``unsloth_zoo`` modules a module imports, relative imports resolved (and ``from m import name``
    also as ``m.name``, which may be a submodule)."""
    try:
        with AST_LOCK:
            tree = ast.parse(text)
    except SyntaxError:
        return set()
    module, is_pkg = _module_of(path)
    package = module.split(".") if is_pkg else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names if a.name != "*")
    return {m for m in out if m == "unsloth_zoo" or m.startswith("unsloth_zoo.")}


def zoo_closure(names: Iterable[str], read: Callable[[str], str]) -> dict[str, str]:
    """The kernel's package and the zoo modules it reaches by imports (through modules, not through other
    packages' ``__init__``), with their packages' ``__init__`` files: what a detector that follows re-exports
    and helpers across modules may read, without storing most of zoo per release. ``read(name)`` is called
    only for the members kept, so a zip is decompressed member by member as the imports are followed."""
    names = list(names)
    by_module = {_module_of(n)[0]: n for n in names}
    todo = [n for n in names if n.startswith(KERNEL_DIR)]
    kept: dict[str, str] = {}
    parents: set[str] = set()
    while todo:
        path = todo.pop()
        if path in kept:
            continue
        kept[path] = read(path)
        module = _module_of(path)[0].split(".")
        # A package's __init__ runs before its modules: kept, but its own imports are not followed (the root
        # package imports most of zoo, none of which a re-export or helper of the kernel needs).
        parents.update(by_module[p] for p in (".".join(module[:i]) for i in range(1, len(module))) if p in by_module)
        if path.endswith("/__init__.py") and not path.startswith(KERNEL_DIR):
            continue  # a package outside the kernel's: its re-exports fan out to most of zoo; not followed
        todo += [by_module[d] for d in _imports(path, kept[path]) if d in by_module]
    for path in parents - set(kept):
        kept[path] = read(path)
    return {n: kept[n] for n in sorted(kept)}


def zoo_want() -> Want:
    return Want(name=lambda n: n.startswith("unsloth_zoo/") and n.endswith(".py"), closure=zoo_closure)


def classify_zoo(ex: Extract) -> dict[str, Any]:
    """Verdict of one zoo file's extract: ``verdict``, ``reason``, ``evidence_line``."""
    if CE_MEMBER not in ex.members:
        return {"verdict": "absent", "reason": f"no {CE_MEMBER} in {ex.filename}", "evidence_line": None}
    v = TARGET.static.analyze_files({n: t for n, t in ex.members.items() if n.startswith("unsloth_zoo/")})
    return {"verdict": v.verdict, "reason": v.reason, "evidence_line": getattr(v, "evidence_line", None)}


def detector_files() -> list[str]:
    """Source files whose change invalidates cached zoo analyses (the check's static detector and this module)."""
    folder = Path(TARGET.static.__file__).parent
    return [*sorted(str(p) for p in folder.glob("*.py")), __file__]


def check_id() -> str:
    """The scanned check's id as cells and reports spell it."""
    return TARGET.id
