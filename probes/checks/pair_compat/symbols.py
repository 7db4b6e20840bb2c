"""What a zoo release defines, read with ``ast`` from its source files (nothing is imported).

:func:`symbol_table` turns ``{wheel member: text}`` into one table: per module
(dotted name), the names it binds and why a name it does not bind can still
exist (``unknown``). A module binds everything assigned, defined, classed or
imported at module level, also inside module-level ``if``/``try``/``with``/
``for``/``while`` blocks, every name a function declares ``global``, every
name of a static ``__all__``, and what its star imports bring (resolved
transitively inside the package: the source module's static ``__all__``, else
its public names). A name stays *unknown*, never missing, where the module
answers names we cannot see: a module ``__getattr__``, a dynamic ``__all__``
in a module star-imported from, a star import from outside the package or
from a module we cannot read, ``exec`` or ``globals()`` writes at module
level, a file that does not parse. Submodules are found from the file list.
Stdlib only.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from probes.checks.pair_compat.modules import module_of, parse, resolve_relative, walk
from probes.checks.pair_compat.signatures import (
    DICT_START,
    declared_global,
    dict_writes,
    module_extras,
    written_names,
)

TABLE_VERSION = 2
GLOBAL_STMT = re.compile(r"^[ \t]*global[ \t]", re.M)


def _targets(node: ast.AST) -> list[str]:
    """The plain names an assignment target binds (tuples and starred unpacking included)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    if isinstance(node, ast.Tuple | ast.List):
        return [n for elt in node.elts for n in _targets(elt)]
    return []


