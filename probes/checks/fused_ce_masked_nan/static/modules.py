"""Module resolution for the static reading: modules of the distribution, their globals, imports and classes.

The ``ModuleResolution`` mixin of ``Analysis`` loads a module's source through the ``read_module`` callback,
resolves relative and star imports, gives the value of a module-level name (joining bindings made under
``if``/``try``), reads class attributes through base classes, and finds what the forward's callable
parameters (``loss_function``) are bound to at the class's ``.apply`` / mapping call sites.
"""

from __future__ import annotations

import ast

from .syntax import BUILTIN_NAMES, const_truth, is_class_ref, names_class, target_names
from .tamper import forward_decorator
from .values import EMPTY, OTHER, ClassInfo, Frame, Func, ModuleCtx, State, Val, join


class ModuleResolution:
    """Part of ``Analysis`` (``analysis.py``): where names come from, across the distribution's modules."""

    def load(self, dotted: str) -> ModuleCtx | None:
        if dotted in self.modules:
            return self.modules[dotted]
        self.modules[dotted] = None
        text = self.reader(dotted) if self.reader is not None else None
        if text is None:
            return None
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        ctx = ModuleCtx(dotted, dotted.replace(".", "/") + ".py", tree)
        self.modules[dotted] = ctx
        return ctx

    def same_dist(self, dotted: str) -> bool:
        return dotted.split(".", maxsplit=1)[0] == self.top

    def resolve_from(self, mod: ModuleCtx, level: int, module: str | None, name: str | None = None) -> str:
        """Absolute name of a (relative) import; a module may be a package, so both readings are tried."""
        if level == 0:
            return module or ""
        parts = mod.name.split(".")
        candidates = []
        for base in (parts[: len(parts) - level], parts[: len(parts) - level + 1]):
            if base:
                candidates.append(".".join(base + ([module] if module else [])))
        for c in candidates:
            if self.load(c) is not None or (name and self.load(f"{c}.{name}") is not None):
                return c
        return candidates[0] if candidates else (module or "")

    def bindings(self, mod: ModuleCtx) -> dict[str, list[tuple[ast.AST, bool]]]:
        """Top-level statements that bind each name (descending into if/try/with at module level)."""
        if mod._bindings is not None:
            return mod._bindings
        out: dict[str, list[tuple[ast.AST, bool]]] = {}

        def add(name: str, stmt: ast.AST, conditional: bool) -> None:
            out.setdefault(name, []).append((stmt, conditional))

        def walk(stmts: list[ast.stmt], conditional: bool) -> None:
            for s in stmts:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    add(s.name, s, conditional)
                elif isinstance(s, ast.Import):
                    for a in s.names:
                        add(a.asname or a.name.split(".")[0], s, conditional)
                elif isinstance(s, ast.ImportFrom):
                    for a in s.names:
                        if a.name == "*":
                            mod.star.append(self.resolve_from(mod, s.level, s.module))
                        else:
                            add(a.asname or a.name, s, conditional)
                elif isinstance(s, (ast.Assign, ast.AnnAssign)):
                    targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                    for t in targets:
                        for n in target_names(t):
                            add(n, s, conditional)
                elif isinstance(s, ast.If):
                    truth = const_truth(s.test)
                    if truth is not False:
                        walk(s.body, conditional or truth is None)
                    if truth is not True:
                        walk(s.orelse, conditional or truth is None)
                elif isinstance(s, ast.Try):
                    walk(s.body, True)
                    for h in s.handlers:
                        walk(h.body, True)
                    walk(s.orelse, True)
                    walk(s.finalbody, conditional)
                elif isinstance(s, (ast.With, ast.For, ast.While)):
                    walk(s.body, conditional)

        walk(mod.tree.body, False)
        mod._bindings = out
        return out

    def global_value(self, mod: ModuleCtx, name: str) -> Val | None:
        """What a module-level name holds (a join over conditional bindings), or None when it is unbound."""
        if name in mod.globals_cache:
            return mod.globals_cache[name]
        key = (mod.name, name)
        if key in self.resolving:
            return frozenset({("R", f"{mod.name}.{name} is defined in terms of itself")})
        self.resolving.add(key)
        try:
            val = self._global_value(mod, name)
        finally:
            self.resolving.discard(key)
        if val is not None:
            mod.globals_cache[name] = val
        return val

    def _global_value(self, mod: ModuleCtx, name: str) -> Val | None:
        binds = self.bindings(mod).get(name)
        if not binds:
            for star in mod.star:
                m = self.load(star) if self.same_dist(star) else None
                if m is not None:
                    v = self.global_value(m, name)
                    if v is not None:
                        return v
                elif self.same_dist(star):
                    return frozenset({("R", f"{name} may come from 'from {star} import *', which cannot be read")})
                elif name in BUILTIN_NAMES:
                    return frozenset({("R", f"{name} may come from 'from {star} import *' (another distribution), "
                                            "which may shadow the builtin")})
            if name in BUILTIN_NAMES:
                return frozenset({("X", f"builtins.{name}")})
            return None
        # An unconditional binding replaces everything before it; conditional ones join.
        vals: list[Val] = []
        for stmt, conditional in binds:
            v = self.bind_value(mod, name, stmt)
            vals = [*vals, v] if conditional else [v]
        return join(*vals)

    def decorated(self, func: Func) -> Val:
        """``func`` as its decorators leave it: itself under known library wrappers, else unresolved (a decorator
        of the module may return another function, e.g. an identity in place of a floor)."""
        why = forward_decorator(self, func)
        if why is None:
            return frozenset({func})
        return frozenset({("R", f"{func.name} is wrapped by {why}, which the reading does not follow")})

    def bind_value(self, mod: ModuleCtx, name: str, stmt: ast.AST) -> Val:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self.decorated(Func(stmt, mod))
        if isinstance(stmt, ast.ClassDef):
            return frozenset({ClassInfo(stmt, mod)})
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    dotted = a.name if a.asname else a.name.split(".")[0]
                    return frozenset({("M", dotted) if self.same_dist(dotted) else ("X", dotted)})
        if isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                if (a.asname or a.name) == name:
                    base = self.resolve_from(mod, stmt.level, stmt.module, a.name)
                    return self.import_symbol(base, a.name)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == name:
                    return self.ev_global(mod, stmt.value)
                if isinstance(t, (ast.Tuple, ast.List)) and isinstance(stmt.value, (ast.Tuple, ast.List)) \
                        and len(t.elts) == len(stmt.value.elts):
                    for te, ve in zip(t.elts, stmt.value.elts, strict=True):
                        if isinstance(te, ast.Name) and te.id == name:
                            return self.ev_global(mod, ve)
            return OTHER
        return OTHER

    def import_symbol(self, module: str, name: str) -> Val:
        if not self.same_dist(module):
            return frozenset({("X", f"{module}.{name}")})
        m = self.load(module)
        if m is not None:
            v = self.global_value(m, name)
            if v is not None:
                return v
        if self.load(f"{module}.{name}") is not None:
            return frozenset({("M", f"{module}.{name}")})
        if m is None:
            return frozenset({("R", f"{name} is imported from {module}, which cannot be read")})
        return frozenset({("R", f"{module} defines no {name}")})

    def module_frame(self, mod: ModuleCtx) -> Frame:
        return Frame(mod, None, State(), frozenset(), f"{mod.name} (module level)")

    def ev_global(self, mod: ModuleCtx, node: ast.AST, class_scope: dict[str, Val] | None = None) -> Val:
        """Evaluate module-level (or class-body) code; what it records is not on the forward's path."""
        frame = self.module_frame(mod)
        frame.class_scope = class_scope
        self.muted += 1
        try:
            return self.ev(frame, node)
        finally:
            self.muted -= 1

    def class_attr(self, cls: ClassInfo, name: str, seen: set[int] | None = None) -> Val | None:
        """A class attribute (own body, then bases depth-first), unwrapping staticmethod."""
        seen = seen or set()
        if id(cls.node) in seen:
            return None
        seen.add(id(cls.node))
        found: list[Val] = []

        def walk(stmts: list[ast.stmt]) -> None:
            for s in stmts:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name:
                    f = Func(s, cls.mod)
                    found.append(frozenset({f}) if name == "forward" else self.decorated(f))  # judge.py: forward
                elif isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets):
                    found.append(self.ev_global(cls.mod, s.value, self.class_scope(cls)))
                elif isinstance(s, ast.If) and const_truth(s.test) is not False:
                    walk(s.body)
                    walk(s.orelse)
        walk(cls.node.body)
        if found:
            return join(*found)
        for base in cls.node.bases:
            for e in self.ev_global(cls.mod, base):
                if isinstance(e, ClassInfo):
                    v = self.class_attr(e, name, seen)
                    if v is not None:
                        return v
        return None

    def class_scope(self, cls: ClassInfo) -> dict[str, Val]:
        scope: dict[str, Val] = {}
        for s in cls.node.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope[s.name] = frozenset({Func(s, cls.mod)})
        return scope


    def param_callables(self, name: str) -> Val:
        """What the class's call sites bind to forward parameter ``name`` (``.apply(...)`` positions, or a
        ``dict(name=...)`` / ``{"name": ...}`` mapping in code that names the class)."""
        if name in self.param_cache:
            return self.param_cache[name]
        self.param_cache[name] = EMPTY
        order = self.forward_order
        found: list[Val] = []
        for mod in [m for m in list(self.modules.values()) if m is not None]:
            scopes: list[ast.AST] = [mod.tree, *(n for n in ast.walk(mod.tree)
                                                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
            for scope in scopes:
                if not names_class(scope):
                    continue
                for n in ast.walk(scope):
                    expr = None
                    if isinstance(n, ast.Call):
                        f = n.func
                        if isinstance(f, ast.Attribute) and f.attr == "apply" and is_class_ref(f.value):
                            if name in order and order.index(name) < len(n.args) and \
                                    not any(isinstance(x, ast.Starred) for x in n.args[: order.index(name) + 1]):
                                expr = n.args[order.index(name)]
                            expr = next((k.value for k in n.keywords if k.arg == name), expr)
                        elif isinstance(f, ast.Name) and f.id == "dict":
                            expr = next((k.value for k in n.keywords if k.arg == name), None)
                    elif isinstance(n, ast.Dict):
                        expr = next((v for k, v in zip(n.keys, n.values, strict=True)
                                     if isinstance(k, ast.Constant) and k.value == name), None)
                    if expr is not None:
                        found.append(self.ev_global(mod, expr))
        val = join(*found)
        self.param_cache[name] = val
        return val
