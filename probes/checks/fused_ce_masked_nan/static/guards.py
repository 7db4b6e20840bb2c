"""Guard recognition: which tests prove a divisor nonzero, and how a guard turns a count into a guarded one.

``nonzero_subjects`` reads a test (``d == 0``, ``not d``, ``(labels != -100).sum() > 0``, ``and``/``or``
combinations) into the expressions it proves nonzero on one side, and those it mentions without proving.
The ``Guards`` mixin of ``Analysis`` applies that to a program state (``refine``), weakens guards that hold on
some runs only (asserts, compound conditions), judges clamps and maxima against their floor (``floored``),
and voids facts when a value is rebound or changed in place.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from .syntax import COUNTERS, dump, mentions_name, num, strip
from .values import COUNT_KINDS, EMPTY, NONE, Frame, State, Val, countish, kind, maybe_none, positive

OPAQUE_KINDS = {"O", "P", "R", "X", "U"}  # values whose identity the reading does not know
_FLIP = {ast.Gt: ast.Lt, ast.Lt: ast.Gt, ast.GtE: ast.LtE, ast.LtE: ast.GtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


def nonzero_subjects(test: ast.AST, truth: bool) -> tuple[list[ast.AST], list[ast.AST]]:
    """``(proven, partial)``: subjects known nonzero when ``test`` is ``truth``, and subjects that a zero test
    mentions without proving (a zero test joined by ``and`` on its false side, or ``or`` on its true side)."""
    if isinstance(test, ast.Call) and not test.args and isinstance(test.func, ast.Attribute) and \
            test.func.attr in ("any", "all", "item", "bool"):
        return nonzero_subjects(test.func.value, truth)
    if isinstance(test, ast.Call) and len(test.args) == 1 and (
            (isinstance(test.func, ast.Name) and test.func.id == "bool")
            or (isinstance(test.func, ast.Attribute) and test.func.attr in ("any", "all"))):
        return nonzero_subjects(test.args[0], truth)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return nonzero_subjects(test.operand, not truth)
    if isinstance(test, ast.BoolOp):
        parts = [nonzero_subjects(v, truth) for v in test.values]
        if isinstance(test.op, ast.And) == truth:  # all conjuncts hold / no disjunct holds
            return [s for p in parts for s in p[0]], [s for p in parts for s in p[1]]
        return [], [s for p in parts for s in p[0] + p[1]]
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        c = num(right)
        subject = left
        if c is None:
            c = num(left)
            subject = right
            if c is None or type(op) not in _FLIP:
                return [], []
            op = _FLIP[type(op)]()
        counted = _counted_condition(subject)
        extra: list[ast.AST] = []
        if counted is not None and c == 0 and type(op) in (ast.NotEq, ast.Gt, ast.Eq, ast.LtE):
            # ``(d == 0).sum() != 0`` is ``any(d == 0)``; ``... == 0`` is its negation.
            extra = nonzero_subjects(counted, truth if isinstance(op, (ast.NotEq, ast.Gt)) else not truth)[0]
        proven, partial = _compare_zero(subject, op, c, truth)
        return proven + extra, partial
    if isinstance(test, ast.Compare):
        return [], []
    return ([test] if truth else []), []


def _tested(test: ast.AST, truth: bool, op: type[ast.cmpop]) -> list[str]:
    """Names ``x`` for which ``x <op> None`` holds where ``test`` is ``truth`` (``op``: ``ast.Is`` or
    ``ast.IsNot``), through ``not``, ``and`` and ``or``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _tested(test.operand, not truth, op)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) == truth:  # every conjunct holds / every disjunct fails
            return [n for v in test.values for n in _tested(v, truth, op)]
        return []
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Is, ast.IsNot)):
        left, right = test.left, test.comparators[0]
        if isinstance(left, ast.Constant) and left.value is None:
            left, right = right, left
        if isinstance(left, ast.Name) and isinstance(right, ast.Constant) and right.value is None:
            return [left.id] if isinstance(test.ops[0], op) == truth else []
    return []


