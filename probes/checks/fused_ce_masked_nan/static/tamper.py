"""Replacement after definition: code that may put another forward on the class than the one the reading judged.

The reading judges the ``forward`` a class body defines (or a module-level ``UnslothFusedLoss.forward = f`` in
the class's module, which ``forward.py`` follows). Anything else that can swap it is not followed, so the
verdict abstains when it is present: ``setattr`` (also ``__setattr__``) on the class or with the name
``forward`` (or a computed name), a ``.forward`` store anywhere but the module level of the class's module,
``global UnslothFusedLoss`` in a function, a class decorator, a metaclass or other class keyword, an
``__init_subclass__`` in a base, a base from another distribution, a forward decorator outside the known
library wrappers, ``exec`` / ``eval`` in the class's module, a store into a module of the distribution
(``_ce._floor = f``) or through ``sys.modules`` / ``globals()``. Each is found syntactically in every module the
reading loaded and every module the class's module imports, so aliases of the class inside those modules are
covered by the broad rules (a computed attribute name, any ``.forward`` store outside the module level).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .syntax import LIBRARIES, is_class_ref
from .values import CLASS_NAME, ClassInfo, Func, ModuleCtx, kind

# Decorators of the forward that return the function they are given (torch's and functools' wrappers).
SAFE_DECORATORS = {"staticmethod", "classmethod", "compile", "disable", "no_grad", "enable_grad", "inference_mode",
                   "custom_fwd", "once_differentiable", "cache", "lru_cache", "wraps"}
# Bases whose class machinery is known not to touch a subclass's forward.
SAFE_BASE_ROOTS = ("torch", "builtins", "typing", "abc")
REFLECTIVE = {"exec", "eval"}


_NODES: dict[int, tuple[ast.Module, list[ast.AST]]] = {}


def _nodes(mod: ModuleCtx) -> list[ast.AST]:
    """Every node of the module, walked once (the scan reads a hundred modules per release)."""
    hit = _NODES.get(id(mod))
    if hit is None or hit[0] is not mod.tree:
        hit = (mod.tree, list(ast.walk(mod.tree)))
        if len(_NODES) > 512:
            _NODES.clear()
        _NODES[id(mod)] = hit
    return hit[1]


def _top_level(mod: ModuleCtx) -> set[int]:
    """Ids of the module-level ``C.forward = ...`` statements ``forward.py`` applies (module body and its ifs)."""
    out: set[int] = set()

    def walk(stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.Assign):
                out.add(id(s))
            elif isinstance(s, ast.If):
                walk(s.body)
                walk(s.orelse)

    walk(mod.tree.body)
    return out


def _stores(nodes: list[ast.AST]) -> Iterable[tuple[ast.AST, ast.Attribute]]:
    """``(statement, target)`` for every attribute store or delete among ``nodes``."""
    for s in nodes:
        targets: list[ast.AST] = []
        if isinstance(s, ast.Assign):
            targets = list(s.targets)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            targets = [s.target]
        elif isinstance(s, ast.Delete):
            targets = list(s.targets)
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    yield s, n


def _rebinds_module(node: ast.AST) -> bool:
    """A store through ``sys.modules[...]`` or ``globals()``: a module's names rebound behind the reading."""
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "modules":
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "vars"):
            return True
    return False


def _module_aliases(mod: ModuleCtx, top: str) -> set[str]:
    """Names an import binds to a module of the distribution (``import unsloth_zoo.x as m``, ``from . import m``)."""
    out: set[str] = set()
    for n in _nodes(mod):
        if isinstance(n, ast.Import):
            out |= {a.asname or a.name.split(".")[0] for a in n.names if a.name.split(".")[0] == top}
        elif isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").split(".")[0] == top):
            out |= {a.asname or a.name for a in n.names if a.name != "*"}  # may be modules: count them
    return out


