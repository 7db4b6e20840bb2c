"""Every reference from unsloth's source to zoo, read with ``ast`` (nothing is imported).

A reference is a dotted path into zoo and the kind of statement that needs it:

* ``import`` -- ``import unsloth_zoo.X [as Z]``: every part must be a module;
* ``from`` -- ``from unsloth_zoo.X import Y``: ``unsloth_zoo.X`` a module, ``Y`` bound in it or a submodule;
* ``attr`` -- ``Z.Y`` / ``unsloth_zoo.X.Y`` on a name bound to zoo by an import above (module-level or in the
  same function), read (not written).
* ``call(...)`` -- a call of a zoo function, class or method, with what it passes (``callsites.py``), checked
  against zoo's signature (``calls.py``);
* ``key[...]`` -- ``D["k"]`` on a zoo dict, read with a constant key.

A function on the model-loading route (``route.py``) marks its references ``route: model-load`` (and ``@load``
in the kind, which keys the history's equivalence classes).

Each reference carries where it is (file, line, enclosing function or None at module level), which
exceptions an enclosing ``try`` swallows (a handler that re-raises swallows nothing; an ``if hasattr(...)``
test counts as swallowing AttributeError), and whether its module runs when ``import unsloth`` runs:
the modules reached from ``unsloth/__init__.py`` through module-level imports that no ``try`` swallows
(parents of an imported module run first). Stdlib only.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from probes.checks.pair_compat.callsites import local_names, module_counts, reexports, shape, shape_text, star_names
from probes.checks.pair_compat.modules import children, module_of, parse, resolve_relative, walk
from probes.checks.pair_compat.route import Route
from probes.checks.pair_compat.signatures import MUTATORS

REFS_VERSION = 2
ZOO = "unsloth_zoo"
ROOT = "unsloth"
# What each kind of failure raises, and which handler names swallow it.
SWALLOWED_BY = {
    "ModuleNotFoundError": {"ModuleNotFoundError", "ImportError", "Exception", "BaseException"},
    "ImportError": {"ImportError", "Exception", "BaseException"},
    "AttributeError": {"AttributeError", "Exception", "BaseException", "hasattr"},
    # a call's bad arguments; `if "x" in inspect.signature(f).parameters:` tests for them ("contains")
    "TypeError": {"TypeError", "Exception", "BaseException", "contains"},
    "KeyError": {"KeyError", "LookupError", "Exception", "BaseException", "contains"},
}


def _handler_names(h: ast.ExceptHandler) -> set[str]:
    if h.type is None:
        return {"BaseException"}
    nodes = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
    return {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "?") for n in nodes}


def _swallows(t: ast.Try) -> frozenset[str]:
    """The exception names a ``try``'s handlers swallow (those that do not re-raise at their top level)."""
    out: set[str] = set()
    for h in t.handlers:
        if not any(isinstance(s, ast.Raise) for s in h.body):
            out |= _handler_names(h)
    return frozenset(out)


def _is_hasattr_test(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr")
               for n in walk(test))


def _is_contains_test(test: ast.expr) -> bool:
    return any(isinstance(n, ast.Compare) and any(isinstance(o, ast.In | ast.NotIn) for o in n.ops)
               for n in walk(test))


def _chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    """``(base name, [attr, ...])`` of ``a.b.c``, or None when the base is not a plain name."""
    attrs: list[str] = []
    cur: ast.expr = node
    while isinstance(cur, ast.Attribute):
        attrs.append(cur.attr)
        cur = cur.value
    return (cur.id, attrs[::-1]) if isinstance(cur, ast.Name) else None


@dataclass
class _Ctx:
    function: str | None
    swallowed: frozenset[str]
    aliases: dict[str, str]
    prefix: str = ""
    branch: str | None = None  # the module-level if test or except clause a statement runs under
    shadow: frozenset[str] = frozenset()  # names bound here by something else than one zoo import
    instances: dict[str, str] = field(default_factory=dict)  # local name -> the zoo class it is made from