def none_tested(test: ast.AST, truth: bool) -> list[str]:
    """Names known to be None where ``test`` is ``truth``: ``x is None``, ``x is not None``, ``not``, ``and``/``or``."""
    return _tested(test, truth, ast.Is)


def given_tested(test: ast.AST, truth: bool) -> list[str]:
    """Names known not None where ``test`` is ``truth`` (the mirror of ``none_tested``)."""
    return _tested(test, truth, ast.IsNot)


def _compare_zero(subject: ast.AST, op: ast.cmpop, c: float, truth: bool) -> tuple[list[ast.AST], list[ast.AST]]:
    """``subject <op> c`` (constant on the right) is ``truth``: is ``subject`` then known nonzero?"""
    nonzero_when_true = (isinstance(op, ast.NotEq) and c == 0) or (isinstance(op, ast.Gt) and c >= 0) or (
        isinstance(op, ast.GtE) and c > 0)
    nonzero_when_false = (isinstance(op, ast.Eq) and c == 0) or (isinstance(op, ast.LtE) and c >= 0) or (
        isinstance(op, ast.Lt) and c > 0)
    if (nonzero_when_true and truth) or (nonzero_when_false and not truth):
        return [subject], []
    return [], []


def _counted_condition(node: ast.AST) -> ast.AST | None:
    """``cond`` for ``cond.sum()`` / ``torch.count_nonzero(cond)`` / ``cond.any()`` over a comparison."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in COUNTERS:
        inner = node.func.value if not node.args else (node.args[0] if isinstance(node.func.value, ast.Name) else None)
        inner = strip(inner) if inner is not None else None
        return inner if isinstance(inner, ast.Compare) else None
    return None


class Guards:
    """Part of ``Analysis`` (``analysis.py``): zero tests, clamps and in-place changes on the program state."""

    def refine(self, fr: Frame, test: ast.AST, truth: bool, base: State | None = None,
               how: str = "a branch on zero") -> State:
        """The state (``fr.state`` or ``base``) on the side of ``test`` where it is ``truth``."""
        st = (base or fr.state).copy()
        proven, partial = nonzero_subjects(test, truth)
        line = getattr(test, "lineno", 0)
        for subject in proven:
            d = dump(subject)
            st.facts = st.facts | {d}
            core = strip(subject)
            names = {k for k, dd in st.defs.items() if dd == d}
            if isinstance(core, ast.Name):
                names.add(core.id)
            for n in names:
                if n in st.vars:
                    st.vars[n] = self.nonzero(fr, st.vars[n], line, how)
        self.weaken(st, partial, f"line {line}: a zero test on it is combined with other conditions, so the "
                                 "branch does not prove the divisor nonzero")
        for n in given_tested(test, truth):
            if n in st.vars and st.vars[n] >= NONE and st.vars[n] != NONE:
                st.vars[n] = st.vars[n] - NONE
        return st

    def none_truth(self, fr: Frame, test: ast.AST) -> bool | None:
        """``x is None`` / ``x is not None`` decided by what ``x`` may hold: a count, a guarded count, a constant
        or a string is never None, so the other side of the test is not a path (``reduction = "sum" if n is not
        None else "mean"`` with ``n`` the forward's tensor divisor never takes the mean)."""
        if not isinstance(test, (ast.Compare, ast.UnaryOp)):
            return None
        none_if_true, given_if_true = none_tested(test, True), given_tested(test, True)
        for name in {*none_if_true, *given_if_true}:
            if not maybe_none(self.lookup(fr, name)):
                return name in given_if_true  # ``x is None`` is False, ``x is not None`` True
        return None

    def none_side(self, fr: Frame, test: ast.AST, truth: bool) -> tuple[Frame, frozenset[str]]:
        """The forward parameters known to be None on the ``truth`` side of ``test`` (see ``Analysis.division``):
        a name tested against None whose value is the parameter itself, not a value joined from several."""
        vals = [self.lookup(fr, n) for n in none_tested(test, truth)]
        return fr, frozenset(e[1] for v in vals if len(v) == 1 for e in v if kind(e) == "P")

    @staticmethod
    def weaken(st: State, subjects: list[ast.AST], reason: str) -> None:
        """A test that guards ``subjects`` on some runs only: their unguarded counts become undecided."""
        for subject in subjects:
            d = dump(subject)
            core = strip(subject)
            names = {k for k, dd in st.defs.items() if dd == d}
            if isinstance(core, ast.Name):
                names.add(core.id)
            for n in names:
                v = st.vars.get(n, EMPTY)
                if any(kind(e) == "C" for e in v):
                    st.vars[n] = frozenset(("U", reason) if kind(e) == "C" else e for e in v)

    def floored(self, fr: Frame, subject: Val, floors: list[Val], line: int, what: str, *,
                tensor_only: bool = False) -> Val:
        """``subject`` after a clamp/max against ``floors``: guarded when a floor is provably positive, unchanged
        when every floor provably is not (zero, negative, another count), opaque in between."""
        if any(positive(f, tensor_only=tensor_only) for f in floors):
            return self.nonzero(fr, subject, line, f"{what} with a positive floor")
        if floors and all(f and all(kind(e) in ("Z", "N", "C") for e in f) for f in floors):
            return subject
        if countish(subject):
            if any(kind(e) == "F" for f in floors for e in f):
                return frozenset({("U", f"line {line}: {what} with a floor below 1, which is 0 in an integer "
                                        "count's dtype, after int(), or (1e-8) in fp16")})
            return frozenset({("U", f"line {line}: {what} with a floor the reading cannot prove positive")})
        return subject

    def capped(self, fr: Frame, out: Val, cap: Val | None, line: int, what: str) -> Val:
        """``out`` after a clamp's ``max`` as well: a cap that is not provably at least 1 may bring it to 0
        (``clamp(min=1, max=0)`` is 0 everywhere)."""
        if cap is None or cap == NONE or positive(cap) or not countish(out):
            return out
        return frozenset({("U", f"line {line}: {what} with a max the reading cannot prove at least 1")})

    def mutated(self, fr: Frame, recv_node: ast.AST, recv: Val, line: int, m: str) -> Val:
        """An in-place method on a value: facts about the name lapse; a count so changed is no longer judged."""
        self.clobber(fr)
        counts = {e for e in recv if kind(e) in COUNT_KINDS}
        self.poisoned |= counts
        if any(kind(e) in OPAQUE_KINDS for e in recv):
            self.poisoned |= self.exposed  # an object the reading cannot name may hold a count stored away
        if not counts:
            return recv
        out = frozenset({("U", f"line {line}: the count is changed in place by .{m}()")})
        if isinstance(recv_node, ast.Name):
            fr.state.vars[recv_node.id] = out
        return out

    def expose(self, vals: Iterable[Val]) -> None:
        """Counts stored where the reading loses track of them: an in-place change of an unknown object may be
        a change of them (``ctx.d = d; ctx.d.zero_()``)."""
        if not self.muted:
            self.exposed |= {e for v in vals for e in v if kind(e) in COUNT_KINDS}

    @staticmethod
    def clobber(fr: Frame) -> None:
        """Something was changed in place (a tensor, or code of ours that may change any): every expression fact
        and definition lapses. Views alias their base (``v = labels.view(-1); v[:] = -100`` re-masks ``labels``),
        and the reading does not track which names share storage, so none of them is trusted any more."""
        fr.state.facts = frozenset()
        fr.state.defs = {}

    def forget(self, fr: Frame, name: str) -> None:
        """Drop the expression facts and definitions that mention ``name`` (it was rebound or mutated)."""
        st = fr.state
        st.facts = frozenset(f for f in st.facts if not mentions_name(f, name))
        st.defs = {k: d for k, d in st.defs.items() if not mentions_name(d, name) and k != name}

    def nonzero(self, fr: Frame, v: Val, line: int, how: str) -> Val:
        out: set[Any] = set()
        for e in v:
            k = kind(e)
            if k in ("C", "U"):
                out.add(("G", fr.mod.file, line, f"{how} in {fr.label}"))
            elif k in ("O", "P", "Q"):
                out.add(("K", "any") if k in ("O", "Q") else e)
            elif k == "Z":
                continue  # cannot be zero here: this path is infeasible for that fact
            else:
                out.add(e)
        return frozenset(out)