def _module_tampering(mod: ModuleCtx, home: bool, methods: set[str], top: str) -> str | None:
    """``home``: the class's own module, where aliases of the class are most likely and the rules are broad.
    ``methods``: the class's own function attributes (a helper the forward calls as ``UnslothFusedLoss._f``)."""
    applied = _top_level(mod) if home else set()
    modules = _module_aliases(mod, top)
    nodes = _nodes(mod)
    for s, t in _stores(nodes):
        if _rebinds_module(t.value):
            return f"line {s.lineno} of {mod.name} stores `{ast.unparse(t)}` through the module table"
        root = t.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in modules and not is_class_ref(t.value):
            return f"line {s.lineno} of {mod.name} rebinds `{ast.unparse(t)}` in a module of the distribution"
        if is_class_ref(t.value) and t.attr in methods | {"apply"} and not (t.attr == "forward" and id(s) in applied):
            return f"line {s.lineno} of {mod.name} replaces `{ast.unparse(t)}`"
        if t.attr != "forward" or (id(s) in applied and is_class_ref(t.value)):
            continue
        if is_class_ref(t.value) or (home and not (isinstance(t.value, ast.Name) and t.value.id in ("self", "ctx"))):
            return f"line {s.lineno} of {mod.name} stores `{ast.unparse(t)}`"
    for s in nodes if home else ():
        targets = s.targets if isinstance(s, ast.Assign) else []
        if any(isinstance(t, ast.Subscript) and _rebinds_module(t) for t in targets):
            return f"line {s.lineno} of {mod.name} rebinds a module name through `{ast.unparse(targets[0])}`"
    for n in nodes:
        if isinstance(n, (ast.Global, ast.Nonlocal)) and CLASS_NAME in n.names:
            return f"line {n.lineno} of {mod.name} rebinds {CLASS_NAME} through `{type(n).__name__.lower()}`"
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)
        if home and name in REFLECTIVE:
            return f"line {n.lineno} of {mod.name} runs {name}(), which may redefine anything"
        if name in ("setattr", "__setattr__") and len(n.args) >= 2:
            obj, attr = (n.args[1], n.args[2]) if name == "__setattr__" and len(n.args) >= 3 else n.args[:2]
            computed = not (isinstance(attr, ast.Constant) and isinstance(attr.value, str))
            if (isinstance(attr, ast.Constant) and attr.value == "forward") or is_class_ref(obj) or \
                    _rebinds_module(obj) or (computed and home):
                return f"line {n.lineno} of {mod.name} calls {ast.unparse(n)[:60]}"
    return None


def _class_tampering(an: object, cls: ClassInfo, seen: set[int]) -> str | None:
    if id(cls.node) in seen:
        return None
    seen.add(id(cls.node))
    node = cls.node
    if node.decorator_list:
        return f"{node.name} is decorated with @{ast.unparse(node.decorator_list[0])}, which may replace its forward"
    if node.keywords:
        return f"{node.name} is created with {ast.unparse(node.keywords[0])}, which may rewrite its body"
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init_subclass__"
           for s in node.body) and node.name != CLASS_NAME:
        return f"base class {node.name} defines __init_subclass__, which may replace a subclass's forward"
    for base in node.bases:
        for e in an.ev_global(cls.mod, base):  # type: ignore[attr-defined]
            if isinstance(e, ClassInfo):
                inner = _class_tampering(an, e, seen)
                if inner:
                    return inner
            elif kind(e) == "X" and e[1].split(".")[0] in SAFE_BASE_ROOTS:
                continue
            else:
                return f"{node.name} derives from {ast.unparse(base)}, whose class machinery cannot be read"
    return None


def forward_decorator(an: object, fwd: Func) -> str | None:
    """A decorator of the forward that may return another function (anything but a known library wrapper)."""
    node = fwd.node
    for dec in getattr(node, "decorator_list", []):
        target = dec.func if isinstance(dec, ast.Call) else dec
        val = an.ev_global(fwd.mod, target)  # type: ignore[attr-defined]
        name = ast.unparse(target).rsplit(".", 1)[-1]
        if not val or name not in SAFE_DECORATORS or not all(
                kind(e) == "X" and e[1].split(".")[0] in LIBRARIES for e in val):
            unresolved = sorted(e[1] for e in val if kind(e) == "R")
            return f"@{ast.unparse(target)}" + (f" ({unresolved[0]})" if unresolved else "")
    return None


def _load_imported(an: object, start: list[ModuleCtx], depth: int = 1) -> None:
    """Load the modules of the distribution that importing ``start`` runs, ``depth`` imports deep: their top-level
    code runs on import and may rebind what the reading judged. One import deep: the next level is zoo's wide
    patching code (a hundred modules, 10 MB in 2026.10.9), a second per release in the scan; a rebinding there
    is not seen (a limit, stated in ``static/__init__.py``)."""
    todo, seen = [(m, 0) for m in start], {id(m) for m in start}
    while todo:
        mod, level = todo.pop()
        if level >= depth:
            continue
        for n in _nodes(mod):
            names: list[str] = []
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = an.resolve_from(mod, n.level, n.module)  # type: ignore[attr-defined]
                names = [base, *(f"{base}.{a.name}" for a in n.names if a.name != "*")]
            for dotted in names:
                if not an.same_dist(dotted):  # type: ignore[attr-defined]
                    continue
                parts = dotted.split(".")
                for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
                    m = an.load(".".join(parts[:i]))  # type: ignore[attr-defined]
                    if m is not None and id(m) not in seen:
                        seen.add(id(m))
                        todo.append((m, level + 1))


def tampering(an: object, classes: Iterable[ClassInfo]) -> str | None:
    """Why the judged forward may not be the one that runs, or None."""
    classes = list(classes)
    for cls in classes:
        why = _class_tampering(an, cls, set())
        if why:
            return why
    homes = {id(c.mod) for c in classes} | {id(an.entry)}  # type: ignore[attr-defined]
    _load_imported(an, [c.mod for c in classes] + [an.entry])  # type: ignore[attr-defined]
    methods = {s.name for c in classes for s in c.node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for mod in [m for m in list(an.modules.values()) if m is not None]:  # type: ignore[attr-defined]
        why = _module_tampering(mod, id(mod) in homes, methods, an.top)  # type: ignore[attr-defined]
        if why:
            return why
    return None