@dataclass
class _FileReader:
    member: str
    module: str
    is_package: bool
    refs: list[dict[str, Any]] = field(default_factory=list)
    mentions_zoo: bool = True
    edges: list[tuple[str, frozenset[str], bool]] = field(default_factory=list)  # (module, swallowed, on a branch)
    patched: set[str] = field(default_factory=set)  # zoo paths unsloth assigns (`Z.f = mine`): calls are its own
    dict_writes: dict[str, set[str] | None] = field(default_factory=dict)  # zoo dict -> keys unsloth stores

    def read(self, tree: ast.Module, mentions_zoo: bool = True, reexported: dict[str, str] | None = None) -> None:
        self.mentions_zoo = mentions_zoo  # a file that never spells zoo's name has only import edges to read
        aliases: dict[str, str] = dict(reexported or {})
        for stmt in tree.body:  # module-level bindings first: functions defined above them use them too
            for node in walk(stmt):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    break
                if isinstance(node, ast.Import | ast.ImportFrom):
                    aliases.update(self._bindings(node))
        count = module_counts(tree)
        shadow = frozenset(n for n in aliases if count.get(n, 0) > 1)  # also bound otherwise: calls undecidable
        self._body(tree.body, _Ctx(None, frozenset(), aliases, shadow=shadow))

    def _bindings(self, node: ast.Import | ast.ImportFrom) -> dict[str, str]:
        out = {}
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == ZOO:
                    out[a.asname or ZOO] = a.name if a.asname else ZOO
            return out
        source = resolve_relative(self.module, self.is_package, node.module, node.level)
        if source is not None and source.split(".")[0] == ZOO:
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{source}.{a.name}"
        return out

    def _add(self, path: str, kind: str, line: int, ctx: _Ctx, modules: int, **extra: Any) -> None:
        self.refs.append({"path": path, "kind": kind, "modules": modules, "file": self.member, "line": line,
                          "function": ctx.function, "swallowed": sorted(ctx.swallowed), "branch": ctx.branch,
                          **extra})

    def _body(self, body: list[ast.stmt], ctx: _Ctx) -> None:
        for stmt in body:
            self._stmt(stmt, ctx)

    def _stmt(self, stmt: ast.stmt, ctx: _Ctx) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in (*stmt.decorator_list, *stmt.args.defaults, *stmt.args.kw_defaults):
                if d is not None:
                    self._expr(d, ctx)
            # the body runs when called, not under the try or if around the definition
            local, found = local_names(stmt) if self.mentions_zoo else ({}, [])
            zoo_names = {n for node in found if isinstance(node, ast.Import | ast.ImportFrom)
                         for n in self._bindings(node)}
            made = [node for node in found if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and local.get(node.targets[0].id) == 1]
            zoo_once = {n for n, c in local.items() if c == 1 and n in zoo_names}
            inner = _Ctx(ctx.prefix + stmt.name, frozenset(), dict(ctx.aliases), ctx.prefix + stmt.name + ".",
                         shadow=ctx.shadow | (set(local) - zoo_once), instances={})
            for node in made:  # `x = ZooClass(...)`, x bound once here: x.m(...) is ZooClass.m
                assert isinstance(node.value, ast.Call) and isinstance(node.targets[0], ast.Name)
                got = self._target(node.value.func, inner)
                if got is not None and got[1] == "path":
                    inner.instances[node.targets[0].id] = got[0]
            self._body(stmt.body, inner)
        elif isinstance(stmt, ast.ClassDef):
            for d in (*stmt.decorator_list, *stmt.bases):
                self._expr(d, ctx)
            self._body(stmt.body, _Ctx(ctx.function, ctx.swallowed, ctx.aliases, ctx.prefix + stmt.name + ".",
                                       ctx.branch, ctx.shadow, ctx.instances))
        elif isinstance(stmt, ast.Try | getattr(ast, "TryStar", ast.Try)):
            self._body(stmt.body, _Ctx(ctx.function, ctx.swallowed | _swallows(stmt), ctx.aliases, ctx.prefix,
                                       ctx.branch, ctx.shadow, ctx.instances))
            for h in stmt.handlers:
                clause = "except " + (ast.unparse(h.type) if h.type is not None else "")
                self._body(h.body, ctx if ctx.function else _Ctx(None, ctx.swallowed, ctx.aliases, ctx.prefix,
                                                                 ctx.branch or clause, ctx.shadow))
            self._body(stmt.orelse, ctx)
            self._body(stmt.finalbody, ctx)
        elif isinstance(stmt, ast.If):
            self._expr(stmt.test, ctx)
            guarded = ctx.swallowed | {"hasattr"} if _is_hasattr_test(stmt.test) else ctx.swallowed
            guarded |= {"contains"} if _is_contains_test(stmt.test) else set()
            test = None if ctx.function else ctx.branch or f"if {ast.unparse(stmt.test)[:80]}"
            self._body(stmt.body, _Ctx(ctx.function, guarded, ctx.aliases, ctx.prefix, test, ctx.shadow,
                                       ctx.instances))
            # the else arm is the default path (unsloth spells a platform `if <platform>: ... else: <GPU path>`)
            self._body(stmt.orelse, ctx)
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            self._import(stmt, ctx)
        else:
            for child in children(stmt):
                if isinstance(child, ast.stmt):
                    self._stmt(child, ctx)
                elif isinstance(child, ast.expr):
                    self._expr(child, ctx)

    def _import(self, stmt: ast.Import | ast.ImportFrom, ctx: _Ctx) -> None:
        if ctx.function is not None:
            ctx.aliases.update(self._bindings(stmt))
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name.split(".")[0] == ZOO:
                    self._add(a.name, "import", a.lineno, ctx, a.name.count(".") + 1)
                elif a.name.split(".")[0] == ROOT and ctx.function is None:
                    self.edges.append((a.name, ctx.swallowed, ctx.branch is not None))
            return
        source = resolve_relative(self.module, self.is_package, stmt.module, stmt.level)
        if source is None:
            return
        top = source.split(".")[0]
        for a in stmt.names:
            if top == ZOO:
                path = source if a.name == "*" else f"{source}.{a.name}"
                self._add(path, "import" if a.name == "*" else "from", a.lineno, ctx, source.count(".") + 1)
            elif top == ROOT and ctx.function is None:
                self.edges.append((source, ctx.swallowed, ctx.branch is not None))
                if a.name != "*":  # kept only if it is a module
                    self.edges.append((f"{source}.{a.name}", ctx.swallowed, ctx.branch is not None))

    def _target(self, node: ast.expr, ctx: _Ctx) -> tuple[str, str] | None:
        """``(zoo path, receiver)`` a callee or subscripted value is statically bound to, else None."""
        if isinstance(node, ast.Name):
            return (ctx.aliases[node.id], "path") if node.id in ctx.aliases and node.id not in ctx.shadow else None
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Call):  # ZooClass(...).method
                made = self._target(node.value.func, ctx)
                return (f"{made[0]}.{node.attr}", "instance") if made and made[1] == "path" else None
            got = _chain(node)
            if got is None:
                return None
            base, attrs = got
            if base in ctx.instances and len(attrs) == 1:
                return f"{ctx.instances[base]}.{attrs[0]}", "instance"
            if base in ctx.aliases and base not in ctx.shadow:
                return ".".join([ctx.aliases[base], *attrs]), "path"
        return None

    def _call_or_key(self, node: ast.expr, ctx: _Ctx) -> None:
        """A call into zoo (``call(...)`` reference), a constant-key read of a zoo dict (``key[...]``), and the
        writes that make either unsloth's own (a patched function, a key unsloth stores)."""
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in MUTATORS and (t := self._target(f.value, ctx)):
                self.dict_writes[t[0]] = None
            elif (t := self._target(f, ctx)) is not None:
                sh = shape(node, t[1])
                self._add(t[0], shape_text(sh), node.lineno, ctx, 1, call=sh)
        elif isinstance(node, ast.Subscript) and (t := self._target(node.value, ctx)) and t[1] == "path":
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if isinstance(node.ctx, ast.Load):
                if isinstance(key, str):
                    self._add(t[0], f"key[{key!r}]", node.lineno, ctx, 1, key=key)
            elif isinstance(key, str) and isinstance(node.ctx, ast.Store):
                if (got := self.dict_writes.setdefault(t[0], set())) is not None:
                    got.add(key)
            else:
                self.dict_writes[t[0]] = None
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load) \
                and (t := self._target(node, ctx)) is not None:
            self.patched.add(t[0])

    def _expr(self, expr: ast.expr, ctx: _Ctx) -> None:
        if not self.mentions_zoo:
            return
        inner: set[int] = set()
        for node in walk(expr):
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Call | ast.Subscript | ast.Attribute):
                self._call_or_key(node, ctx)
            if not isinstance(node, ast.Attribute) or id(node) in inner:
                continue
            cur: ast.expr = node.value
            while isinstance(cur, ast.Attribute):
                inner.add(id(cur))
                cur = cur.value
            got = _chain(node)
            if got is None or got[0] not in ctx.aliases:
                continue
            base, attrs = got
            if not isinstance(node.ctx, ast.Load):
                attrs = attrs[:-1]  # writing Z.Y needs Z, not Y
            if attrs:
                self._add(".".join([ctx.aliases[base], *attrs]), "attr", node.lineno, ctx, 1)


