"""What a zoo release's callables accept and its module-level dicts hold, read with ``ast`` (nothing imported).

Per module, :func:`module_extras` gives three JSON-able maps that ``symbols.symbol_table`` adds to the table:

* ``callables`` -- every name bound exactly once at module level by a ``def`` or ``class``: a function's
  parameters (``[name, kind, has default]``, kind ``posonly``/``pos``/``varargs``/``kwonly``/``varkw``) and its
  signature as text; a class's ``__init__`` (or None), its bases (dotted, as spelled) and its methods, each
  ``plain``, ``static`` or ``class``. A function or class whose decorator may replace it, a class with a
  metaclass, a ``__new__`` or a decorator, and a name bound twice (also by ``global`` in a function) have no
  entry here: their calls are undecidable.
* ``origins`` -- a name bound exactly once by ``from X import n``: where it comes from (``X.n``), so a call
  through a re-export (``unsloth_zoo.compiler.get_transformers_model_type`` from ``hf_utils``) finds the def.
* ``dicts`` -- a dict bound once at module level from a literal with constant keys (``{...}``, ``dict()``,
  ``dict(k=...)``): its keys, with those that constant-key stores anywhere in the release add
  (``RL_REPLACEMENTS["x"] = ...``). A dict that any other write can change (a computed key, ``update``,
  ``setdefault``, ``pop``, ``del``, ``|=``, ``global``) is None: its keys are undecidable.

Stdlib only.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Any

from probes.checks.pair_compat.modules import resolve_relative, walk

# Decorators that return the function itself or a wrapper with its signature (a call with bad arguments
# still raises TypeError); any other decorator may replace the callable, so its calls are undecidable.
SAFE_DECORATORS = frozenset({"staticmethod", "classmethod", "wraps", "lru_cache", "cache", "no_grad",
                             "inference_mode", "enable_grad", "disable", "contextmanager", "ignore",
                             "_disable_dynamo", "override", "final"})
MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"})
# A write that may change a dict's keys, as spelled on one line: a store or del by subscript, a mutating
# method, an augmented assignment, a rebinding through an attribute (the AST decides; this only filters).
_MUTATING = "|".join(sorted(MUTATORS))
WRITE = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\[[^\n]*\]\s*(?:=(?!=)|[-+|]=)|\.\s*(?:" + _MUTATING + r")\b|[|+]=)|"
                   r"\bdel\s+([A-Za-z_]\w*)\s*\[|\.([A-Za-z_]\w*)\s*=(?!=)")
DICT_START = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=\s*(?:\{|dict\()", re.M)  # `D = {` / `D = dict(`
GLOBAL = re.compile(r"^[ \t]*global[ \t]+([\w, \t]+)", re.M)
DEFAULT_TEXT = 40  # a longer default value is kept as `...`


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *parts[::-1]])
    return None


def _decorators_safe(decorators: list[ast.expr]) -> bool:
    return all((_dotted(d) or "?").rsplit(".", 1)[-1] in SAFE_DECORATORS for d in decorators)


def parameters(args: ast.arguments) -> list[list[Any]]:
    """``[[name, kind, has default], ...]`` of a ``def``'s arguments, in binding order."""
    pos = [*args.posonlyargs, *args.args]
    first_default = len(pos) - len(args.defaults)
    out: list[list[Any]] = [[a.arg, "posonly" if i < len(args.posonlyargs) else "pos", i >= first_default]
                            for i, a in enumerate(pos)]
    if args.vararg is not None:
        out.append([args.vararg.arg, "varargs", True])
    out += [[a.arg, "kwonly", d is not None] for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg is not None:
        out.append([args.kwarg.arg, "varkw", True])
    return out


def _short(node: ast.expr | None) -> ast.expr | None:
    """A default value as evidence: long ones become ``...`` (the table stays small; only its presence counts)."""
    return node if node is None or len(ast.unparse(node)) <= DEFAULT_TEXT else ast.Constant(value=...)


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The parameter list as text, ``(config, trust_remote_code=False)``: compact (no annotations, long defaults
    as ``...``), and :func:`parameters` of ``ast.parse(f"def f{text}: pass")`` gives back what binding needs."""
    a = node.args

    def bare(args: list[ast.arg]) -> list[ast.arg]:
        return [ast.arg(arg=x.arg) for x in args]

    short = ast.arguments(posonlyargs=bare(a.posonlyargs), args=bare(a.args),
                          vararg=a.vararg and ast.arg(arg=a.vararg.arg), kwonlyargs=bare(a.kwonlyargs),
                          kw_defaults=[_short(d) for d in a.kw_defaults], kwarg=a.kwarg and ast.arg(arg=a.kwarg.arg),
                          defaults=[_short(d) for d in a.defaults])
    return f"({ast.unparse(short)})"


def _class(node: ast.ClassDef) -> dict[str, Any] | None:
    """A class's constructor, bases and methods, or None where its construction is not its ``__init__``'s."""
    if node.keywords or node.decorator_list:  # a metaclass, a dataclass or another decorator
        return None
    count: dict[str, int] = {}
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for stmt in node.body:
        for sub in walk(stmt) if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) else [stmt]:
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                count[sub.name] = count.get(sub.name, 0) + 1 + (sub is not stmt)  # a def in a block is conditional
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and sub is stmt:
                    defs[sub.name] = sub
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                count[sub.id] = count.get(sub.id, 0) + 2
    if "__new__" in count or count.get("__init__", 1) != 1:
        return None
    methods = {}
    for name, d in defs.items():
        if count[name] != 1 or not _decorators_safe(d.decorator_list):
            continue
        deco = {(_dotted(x) or "").rsplit(".", 1)[-1] for x in d.decorator_list}
        kind = "static" if "staticmethod" in deco else "class" if "classmethod" in deco else "plain"
        methods[name] = f"{kind}:{_function(d)}"
    if "__init__" in count and "__init__" not in methods:
        return None  # an __init__ behind an unknown decorator
    bases = [_dotted(b) for b in node.bases]
    if any(b is None for b in bases):
        return None
    return {"class": node.name, "bases": bases, "methods": methods}


def bindings(body: list[ast.stmt], declared: set[str]) -> tuple[dict[str, int], list[ast.stmt]]:
    """How often each name is bound at module level (a binding inside a block counts twice: it may not run; a
    name ``declared`` global in a function too), and the module-level binding statements."""
    count: dict[str, int] = dict.fromkeys(declared, 2)
    stmts: list[ast.stmt] = []

    def bump(target: ast.AST, by: int) -> None:  # the plain names a target binds (not `d[k]`, not `m.x`)
        if isinstance(target, ast.Name):
            count[target.id] = count.get(target.id, 0) + by
        elif isinstance(target, ast.Starred):
            bump(target.value, by)
        elif isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                bump(elt, by)

    def block(stmts_: list[ast.stmt], nested: bool) -> None:
        by = 2 if nested else 1
        for s in stmts_:
            if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                count[s.name] = count.get(s.name, 0) + by
                stmts.append(s)
            elif isinstance(s, ast.Import | ast.ImportFrom):
                for a in s.names:
                    name = a.asname or a.name.split(".")[0]
                    count[name] = count.get(name, 0) + by
                stmts.append(s)
            elif isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign):
                for t in s.targets if isinstance(s, ast.Assign) else [s.target]:
                    bump(t, by + isinstance(s, ast.AugAssign))
                stmts.append(s)
            elif isinstance(s, ast.For | ast.AsyncFor):
                bump(s.target, 2)
            elif isinstance(s, ast.With | ast.AsyncWith):
                for item in s.items:
                    if item.optional_vars is not None:
                        bump(item.optional_vars, 2)
            elif isinstance(s, ast.Delete):
                for t in s.targets:
                    bump(t, 2)
            for part in ("body", "orelse", "finalbody"):
                if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    block(getattr(s, part, []), True)
            for h in getattr(s, "handlers", []):
                block(h.body, True)

    block(body, False)
    return count, stmts


def _dict_keys(value: ast.expr | None) -> list[str] | None:
    """The constant keys of a dict literal or ``dict(k=...)`` call, else None."""
    if isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                           for k in value.keys):
        return [k.value for k in value.keys]  # type: ignore[union-attr]
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
            and not value.args and all(k.arg is not None for k in value.keywords):
        return [str(k.arg) for k in value.keywords]
    return None


def module_extras(module: str, is_package: bool, tree: ast.Module, declared: set[str]) -> dict[str, Any]:
    """This module's ``callables``, ``origins`` and ``dicts`` (see the module docstring; dict keys that other
    modules' stores add come from :func:`dict_writes`)."""
    count, stmts = bindings(tree.body, declared)
    callables: dict[str, Any] = {}
    origins: dict[str, str] = {}
    dicts: dict[str, list[str]] = {}
    for s in stmts:
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and count[s.name] == 1 \
                and _decorators_safe(s.decorator_list):
            callables[s.name] = _function(s)
        elif isinstance(s, ast.ClassDef) and count[s.name] == 1:
            got = _class(s)
            if got is not None:
                callables[s.name] = got
        elif isinstance(s, ast.ImportFrom):
            source = resolve_relative(module, is_package, s.module, s.level)
            for a in s.names:
                name = a.asname or a.name
                if source is not None and a.name != "*" and count.get(name) == 1:
                    origins[name] = f"{source}.{a.name}"
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and count[s.targets[0].id] == 1:
            keys = _dict_keys(s.value)
            if keys is not None:
                dicts[s.targets[0].id] = keys
    return {"callables": callables, "origins": origins, "dicts": dicts}


def declared_global(text: str) -> set[str]:
    """The names a ``global`` statement anywhere in this source declares (read from the text: cheap)."""
    return {n.strip() for line in GLOBAL.findall(text) for n in line.split(",")}


def written_names(text: str, names: set[str]) -> dict[str, set[int]]:
    """Which of ``names`` this source may write, with the lines (a textual filter before :func:`dict_writes`)."""
    out: dict[str, set[int]] = {}
    starts: list[int] | None = None
    for m in WRITE.finditer(text):
        for n in m.groups():
            if n in names:
                starts = starts or [i for i, c in enumerate(text) if c == "\n"]
                out.setdefault(n, set()).add(bisect.bisect_left(starts, m.start()) + 1)
    for n in declared_global(text) & names:
        out.setdefault(n, set()).add(0)  # a `global D` anywhere: D's keys are undecidable
    return out


def dict_writes(tree: ast.Module, written: dict[str, set[int]]) -> dict[str, list[str] | None]:
    """Per dict name in ``written`` (:func:`written_names`; the last part of what is written: ``D`` or ``m.D``),
    the constant keys stores add to it anywhere in this module, or None where a write can change its keys in a
    way we cannot read. Only the top-level statements that hold a line the filter found are walked."""
    out: dict[str, list[str] | None] = {n: None for n, lines in written.items() if 0 in lines}
    names = set(written) - set(out)
    lines = {n for ls in written.values() for n in ls}
    nodes = [node for stmt in tree.body if any(stmt.lineno <= n <= (stmt.end_lineno or stmt.lineno) for n in lines)
             for node in walk(stmt)]

    def tail(node: ast.expr) -> str | None:
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    def dynamic(name: str | None) -> None:
        if name in names:
            out[name] = None

    for node in nodes:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            name = tail(node.value)
            key = node.slice
            if name not in names:
                continue
            if isinstance(node.ctx, ast.Store) and isinstance(key, ast.Constant) and isinstance(key.value, str):
                if out.get(name, []) is not None:
                    out[name] = [*(out.get(name) or []), key.value]
            else:
                dynamic(name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            dynamic(tail(node.func.value))
        elif isinstance(node, ast.AugAssign):
            dynamic(tail(node.target))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            dynamic(node.attr)  # `m.D = {...}` rebinds the dict from elsewhere
    return out
