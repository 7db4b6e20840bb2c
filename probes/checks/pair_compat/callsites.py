"""unsloth's calls into zoo and its constant-key reads of zoo dicts, as the reference reader records them.

What a call site passes (``shape``): how many plain positional arguments, whether a ``*`` or ``**`` unpacking
hides more, and the keyword names; the receiver (``path``: a function, a class, a method read off a class;
``instance``: a method of an instance of a zoo class made in the same expression or function). The reference's
``kind`` spells the shape (``call(0,model_name=,token=)``) so that two releases whose calls differ never share
an equivalence class in the history. Which names a function binds itself (``local_names``: a parameter, an
assignment, a ``def``), so that a call through such a name is never read as a call into zoo. Which names an
unsloth module re-exports from zoo (``reexports``: ``from ._utils import get_transformers_model_type`` in
``loader.py`` is zoo's function). Stdlib only.
"""

from __future__ import annotations

import ast
from typing import Any

from probes.checks.pair_compat.modules import children, resolve_relative
from probes.checks.pair_compat.signatures import bindings

ZOO = "unsloth_zoo"


def shape(call: ast.Call, receiver: str) -> dict[str, Any]:
    """What a call passes: ``{"positional", "star", "keywords", "dstar", "receiver"}``."""
    return {"positional": sum(not isinstance(a, ast.Starred) for a in call.args),
            "star": any(isinstance(a, ast.Starred) for a in call.args),
            "keywords": [k.arg for k in call.keywords if k.arg is not None],
            "dstar": any(k.arg is None for k in call.keywords), "receiver": receiver}


def shape_text(s: dict[str, Any]) -> str:
    """``call(2,*,model_name=,**)`` (``#instance`` appended for a method of an instance)."""
    parts = [str(s["positional"])] + ["*"] * s["star"] + [f"{k}=" for k in s["keywords"]] + ["**"] * s["dstar"]
    return f"call({','.join(parts)})" + ("#instance" if s["receiver"] == "instance" else "")


def local_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[dict[str, int], list[ast.stmt]]:
    """How often each name is bound in a function's own scope (parameters, assignments, loops, ``with``,
    ``except ... as``, imports, nested ``def``/``class``, ``global``/``nonlocal``), nested scopes aside; and its
    own imports and single-name assignments of a call's result (what may bind a zoo name or a zoo instance)."""
    count: dict[str, int] = {}
    found: list[ast.stmt] = []
    a = fn.args
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
        if arg is not None:
            count[arg.arg] = count.get(arg.arg, 0) + 1
    todo: list[ast.AST] = list(fn.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            count[n.name] = count.get(n.name, 0) + 1
            todo += n.decorator_list
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            count[n.id] = count.get(n.id, 0) + 1
        elif isinstance(n, ast.Import | ast.ImportFrom):
            found.append(n)
            for al in n.names:
                name = al.asname or al.name.split(".")[0]
                count[name] = count.get(name, 0) + 1
        elif isinstance(n, ast.Global | ast.Nonlocal):
            for name in n.names:
                count[name] = count.get(name, 0) + 2
        elif isinstance(n, ast.ExceptHandler) and n.name:
            count[n.name] = count.get(n.name, 0) + 1
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, ast.Call):
            found.append(n)
        todo += children(n)
    return count, found


def module_counts(tree: ast.Module) -> dict[str, int]:
    """How often each name is bound at module level (a binding in a block counts twice)."""
    return bindings(tree.body, set())[0]


def reexports(trees: dict[str, tuple[ast.Module, bool]], package: str) -> dict[str, dict[str, str]]:
    """Per unsloth module, the names bound exactly once at module level by an import that leads to zoo:
    ``from unsloth_zoo.x import y``, or ``from .m import y`` / ``from .m import *`` where ``m`` binds ``y``
    that way (followed through unsloth modules)."""
    direct: dict[str, dict[str, str]] = {}
    through: dict[str, dict[str, tuple[str, str]]] = {}
    stars: dict[str, list[str]] = {}
    for module, (tree, is_package) in trees.items():
        count = module_counts(tree)
        d, t = direct.setdefault(module, {}), through.setdefault(module, {})
        for s in tree.body:
            if not isinstance(s, ast.ImportFrom):
                continue
            source = resolve_relative(module, is_package, s.module, s.level)
            if source is None:
                continue
            top = source.split(".")[0]
            for a in s.names:
                name = a.asname or a.name
                if a.name == "*" and top == package:
                    stars.setdefault(module, []).append(source)
                elif count.get(name) == 1 and top == ZOO:
                    d[name] = f"{source}.{a.name}"
                elif count.get(name) == 1 and top == package:
                    t[name] = (source, a.name)

    def look(module: str, name: str, depth: int) -> str | None:
        if depth > 6 or module not in direct:
            return None
        if name in direct[module]:
            return direct[module][name]
        if name in through[module]:
            return look(*through[module][name], depth + 1)
        for src in stars.get(module, []):
            if not name.startswith("_") and (got := look(src, name, depth + 1)):
                return got
        return None

    out: dict[str, dict[str, str]] = {}
    for module in trees:
        names = dict(direct[module])
        for name, (src, orig) in through[module].items():
            if (got := look(src, orig, 1)) is not None:
                names[name] = got
        out[module] = names
    return out


def star_names(trees: dict[str, tuple[ast.Module, bool]], package: str, table: dict[str, dict[str, str]],
               module: str) -> dict[str, str]:
    """The zoo names ``module`` gets through ``from .m import *`` of unsloth modules (public names of ``m``'s
    re-exports), where ``module`` binds them nowhere else."""
    tree, is_package = trees[module]
    count = module_counts(tree)
    out: dict[str, str] = {}
    for s in tree.body:
        if isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names):
            source = resolve_relative(module, is_package, s.module, s.level)
            if source is not None and source.split(".")[0] == package:
                out.update({n: p for n, p in table.get(source, {}).items()
                            if not n.startswith("_") and n not in count})
    return out
