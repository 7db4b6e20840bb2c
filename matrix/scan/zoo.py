"""The zoo side of the scan: which check it reads for, which members of a zoo file, and the static verdict.

The scan reads for one registered check that declares a scan target
(``scan.py`` in its folder, see ``probes/checks``): the one named with
``--check``, else the first in registry order. It names no check itself.
The target's static detector gets the kernel's file alone, or (with
``follow_imports``) the kernel's package and every zoo module reachable from
it by imports.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.scan.terms import AST_LOCK, Extract, ScanError, Want
from probes import checks
from probes.checks import ScanTarget


@dataclass(frozen=True)
class Scanned:
    """The check the scan reads for: its folder, its id and its scan target."""

    name: str  # folder under probes/checks/
    id: str  # as cells, reports and --check spell it
    target: ScanTarget


def scanned(check: str = "") -> Scanned:
    """The check with id ``check``, or (empty) the first registered check that declares a scan target."""
    try:
        name = checks.pick("scan", check)
    except checks.PickError as exc:
        raise ScanError(f"{exc}: nothing to scan" if not check else str(exc)) from None
    return Scanned(name, checks.info(name).id, checks.capability(name, "scan"))


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


def zoo_closure(names: Iterable[str], read: Callable[[str], str], kernel_dir: str) -> dict[str, str]:
    """The kernel's package and the zoo modules it reaches by imports (through modules, not through other
    packages' ``__init__``), with their packages' ``__init__`` files: what a detector that follows re-exports
    and helpers across modules may read, without storing most of zoo per release. ``read(name)`` is called
    only for the members kept, so a zip is decompressed member by member as the imports are followed."""
    names = list(names)
    by_module = {_module_of(n)[0]: n for n in names}
    todo = [n for n in names if n.startswith(kernel_dir)]
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
        if path.endswith("/__init__.py") and not path.startswith(kernel_dir):
            continue  # a package outside the kernel's: its re-exports fan out to most of zoo; not followed
        todo += [by_module[d] for d in _imports(path, kept[path]) if d in by_module]
    for path in parents - set(kept):
        kept[path] = read(path)
    return {n: kept[n] for n in sorted(kept)}


def zoo_want(s: Scanned) -> Want:
    """The members of a zoo file the target's detector reads (see the module docstring)."""
    t = s.target
    if not t.follow_imports:
        return Want(name=lambda n: n == t.file, key=s.id)
    return Want(name=lambda n: n.startswith(f"{t.package}/") and n.endswith(".py"),
                closure=lambda names, read: zoo_closure(names, read, t.folder), key=s.id)


def classify_zoo(ex: Extract, s: Scanned) -> dict[str, Any]:
    """Verdict of one zoo file's extract: ``verdict``, ``reason``, ``evidence_line``."""
    t = s.target
    if t.file not in ex.members:
        return {"verdict": "absent", "reason": f"no {t.file} in {ex.filename}", "evidence_line": None}
    v = t.detect({n: text for n, text in ex.members.items() if n.startswith(f"{t.package}/")})
    return {"verdict": v["verdict"], "reason": v["reason"], "evidence_line": v.get("evidence_line")}


def detector_files(s: Scanned) -> list[str]:
    """Source files whose change invalidates cached zoo analyses: the target's static detector (its package's
    modules, or its module's folder), the module that declares the target, and this module."""
    folder = Path(s.target.detector.__file__ or "").parent
    declared = sys.modules[s.target.detect.__module__].__file__ or ""
    return [*sorted(str(p) for p in folder.glob("*.py")), declared, __file__]
