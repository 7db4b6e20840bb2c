"""Calls for the static reading: dispatching a call and entering the functions it can read.

The ``Calls`` mixin of ``Analysis`` splits a call into its callee and arguments, sends tensor methods and
library functions to ``operations.py``, binds arguments to a readable function's parameters (defaults,
``*args``/``**kwargs``, ``functools.partial`` pre-bound values) and runs its body, memoised and with a depth
limit. A count passed to code that cannot be read is recorded as an escape.
"""

from __future__ import annotations

import ast
from typing import Any

from .guards import nonzero_subjects
from .syntax import INSPECT, assigned_names, dump, param_names
from .values import MAX_DEPTH, OTHER, ClassInfo, Frame, Func, State, Val, countish, join, kind, positive, unguarded


class Calls:
    """Part of ``Analysis`` (``analysis.py``): calls and the functions they enter."""

    def call(self, fr: Frame, node: ast.Call) -> Val:
        f = node.func
        line = node.lineno
        # torch.where and masked_fill read their branches under the condition.
        name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else None)
        if name == "where" and len(node.args) == 3 and self.is_library(fr, f):
            # Unlike ``a if t else b``, torch.where computes both arms everywhere: a division in an arm runs on the
            # rows the condition excludes too (NaN there, and a NaN gradient through the unselected arm).
            self.ev(fr, node.args[1])
            self.ev(fr, node.args[2])
            return self.conditional(fr, node.args[0], node.args[1], node.args[2])
        if name in ("masked_fill", "masked_fill_") and isinstance(f, ast.Attribute) and len(node.args) == 2:
            recv = self.ev(fr, f.value)
            self.ev(fr, node.args[0])
            fill = self.ev(fr, node.args[1])
            proven, _ = nonzero_subjects(node.args[0], False)
            if positive(fill) and any(dump(p) == dump(f.value) for p in proven):
                out = self.nonzero(fr, recv, line, "masked_fill of zero")
            else:
                out = join(recv, fill) if countish(recv) else OTHER
            if name.endswith("_"):
                self.clobber(fr)
                if isinstance(f.value, ast.Name):
                    fr.state.vars[f.value.id] = out
            return out

        if isinstance(f, ast.Attribute):
            recv = self.ev(fr, f.value)
            if recv and all(kind(e) in ("M", "X", "R") or isinstance(e, (ClassInfo, Func)) for e in recv):
                if f.attr in INSPECT and all(kind(e) == "R" for e in recv):
                    self.args_of(fr, node)
                    return OTHER  # logger.info(...) on a logger whose module cannot be read
                callee = self.attribute(fr, f)
                return self.invoke(fr, node, callee)
            return self.method(fr, node, f.attr, recv, f.value)
        callee = self.ev(fr, f)
        return self.invoke(fr, node, callee)

    def is_library(self, fr: Frame, f: ast.AST) -> bool:
        """``torch.where`` / ``where`` from a library (not a user function of that name)."""
        if isinstance(f, ast.Attribute):
            base = self.ev(fr, f.value)
            return any(kind(e) == "X" for e in base)
        if isinstance(f, ast.Name):
            return any(kind(e) == "X" for e in self.lookup(fr, f.id))
        return False

    def args_of(self, fr: Frame, node: ast.Call) -> tuple[list[Val], dict[str, Val], list[Val]]:
        """Positional values, keyword values, and the values passed through ``*`` / ``**``."""
        pos: list[Val] = []
        kws: dict[str, Val] = {}
        spread: list[Val] = []
        starred = False
        for a in node.args:
            if isinstance(a, ast.Starred):
                spread.append(self.ev(fr, a.value))
                starred = True
            elif starred:
                spread.append(self.ev(fr, a))
            else:
                pos.append(self.ev(fr, a))
        for k in node.keywords:
            v = self.ev(fr, k.value)
            if k.arg is None:
                spread.append(v)
            else:
                kws[k.arg] = v
        return pos, kws, spread

    def invoke(self, fr: Frame, node: ast.Call, callee: Val) -> Val:
        pos, kws, spread = self.args_of(fr, node)
        if not all(kind(e) == "X" for e in callee):
            # Code of ours may change its arguments, a closure's tensors or a view of them in place: every
            # expression fact lapses (``Guards.clobber``).
            self.clobber(fr)
        results: list[Val] = []
        for e in callee or OTHER:
            results.append(self.invoke_one(fr, node, e, pos, kws, spread))
        return join(*results)

    def invoke_one(self, fr: Frame, node: ast.Call, e: Any, pos: list[Val], kws: dict[str, Val],
                   spread: list[Val]) -> Val:
        line = node.lineno
        allv = [*pos, *kws.values(), *spread]
        if isinstance(e, Func):
            return self.call_func(fr, e, pos, kws, spread, line)
        if isinstance(e, ClassInfo):
            self.escape(fr, line, f"{e.node.name}()", allv)
            # An instance of a class of ours: its operators (``__rtruediv__``) are code the reading does not run.
            return frozenset({("R", f"an instance of {e.node.name}, whose operators the reading does not follow")})
        k = kind(e)
        if k == "X":
            return self.library(fr, node, e[1], pos, kws, spread)
        if k == "P":
            funcs = self.param_callables(e[1])
            fs = [x for x in funcs if isinstance(x, Func)]
            if not fs:
                self.escape(fr, line, f"{e[1]}(), a caller-supplied callable with no readable binding", allv)
                return frozenset({("U", f"line {line}: the count is passed to {e[1]}(), which cannot be "
                                        "resolved")}) if any(countish(v) for v in allv) else OTHER
            return join(*(self.call_func(fr, x, pos, kws, spread, line) for x in fs))
        if k == "R":
            self.escape(fr, line, f"a callee that cannot be read ({e[1]})", allv)
            if any(countish(v) for v in allv):
                return frozenset({("U", f"line {line}: the count passes through a callee that cannot be read "
                                        f"({e[1]})")})
            return OTHER
        if k == "M":
            return OTHER
        # Calling a data value (or something unresolved).
        self.escape(fr, line, "a call on a computed value", allv)
        if any(countish(v) for v in allv):
            return frozenset({("U", f"line {line}: the count is passed to a computed callee")})
        return OTHER


    def call_func(self, fr: Frame, func: Func, pos: list[Val], kws: dict[str, Val], spread: list[Val],
                  line: int) -> Val:
        node = func.node
        params = param_names(node)
        a = node.args
        pos = [*func.pre_args, *pos]
        kws = {**dict(func.pre_kw), **kws}
        bound: dict[str, Val] = {}
        lost: list[Val] = list(spread)
        for i, v in enumerate(pos):
            if i < len(params):
                bound[params[i]] = v
            else:
                lost.append(v)  # into *args
        kwonly = [p.arg for p in a.kwonlyargs]
        for k, v in kws.items():
            if k in params or k in kwonly:
                bound[k] = v
            else:
                lost.append(v)  # into **kwargs
        if spread:
            for p in [*params, *kwonly]:
                bound.setdefault(p, join(*spread) if any(countish(s) for s in spread) else OTHER)
        defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults, strict=True))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None})
        made = dict(func.defaults) if func.defaults is not None else None
        for p in [*params, *kwonly]:
            if p not in bound:
                d = defaults.get(p)
                if made is not None:
                    bound[p] = made.get(p, OTHER)
                else:  # a module-level def: its defaults are module-level expressions
                    bound[p] = self.ev_global(func.mod, d) if d is not None else OTHER
        if a.vararg:
            bound[a.vararg.arg] = join(*lost) if any(countish(v) for v in lost) else OTHER
        if a.kwarg:
            bound[a.kwarg.arg] = join(*lost) if any(countish(v) for v in lost) else OTHER
        if (lost or spread) and not (a.vararg or a.kwarg) and any(unguarded(v) for v in lost):
            self.escape(fr, line, f"{func.name}() through arguments it does not declare", lost)
        return self.run_func(func, bound, line)

    def run_func(self, func: Func, bound: dict[str, Val], line: int) -> Val:
        key = None
        if func.closure is None:
            key = (id(func.node), self.muted > 0, tuple((k, bound[k]) for k in sorted(bound)))
            if key in self.memo:
                return self.memo[key]
        if any(s.node is func.node for s in self.stack) or len(self.stack) >= MAX_DEPTH:
            return frozenset({("U", f"{func.name}() is recursive or nested too deep to follow")}) if any(
                countish(v) for v in bound.values()) else OTHER
        self.stack.append(func)
        try:
            label = f"{func.name}()" if func.mod is self.entry else f"{func.name}() in {func.mod.name}"
            local = frozenset(assigned_names(func.node)) | frozenset(bound)
            frame = Frame(func.mod, func, State(dict(bound)), local, label)
            if isinstance(func.node, ast.Lambda):
                result = self.ev(frame, func.node.body)
            else:
                falls = self.exec_block(frame, func.node.body)
                result = join(*frame.returns, *([OTHER] if falls else []))
        finally:
            self.stack.pop()
        if key is not None:
            self.memo[key] = result
        return result
