"""unsloth's model-loading route: the functions ``from_pretrained`` and ``get_peft_model`` run, read with ``ast``.

A break in one of these functions means the pair imports but cannot load a model (``breaks: model-load``). The
roots are every method named ``from_pretrained`` or ``get_peft_model`` of an unsloth model class (``Fast...``:
``FastModel``, ``FastLlamaModel``, ...: the loader dispatches to the family's class, and each family's method
is a root of its own; ``SyntheticDataKit.from_pretrained`` loads a vLLM engine for data preparation, no root)
in a module ``import unsloth`` always runs. From a function, the route follows the calls it makes that
resolve inside unsloth, statically:

* ``f(...)`` -- a function nested in it, one of its module, or one imported from an unsloth module;
* ``C(...)`` -- an unsloth class's ``__init__``;
* ``C.m(...)``, ``self.m(...)``, ``cls.m(...)``, ``super().m(...)`` -- the method found on the class or, in
  order, its unsloth bases; ``x.m(...)`` where ``x`` is assigned an unsloth class in the function
  (``dispatch_model = FastLlamaModel``): each such class;
* ``mod.f(...)`` on an unsloth module imported by name.

A call inside a ``try`` whose handlers catch everything (``except Exception``, bare ``except``) is not
followed: a break below it is caught there. Anything else (a call through a variable, a callback) is not
followed: the route is what the source says for sure. Stdlib only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from probes.checks.pair_compat.modules import children, resolve_relative

ROOTS = ("from_pretrained", "get_peft_model")
LOADER_PREFIX = "Fast"  # unsloth's model classes; `SyntheticDataKit.from_pretrained` (data prep) is no root
CATCH_ALL = frozenset({"Exception", "BaseException"})
FunctionId = tuple[str, str]  # (module, qualified name: "FastModel.from_pretrained", "helper")


def _catches_all(t: ast.Try) -> bool:
    return any(h.type is None or (isinstance(h.type, ast.Name) and h.type.id in CATCH_ALL)
               or (isinstance(h.type, ast.Tuple) and any(isinstance(e, ast.Name) and e.id in CATCH_ALL
                                                         for e in h.type.elts))
               for h in t.handlers)


@dataclass
class _Module:
    name: str
    is_package: bool
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)  # qualname ->
    classes: dict[str, list[str]] = field(default_factory=dict)  # qualname -> base names as spelled
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (unsloth module, name)
    modules: dict[str, str] = field(default_factory=dict)  # name -> unsloth module it is bound to


class Route:
    """The model-loading route of one unsloth release (see the module docstring)."""

    def __init__(self, trees: dict[str, tuple[ast.Module, bool]], root: str = "unsloth",
                 loaded: set[str] | None = None) -> None:
        """``loaded``: the modules whose classes can be roots (those ``import unsloth`` always runs; a module
        loaded on one platform only, such as MLX's ``decision_mlx.py``, is no user's default route)."""
        self.root = root
        self.loaded = set(trees) if loaded is None else loaded
        self.mods: dict[str, _Module] = {}
        self.class_index: dict[str, list[tuple[str, str]]] = {}
        for name, (tree, is_package) in trees.items():
            m = self.mods[name] = _Module(name, is_package)
            self._collect(m, tree.body, "")
        self.functions = self._reach()

    def _collect(self, m: _Module, body: list[ast.stmt], prefix: str) -> None:
        for s in body:
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
                m.functions[prefix + s.name] = s
                self._collect(m, s.body, prefix + s.name + ".")
            elif isinstance(s, ast.ClassDef):
                m.classes[prefix + s.name] = [ast.unparse(b) for b in s.bases]
                self.class_index.setdefault(s.name, []).append((m.name, prefix + s.name))
                self._collect(m, s.body, prefix + s.name + ".")
            elif isinstance(s, ast.ImportFrom) and not prefix:
                source = resolve_relative(m.name, m.is_package, s.module, s.level)
                for a in s.names:
                    if source and source.split(".")[0] == self.root and a.name != "*":
                        m.imported[a.asname or a.name] = (source, a.name)
                        m.modules[a.asname or a.name] = f"{source}.{a.name}"
            elif isinstance(s, ast.Import) and not prefix:
                for a in s.names:
                    if a.name.split(".")[0] == self.root and a.asname:
                        m.modules[a.asname] = a.name
            elif isinstance(s, ast.If | ast.Try | ast.With):
                for part in ("body", "orelse", "finalbody"):
                    self._collect(m, getattr(s, part, []), prefix)
                for h in getattr(s, "handlers", []):
                    self._collect(m, h.body, prefix)

    # -- resolving names --------------------------------------------------------------------------------------

    def _class(self, module: str, name: str, depth: int = 0) -> FunctionId | None:
        """The unsloth class a name in ``module`` is bound to."""
        m = self.mods.get(module)
        if m is None or depth > 5:
            return None
        if name in m.classes:
            return module, name
        if name in m.imported:
            src, orig = m.imported[name]
            return self._class(src, orig, depth + 1) or self._unique_class(orig)
        return None

    def _unique_class(self, name: str) -> FunctionId | None:
        found = self.class_index.get(name, [])
        return found[0] if len(found) == 1 else None

    def _function(self, module: str, name: str, depth: int = 0) -> FunctionId | None:
        m = self.mods.get(module)
        if m is None or depth > 5:
            return None
        if name in m.functions:
            return module, name
        if name in m.classes:
            return (module, f"{name}.__init__") if f"{name}.__init__" in m.functions else None
        if name in m.imported:
            src, orig = m.imported[name]
            return self._function(src, orig, depth + 1)
        return None

    def _method(self, cls: FunctionId, name: str, depth: int = 0) -> FunctionId | None:
        module, qual = cls
        m = self.mods[module]
        if f"{qual}.{name}" in m.functions:
            return module, f"{qual}.{name}"
        if depth > 8:
            return None
        for base in m.classes.get(qual, []):
            b = self._class(module, base) or self._unique_class(base.rsplit(".", 1)[-1])
            got = self._method(b, name, depth + 1) if b is not None else None
            if got is not None:
                return got
        return None

    # -- the walk ---------------------------------------------------------------------------------------------

    def _calls(self, fid: FunctionId) -> list[FunctionId]:
        module, qual = fid
        m = self.mods[module]
        node = m.functions[qual]
        parts = qual.split(".")
        cls = next(((module, ".".join(parts[:i])) for i in range(len(parts) - 1, 0, -1)
                    if ".".join(parts[:i]) in m.classes), None)
        local_classes: dict[str, list[FunctionId]] = {}
        calls: list[ast.Call] = []

        def visit(n: ast.AST, caught: bool) -> None:
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda) and n is not node:
                return
            if isinstance(n, ast.Try):
                for s in n.body:
                    visit(s, caught or _catches_all(n))
                for s in (*n.handlers, *n.orelse, *n.finalbody):
                    visit(s, caught)
                return
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name):
                c = self._class(module, n.value.id)
                for t in n.targets:
                    if isinstance(t, ast.Name) and c is not None:
                        local_classes.setdefault(t.id, []).append(c)
            if isinstance(n, ast.Call) and not caught:
                calls.append(n)
            for child in children(n):
                visit(child, caught)

        visit(node, False)
        out: list[FunctionId] = []
        for call in calls:
            f = call.func
            if isinstance(f, ast.Name):
                got = (module, f"{qual}.{f.id}") if f"{qual}.{f.id}" in m.functions else self._function(module, f.id)
                out += [got] if got else []
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                base = f.value.id
                if base in ("self", "cls") and cls is not None:
                    targets = [cls]
                elif base in local_classes:
                    targets = local_classes[base]
                elif base in m.modules and m.modules[base] in self.mods:
                    got = self._function(m.modules[base], f.attr)
                    out += [got] if got else []
                    continue
                else:
                    c = self._class(module, base)
                    targets = [c] if c is not None else []
                out += [g for g in (self._method(t, f.attr) for t in targets) if g is not None]
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) \
                    and isinstance(f.value.func, ast.Name) and f.value.func.id == "super" and cls is not None:
                for base in m.classes.get(cls[1], []):
                    b = self._class(module, base) or self._unique_class(base.rsplit(".", 1)[-1])
                    got = self._method(b, f.attr) if b is not None else None
                    if got is not None:
                        out.append(got)
                        break
        return out

    def _reach(self) -> set[FunctionId]:
        todo = [(mod, q) for mod, m in self.mods.items() if mod in self.loaded for q in m.functions
                if q.rsplit(".", 1)[-1] in ROOTS and "." in q and q.rsplit(".", 1)[0] in m.classes
                and q.rsplit(".", 2)[-2].startswith(LOADER_PREFIX)]
        seen: set[FunctionId] = set()
        while todo:
            fid = todo.pop()
            if fid in seen:
                continue
            seen.add(fid)
            todo += self._calls(fid)
        return seen