def _closure(edges: dict[str, list[tuple[str, frozenset[str], bool]]], modules: set[str],
             branches: bool) -> list[str]:
    """The unsloth modules ``import unsloth`` runs: reached through module-level imports no try swallows
    (with ``branches`` False, only through imports on no if/except branch)."""
    seen: set[str] = set()
    todo = [ROOT]
    while todo:
        m = todo.pop()
        if m in seen or m not in modules:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += [target for target, swallowed, branch in edges.get(m, [])
                 if not swallowed & SWALLOWED_BY["ImportError"] and (branches or not branch)]
    return sorted(seen)


def _unnamed(functions: set[str], members: dict[str, str]) -> set[str]:
    """The module-level functions whose name appears nowhere in the release but in their ``def``: nothing
    calls, assigns or exports them, so a call or key break inside them breaks no feature."""
    if not functions:
        return set()
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, functions))) + r")\b")
    seen: dict[str, int] = {}
    for text in members.values():
        for m in word.finditer(text):
            seen[m.group(1)] = seen.get(m.group(1), 0) + 1
    return {f for f in functions if seen.get(f, 0) <= 1}


def reference_list(members: dict[str, str], package: str = ROOT) -> dict[str, Any]:
    """All zoo references in the release, with ``import_time`` and ``route`` set on each (JSON-able)."""
    refs: list[dict[str, Any]] = []
    edges: dict[str, list[tuple[str, frozenset[str], bool]]] = {}
    unparsed: list[str] = []
    file_of: dict[str, str] = {}
    trees: dict[str, tuple[ast.Module, bool]] = {}
    for member in sorted(members):
        found = module_of(member, package)
        if found is None:
            continue
        file_of[found[0]] = member
        try:
            trees[found[0]] = (parse(members[member]), found[1])
        except (SyntaxError, ValueError) as exc:
            unparsed.append(f"{member}: {getattr(exc, 'msg', exc)}")
    exported = reexports(trees, package)
    patched: set[str] = set()
    written: dict[str, set[str] | None] = {}
    for module, (tree, is_package) in trees.items():
        reader = _FileReader(file_of[module], module, is_package)
        more = {**star_names(trees, package, exported, module), **exported[module]}
        reader.read(tree, ZOO in members[file_of[module]] or bool(more), more)
        refs += reader.refs
        edges[module] = reader.edges
        patched |= reader.patched
        for path, keys in reader.dict_writes.items():
            written[path] = None if keys is None or written.get(path, set()) is None \
                else {*(written.get(path) or set()), *keys}

    dead = _unnamed({r["function"] for r in refs if ("call" in r or "key" in r) and r["function"]
                     and "." not in r["function"]}, members)
    import_files = {file_of[m] for m in _closure(edges, set(file_of), True)}
    always_modules = set(_closure(edges, set(file_of), False))
    always = {file_of[m] for m in always_modules}
    on_route = {(file_of[m], q) for m, q in Route(trees, package, always_modules).functions}
    kept = []
    for r in refs:
        if "call" in r and r["path"] in patched:
            continue  # unsloth replaces that function: the call is to its own
        if ("call" in r or "key" in r) and r["function"] in dead:
            continue  # in a function no unsloth code names (dead code, e.g. save.py's save_to_gguf_generic)
        if "key" in r and (r["path"] in written and (written[r["path"]] is None or r["key"] in written[r["path"]])):
            continue  # unsloth stores that key itself (or changes the dict in ways we cannot read)
        r["import_time"] = r["file"] in import_files and r["function"] is None
        if r["import_time"] and r["branch"] is None and r["file"] not in always:
            r["branch"] = "a module imported only on an if/except branch"
        r["route"] = "model-load" if (r["file"], r["function"]) in on_route else None
        if r["route"]:
            r["kind"] += "@load"  # the kind keys the history's equivalence classes: the route must be in it
        kept.append(r)
    return {"version": REFS_VERSION, "refs": kept, "import_time_files": sorted(import_files),
            "branch_only_files": sorted(import_files - always), "unparsed": unparsed}
