"""Expressions for the static reading: names, attributes, subscripts, operators and conditionals to values.

The ``Expressions`` mixin of ``Analysis`` evaluates a node to its abstract value: a name through the frame,
its closures and the module's globals; ``x.shape[0]`` of a masked selection and comparisons to counts and
masks; a division records its divisor; ``a if t else b`` (and ``torch.where``) reads each side under what
``t`` proves. Calls are handed to ``calls.py``.
"""

from __future__ import annotations

import ast
from typing import Any

from .syntax import const_truth, declared_in_nested, dump, num
from .values import (
    COUNT_KINDS,
    MASK,
    NONE,
    OTHER,
    SEL,
    ClassInfo,
    Frame,
    Func,
    Val,
    countish,
    join,
    kind,
    number,
)


class Expressions:
    """Part of ``Analysis`` (``analysis.py``): the value of an expression."""

    def lookup(self, fr: Frame, name: str) -> Val:
        v = self._lookup(fr, name)
        why = self.volatile(fr, name)
        return join(v, frozenset({("U", why)})) if why else v

    def volatile(self, fr: Frame, name: str) -> str | None:
        """Why ``name`` may change behind the reading's back: another function rebinds it through ``global`` or
        ``nonlocal`` (any call may run it), so no guard on it holds at a later read."""
        if name in self.declared(fr.mod.tree, ast.Global):
            return f"{name} is rebound through `global` in {fr.mod.name}, so a guard on it may not hold here"
        scope = fr
        while scope is not None:
            if scope.func is not None and name in self.declared(scope.func.node, ast.Nonlocal):
                return f"{name} is rebound through `nonlocal` in a nested function, so a guard on it may not hold here"
            scope = scope.func.closure if scope.func is not None else None
        return None

    def declared(self, node: ast.AST, decl: type[ast.Global] | type[ast.Nonlocal]) -> set[str]:
        key = (id(node), decl)
        if key not in self.declarations:
            self.declarations[key] = declared_in_nested(node, decl)
        return self.declarations[key]

    def _lookup(self, fr: Frame, name: str) -> Val:
        if name in fr.state.vars:
            return fr.state.vars[name]
        if fr.func is not None and name in fr.local_names:
            return OTHER  # a local not bound on this path (yet)
        if fr.class_scope is not None and name in fr.class_scope:
            return fr.class_scope[name]
        closure = fr.func.closure if fr.func is not None else None
        while closure is not None:
            if name in closure.state.vars:
                return closure.state.vars[name]
            if name in closure.local_names:
                return OTHER
            closure = closure.func.closure if closure.func is not None else None
        v = self.global_value(fr.mod, name)
        if v is None:
            return frozenset({("R", f"name {name!r} is not defined in {fr.mod.name}")})
        return v

    def ev(self, fr: Frame, node: ast.AST | None) -> Val:
        if node is None:
            return OTHER
        self.tick()
        v = self._ev(fr, node)
        if fr.state.facts and isinstance(node, (ast.Name, ast.Call, ast.Subscript, ast.Attribute)) \
                and countish(v) and dump(node) in fr.state.facts:
            v = self.nonzero(fr, v, node.lineno, "a branch on zero")
        return v

    def _ev(self, fr: Frame, node: ast.AST) -> Val:
        if isinstance(node, ast.Constant):
            n = num(node)
            if n is None:
                if node.value is None:
                    return NONE
                return frozenset({("T", node.value)}) if isinstance(node.value, str) else OTHER
            return number(n)
        if isinstance(node, ast.Name):
            return self.lookup(fr, node.id)
        if isinstance(node, ast.Attribute):
            return self.attribute(fr, node)
        if isinstance(node, ast.Subscript):
            base = self.ev(fr, node.value)
            idx = self.ev(fr, node.slice)
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and \
                    any(kind(e) == "S" for e in self.ev(fr, node.value.value)):
                return self.new_count(fr, node.lineno)
            if any(kind(e) == "B" for e in idx) and not countish(base):
                return SEL
            return base if countish(base) or any(kind(e) in ("B", "S") for e in base) else OTHER
        if isinstance(node, ast.BinOp):
            return self.binop(fr, node.op, node.left, node.right, node.lineno)
        if isinstance(node, ast.UnaryOp):
            n = num(node)
            if n is not None:
                return number(n)
            v = self.ev(fr, node.operand)
            if isinstance(node.op, ast.Not):
                return OTHER
            if isinstance(node.op, ast.Invert) and any(kind(e) == "B" for e in v):
                return MASK
            if isinstance(node.op, ast.UAdd):
                return v
            return frozenset({("U", f"line {node.lineno}: the count is negated")}) if countish(v) else OTHER
        if isinstance(node, ast.BoolOp):
            vals = [self.ev(fr, x) for x in node.values]
            if isinstance(node.op, ast.Or):
                # ``d or 1``: every operand but the last is taken only when truthy (nonzero).
                head = [self.nonzero(fr, v, node.lineno, "`or` fallback") for v in vals[:-1]]
                return join(*head, vals[-1])
            if all(any(kind(e) == "B" for e in v) for v in vals):
                return MASK
            return join(*vals) if any(countish(v) for v in vals) else OTHER
        if isinstance(node, ast.Compare):
            self.ev(fr, node.left)
            for c in node.comparators:
                self.ev(fr, c)
            if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return OTHER
            return MASK
        if isinstance(node, ast.IfExp):
            return self.conditional(fr, node.test, node.body, node.orelse)
        if isinstance(node, ast.Call):
            return self.call(fr, node)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = [self.ev(fr, e) for e in node.elts]
            return join(*vals) if any(countish(v) for v in vals) else OTHER
        if isinstance(node, ast.Dict):
            for k in node.keys:
                self.ev(fr, k)
            vals = [self.ev(fr, v) for v in node.values]
            return join(*vals) if any(countish(v) for v in vals) else OTHER
        if isinstance(node, ast.Starred):
            return self.ev(fr, node.value)
        if isinstance(node, ast.NamedExpr):
            v = self.ev(fr, node.value)
            self.assign(fr, node.target, v, node.value)
            return v
        if isinstance(node, ast.Lambda):
            return frozenset({Func(node, fr.mod, closure=fr, defaults=self.defaults_of(fr, node))})
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self.ev(fr, part.value)
            return OTHER
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            saved = fr.state.copy()
            for gen in node.generators:
                it = self.ev(fr, gen.iter)
                self.assign(fr, gen.target, it if countish(it) else OTHER, None)
                for cond in gen.ifs:
                    self.ev(fr, cond)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            vals = [self.ev(fr, p) for p in parts]
            fr.state = saved
            return join(*vals) if any(countish(v) for v in vals) else OTHER
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.FormattedValue)):
            inner = getattr(node, "value", None)
            return self.ev(fr, inner) if inner is not None else OTHER
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.ev(fr, part)
            return OTHER
        return OTHER

    def defaults_of(self, fr: Frame, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) \
            -> tuple[tuple[str, Val], ...]:
        """Default values, evaluated now (where the function is made), as Python does."""
        a = node.args
        names = [p.arg for p in [*a.posonlyargs, *a.args]]
        pairs = list(zip(names[len(names) - len(a.defaults):], a.defaults, strict=True))
        pairs += [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        return tuple((name, self.ev(fr, d)) for name, d in pairs)

    def attribute(self, fr: Frame, node: ast.Attribute) -> Val:
        base = self.ev(fr, node.value)
        out: set[Any] = set()
        for e in base:
            k = kind(e)
            if k == "M":
                m = self.load(e[1])
                v = self.global_value(m, node.attr) if m is not None else None
                if v is None:
                    sub = f"{e[1]}.{node.attr}"
                    v = frozenset({("M", sub)}) if self.load(sub) is not None else frozenset(
                        {("R", f"{sub} cannot be read")})
                elif m is not None and node.attr in self.declared(m.tree, ast.Global):
                    v = join(v, frozenset({("U", f"{e[1]}.{node.attr} is rebound through `global`, so a guard on "
                                                 "it may not hold here")}))
                out |= v
            elif k == "X":
                out.add(("X", f"{e[1]}.{node.attr}"))
            elif k == "R":
                out.add(e)
            elif isinstance(e, ClassInfo):
                v = self.class_attr(e, node.attr)
                out |= v if v is not None else {("O",)}
            elif (k in COUNT_KINDS and node.attr in ("data", "T", "mT", "real")) or (k == "S" and node.attr == "shape"):
                out.add(e)
            else:
                out.add(("O",))
        return frozenset(out) or OTHER

    def binop(self, fr: Frame, op: ast.operator, left: ast.AST, right: ast.AST, line: int) -> Val:
        lv = self.ev(fr, left)
        if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)):
            rv = self.ev(fr, right)
            self.division(fr, line, rv)
            if countish(lv):
                return frozenset({("U", f"line {line}: the count is divided")})
            return OTHER
        rv = self.ev(fr, right)
        if isinstance(op, ast.Pow):
            e = num(right)
            if e is not None and e < 0:
                self.division(fr, line, lv)
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and \
                any(kind(e) == "B" for e in lv) and any(kind(e) == "B" for e in rv):
            return MASK
        if countish(lv) or countish(rv):
            return frozenset({("U", f"line {line}: the count goes through arithmetic "
                                    f"({type(op).__name__}) that is not a recognised guard")})
        if isinstance(op, ast.Mult) and any(kind(e) == "B" for e in lv | rv):
            return MASK
        return OTHER

    def conditional(self, fr: Frame, test: ast.AST, body: ast.AST, orelse: ast.AST) -> Val:
        """``body if test else orelse`` and ``torch.where(test, body, orelse)``."""
        truth = const_truth(test)
        if truth is None:
            truth = self.none_truth(fr, test)
        if truth is not None:
            return self.ev(fr, body if truth else orelse)
        self.ev(fr, test)
        saved = fr.state
        how = "a conditional that replaces zero"
        fr.state = self.refine(fr, test, True, how=how)
        self.none_sides.append(self.none_side(fr, test, True))
        a = self.ev(fr, body)
        self.none_sides.pop()
        fr.state = self.refine(fr, test, False, saved, how)
        self.none_sides.append(self.none_side(fr, test, False))
        b = self.ev(fr, orelse)
        self.none_sides.pop()
        fr.state = saved
        return join(a, b)