def _type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:``: a block that binds nothing at runtime."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _const_strings(node: ast.AST) -> list[str] | None:
    """The strings of a list/tuple of string constants, else None (a dynamic value)."""
    if isinstance(node, ast.List | ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


class _ModuleReader:
    """One module's bindings: names, star imports, static ``__all__`` and reasons for unknown names."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.names: set[str] = set()
        self.stars: list[str] = []  # absolute module names star-imported from
        self.all: list[str] | None = None
        self.all_dynamic = False
        self.unknown: list[str] = []
        self._top = False
        self.extras: dict[str, Any] = {"callables": {}, "origins": {}, "dicts": {}}
        self.writes: dict[str, list[str] | None] = {}  # keys this module's stores add to dicts, by dict name

    def read(self, tree: ast.Module, text: str) -> None:
        self._block(tree.body, top=True)
        if GLOBAL_STMT.search(text):  # the full walk only where a `global` statement can be
            for node in walk(tree):
                if isinstance(node, ast.Global):
                    self.names.update(node.names)
        if "__getattr__" in self.names:
            self.unknown.append(f"{self.module} defines a module __getattr__")

    def _block(self, body: list[ast.stmt], top: bool = False) -> None:
        for stmt in body:
            self._top = top  # a `del` inside a block may not run: only top-level ones unbind
            self._stmt(stmt)

    def _stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                self.names.update(_targets(t))
            self._all_assign(stmt.targets, stmt.value)
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
            self.names.update(_targets(stmt.target))
            if isinstance(stmt, ast.AugAssign) and _targets(stmt.target) == ["__all__"]:
                self._all_extend(stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                self._all_assign([stmt.target], stmt.value)
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                self.names.add(a.asname or a.name.split(".")[0])
        elif isinstance(stmt, ast.ImportFrom):
            self._import_from(stmt)
        elif isinstance(stmt, ast.If) and _type_checking(stmt.test):
            self._block(stmt.orelse)  # the body runs only under a type checker, never at import
        elif isinstance(stmt, ast.If | ast.While):
            self._block(stmt.body)
            self._block(stmt.orelse)
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            self.names.update(_targets(stmt.target))
            self._block(stmt.body)
            self._block(stmt.orelse)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self.names.update(_targets(item.optional_vars))
            self._block(stmt.body)
        elif isinstance(stmt, ast.Try | getattr(ast, "TryStar", ast.Try)):
            self._block(stmt.body)
            for h in stmt.handlers:  # `except E as e` unbinds e when the handler ends
                self._block(h.body)
            self._block(stmt.orelse)
            self._block(stmt.finalbody)
        elif isinstance(stmt, ast.Expr):
            self._expr(stmt.value)
        elif isinstance(stmt, ast.Delete) and self._top:
            # a module-level `del x` unbinds x (zoo's __init__ deletes its helpers: `del os, find_spec`)
            for t in stmt.targets:
                self.names.difference_update(_targets(t))

    def _import_from(self, stmt: ast.ImportFrom) -> None:
        source = resolve_relative(self.module, self.is_package, stmt.module, stmt.level)
        for a in stmt.names:
            if a.name == "*":
                if source is None:
                    self.unknown.append(f"{self.module}: a relative star import above the package")
                else:
                    self.stars.append(source)
            else:
                self.names.add(a.asname or a.name)

    def _all_assign(self, targets: list[ast.expr], value: ast.expr) -> None:
        if not any(_targets(t) == ["__all__"] for t in targets):
            return
        listed = _const_strings(value)
        if listed is None:
            self.all_dynamic = True
        else:
            self.all = listed

    def _all_extend(self, value: ast.expr) -> None:
        listed = _const_strings(value)
        if listed is None:
            self.all_dynamic = True
        else:
            self.all = (self.all or []) + listed

    def _expr(self, value: ast.expr) -> None:
        """Module-level calls that bind names we cannot see, and ``__all__.extend/append``."""
        if not isinstance(value, ast.Call):
            return
        f = value.func
        if isinstance(f, ast.Name) and f.id == "exec" and len(value.args) < 2:
            self.unknown.append(f"{self.module}:{value.lineno}: exec() at module level")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) \
                and f.value.func.id == "globals" and f.attr in ("update", "setdefault", "__setitem__"):
            self.unknown.append(f"{self.module}:{value.lineno}: globals().{f.attr}() at module level")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "__all__":
            if f.attr == "extend" and value.args:
                self._all_extend(value.args[0])
            elif f.attr == "append" and value.args and isinstance(value.args[0], ast.Constant) \
                    and isinstance(value.args[0].value, str):
                self.all = (self.all or []) + [value.args[0].value]
            else:
                self.all_dynamic = True


def _globals_subscript_writes(tree: ast.Module) -> list[int]:
    """Lines of ``globals()[...] = ...`` at module level (names bound by a computed key)."""
    lines = []
    for stmt in tree.body:
        for node in walk(stmt):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                break
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                    and node.value.func.id == "globals":
                lines.append(node.lineno)
    return lines


def read_modules(members: dict[str, str], package: str) -> dict[str, _ModuleReader]:
    """One reader per ``.py`` member of ``package``, keyed by dotted module name."""
    out: dict[str, _ModuleReader] = {}
    dicts = {m for text in members.values() for m in DICT_START.findall(text)}  # every module-level dict, and more
    for member, text in members.items():
        found = module_of(member, package)
        if found is None:
            continue
        module, is_package = found
        reader = _ModuleReader(module, is_package)
        try:
            tree = parse(text)
        except (SyntaxError, ValueError) as exc:
            reader.unknown.append(f"{member}: cannot parse ({getattr(exc, 'msg', exc)})")
        else:
            reader.read(tree, text)
            reader.extras = module_extras(module, is_package, tree, declared_global(text))
            maybe = written_names(text, dicts)
            reader.writes = dict_writes(tree, maybe) if maybe else {}
            if "globals()" in text:
                reader.unknown += [f"{module}:{n}: globals()[...] written at module level"
                                   for n in _globals_subscript_writes(tree)]
        out[module] = reader
    return out


def _exports(readers: dict[str, _ModuleReader], module: str, package: str, resolved: dict[str, Any],
             stack: tuple[str, ...]) -> tuple[set[str], list[str]]:
    """What ``from module import *`` brings, and the reasons some names are unknown."""
    r = readers.get(module)
    if r is None:
        where = "outside the package" if module.split(".", maxsplit=1)[0] != package else "not in this release"
        return set(), [f"star import from {module} ({where})"]
    if r.all is not None and not r.all_dynamic:
        # `from m import *` takes each listed name from m (a submodule is imported); a listed name m does not
        # bind raises AttributeError there, so it is never the importer's (unless m's names are undecidable)
        names, unknown = _resolve(readers, module, package, resolved, stack)
        if unknown:
            return set(r.all), []
        return {n for n in r.all if n in names or f"{module}.{n}" in readers}, []
    if r.all_dynamic:
        return set(), [f"star import from {module}, whose __all__ is dynamic"]
    names, unknown = _resolve(readers, module, package, resolved, stack)
    return {n for n in names if not n.startswith("_")}, unknown


def _resolve(readers: dict[str, _ModuleReader], module: str, package: str, resolved: dict[str, Any],
             stack: tuple[str, ...]) -> tuple[set[str], list[str]]:
    if module in resolved:
        return resolved[module]
    r = readers[module]
    names = set(r.names)  # `__all__` binds nothing: it matters only to `from m import *`
    unknown = list(r.unknown)
    for source in r.stars:
        if source in stack:
            continue  # a star-import cycle: the names already gathered stand
        got, why = _exports(readers, source, package, resolved, (*stack, module))
        names |= got
        unknown += why
    resolved[module] = (names, unknown)
    return names, unknown


def symbol_table(members: dict[str, str], package: str = "unsloth_zoo") -> dict[str, Any]:
    """The release's table: ``{"modules": {dotted: {"names": [...], "unknown": [...], "package": bool,
    "callables": {...}, "origins": {...}, "dicts": {...}}}}`` (JSON-able, sorted; the last three:
    ``signatures.py``)."""
    readers = read_modules(members, package)
    resolved: dict[str, Any] = {}
    modules = {}
    writes: dict[str, list[str] | None] = {}
    for r in readers.values():  # the stores that add keys to a dict, anywhere in the release
        for name, keys in r.writes.items():
            known = keys is not None and not (name in writes and writes[name] is None)
            writes[name] = [*(writes.get(name) or []), *(keys or [])] if known else None
    for module in sorted(readers):
        names, unknown = _resolve(readers, module, package, resolved, ())
        ex = readers[module].extras
        dicts = {d: None if writes.get(d, []) is None else sorted({*keys, *(writes.get(d) or [])})
                 for d, keys in ex["dicts"].items() if d in names}
        modules[module] = {"names": sorted(names), "unknown": sorted(set(unknown)),
                           "package": readers[module].is_package, "callables": ex["callables"],
                           "origins": ex["origins"], "dicts": dicts}
    return {"version": TABLE_VERSION, "package": package, "modules": modules}
