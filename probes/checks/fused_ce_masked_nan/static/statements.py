"""Statements for the static reading: assignments, branches, loops, ``try`` and ``match`` on a program state.

The ``Statements`` mixin of ``Analysis`` runs a block on ``Frame.state`` and says whether any path falls
through. Branches are read on both sides under the facts their test proves (``Guards.refine``) and joined;
loops run to a fixed point (a few rounds); a count guarded only inside a loop body or only by an ``assert``
stays undecided.
"""

from __future__ import annotations

import ast

from .guards import nonzero_subjects
from .syntax import const_truth, dump, mentions_name
from .values import EMPTY, OTHER, ClassInfo, Frame, Func, State, Val, countish, join, join_states, kind, positive


class Statements:
    """Part of ``Analysis`` (``analysis.py``): executes statements on the abstract state."""

    def exec_block(self, fr: Frame, stmts: list[ast.stmt]) -> bool:
        """Run statements on ``fr.state``; False when no path falls through."""
        return all(self.exec_stmt(fr, s) for s in stmts)  # stops at the first statement that ends every path

    def assign(self, fr: Frame, target: ast.AST, value: Val, value_node: ast.AST | None) -> None:
        st = fr.state
        if isinstance(target, ast.Name):
            name = target.id
            st.vars[name] = value
            self.forget(fr, name)
            if value_node is not None:
                d = dump(value_node)
                if not mentions_name(d, name):
                    st.defs[name] = d
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(target.elts) and \
                    not any(isinstance(e, ast.Starred) for e in target.elts):
                vals = [self.ev(fr, e) for e in value_node.elts]
                for t, v, n in zip(target.elts, vals, value_node.elts, strict=True):
                    self.assign(fr, t, v, n)
            else:
                for t in target.elts:
                    self.assign(fr, t.value if isinstance(t, ast.Starred) else t, value, None)
        elif isinstance(target, ast.Attribute):
            base = self.ev(fr, target.value)
            self.clobber(fr)
            if countish(base) or any(kind(e) in ("O", "P", "R", "X") for e in base):
                self.mutated(fr, target.value, base, target.lineno, f".{target.attr} =")  # ``d.data = zeros``
            self.expose([value])
            self.escape(fr, target.lineno, f"stored as attribute .{target.attr}", [value])
        elif isinstance(target, ast.Subscript):
            self.ev(fr, target.slice)
            base = target.value
            while isinstance(base, ast.Subscript):  # x[a][b] = v writes into x
                self.ev(fr, base.slice)
                base = base.value
            if isinstance(base, ast.Name):
                current = self.lookup(fr, base.id)
                proven, _ = nonzero_subjects(target.slice, False)
                if base is target.value and positive(value) and any(dump(p) == dump(base) for p in proven):
                    # ``d[d == 0] = 1``: the zeros are replaced by a positive value, in place.
                    self.clobber(fr)
                    st.vars[base.id] = self.nonzero(fr, current, target.lineno, "masked assignment of zero")
                    return
                self.mutated(fr, base, current, target.lineno, "__setitem__")
                if countish(value):
                    st.vars[base.id] = join(st.vars.get(base.id, EMPTY), value)
            else:
                self.ev(fr, base)
                self.clobber(fr)  # ``labels.view(-1)[:] = x`` writes through a view
        elif isinstance(target, ast.Starred):
            self.assign(fr, target.value, value, None)

    def exec_stmt(self, fr: Frame, s: ast.stmt) -> bool:
        self.tick()
        if fr.tries:  # an exception raised from here on lands in the handler with this state
            snapshot = fr.state.copy()
            for points in fr.tries:
                points.append(snapshot)
        if isinstance(s, ast.Assign):
            if len(s.targets) == 1 and isinstance(s.targets[0], (ast.Tuple, ast.List)) and \
                    isinstance(s.value, (ast.Tuple, ast.List)):
                self.assign(fr, s.targets[0], EMPTY, s.value)
                return True
            v = self.ev(fr, s.value)
            for t in s.targets:
                self.assign(fr, t, v, s.value)
            return True
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign(fr, s.target, self.ev(fr, s.value), s.value)
            return True
        if isinstance(s, ast.AugAssign):
            as_load = ast.fix_missing_locations(ast.copy_location(
                _load_copy(s.target), s.target))
            v = self.binop(fr, s.op, as_load, s.value, s.lineno)
            self.clobber(fr)  # ``t -= x`` on a tensor changes it in place, and every view of its storage
            self.assign(fr, s.target, v, None)
            return True
        if isinstance(s, ast.Expr):
            self.ev(fr, s.value)
            return True
        if isinstance(s, ast.Return):
            fr.returns.append(self.ev(fr, s.value) if s.value is not None else OTHER)
            return False
        if isinstance(s, ast.Raise):
            if s.exc is not None:
                self.ev(fr, s.exc)
            return False
        if isinstance(s, ast.If):
            return self.branch(fr, s.test, s.body, s.orelse)
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            return self.loop(fr, s)
        if isinstance(s, (ast.Break, ast.Continue)):
            if fr.loops:
                fr.loops[-1][0 if isinstance(s, ast.Break) else 1].append(fr.state.copy())
            return False
        if isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            return self.try_(fr, s)  # type: ignore[arg-type]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            swallows = False
            for item in s.items:
                v = self.ev(fr, item.context_expr)
                # torch's contexts (no_grad, autocast, device) never swallow an exception; any other context
                # manager may (``contextlib.suppress``, a ``@contextmanager`` with try/except around its yield).
                ctx = item.context_expr
                maker = self.ev(fr, ctx.func) if isinstance(ctx, ast.Call) else v
                swallows |= not (maker and all(kind(e) == "X" and e[1].split(".")[0] == "torch" for e in maker))
                if item.optional_vars is not None:
                    self.assign(fr, item.optional_vars, OTHER if not countish(v) else v, None)
            if not swallows:
                return self.exec_block(fr, s.body)
            points: list[State] = []
            fr.tries.append(points)
            try:
                falls = self.exec_block(fr, s.body)
            finally:
                fr.tries.pop()
            joined = join_states([fr.state if falls else None, *points])
            if joined is None:
                return False
            fr.state = joined
            return True
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fr.state.vars[s.name] = self.decorated(Func(s, fr.mod, closure=fr, defaults=self.defaults_of(fr, s)))
            return True
        if isinstance(s, ast.ClassDef):
            fr.state.vars[s.name] = frozenset({ClassInfo(s, fr.mod)})
            return True
        if isinstance(s, ast.Import):
            for a in s.names:
                dotted = a.name if a.asname else a.name.split(".")[0]
                fr.state.vars[a.asname or dotted] = frozenset(
                    {("M", dotted) if self.same_dist(dotted) else ("X", dotted)})
            return True
        if isinstance(s, ast.ImportFrom):
            for a in s.names:
                if a.name != "*":
                    base = self.resolve_from(fr.mod, s.level, s.module, a.name)
                    fr.state.vars[a.asname or a.name] = self.import_symbol(base, a.name)
            return True
        if isinstance(s, ast.Match):
            subject = self.ev(fr, s.subject)
            pre = fr.state
            ends: list[State | None] = [pre.copy()]
            for case in s.cases:
                fr.state = pre.copy()
                for n in ast.walk(case.pattern):
                    if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                        fr.state.vars[n.name] = subject
                ends.append(fr.state if self.exec_block(fr, case.body) else None)
            joined = join_states(ends)
            if joined is None:
                return False
            fr.state = joined
            return True
        if isinstance(s, ast.Delete):
            return True
        # Pass, Global, Nonlocal, Assert (evaluated for its calls)
        if isinstance(s, ast.Assert):
            # ``assert d > 0`` raises on zero, but not under ``python -O``: it guards some runs, so abstain.
            self.ev(fr, s.test)
            self.weaken(fr.state, nonzero_subjects(s.test, True)[0],
                        f"line {s.lineno}: only an assert guards it, and python -O skips asserts")
        return True


    def branch(self, fr: Frame, test: ast.AST, body: list[ast.stmt], orelse: list[ast.stmt]) -> bool:
        truth = const_truth(test)
        if truth is None:
            truth = self.none_truth(fr, test)
        if truth is True:
            return self.exec_block(fr, body)
        if truth is False:
            return self.exec_block(fr, orelse)
        self.ev(fr, test)
        true_state, false_state = self.refine(fr, test, True), self.refine(fr, test, False)
        fr.state = true_state
        self.none_sides.append(self.none_side(fr, test, True))
        a = fr.state if self.exec_block(fr, body) else None
        self.none_sides.pop()
        fr.state = false_state
        self.none_sides.append(self.none_side(fr, test, False))
        b = fr.state if self.exec_block(fr, orelse) else None
        self.none_sides.pop()
        joined = join_states([a, b])
        if joined is None:
            return False
        fr.state = joined
        return True

    def loop(self, fr: Frame, s: ast.For | ast.AsyncFor | ast.While) -> bool:
        infinite = isinstance(s, ast.While) and const_truth(s.test) is True
        if isinstance(s, ast.While):
            self.ev(fr, s.test)
            item = OTHER
        else:
            it = self.ev(fr, s.iter)
            item = it if countish(it) else OTHER
        entry = fr.state.copy()
        start = entry.copy()
        breaks: list[State] = []
        for _ in range(4):
            fr.state = entry.copy()
            if isinstance(s, ast.While):
                fr.state = self.refine(fr, s.test, True)
            else:
                self.assign(fr, s.target, item, None)
            fr.loops.append(([], []))
            falls = self.exec_block(fr, s.body)
            brk, cont = fr.loops.pop()
            breaks = brk
            end = join_states([fr.state if falls else None, *cont])
            new_entry = join_states([entry, end]) or entry
            if new_entry.vars == entry.vars:
                break
            entry = new_entry
        if not infinite:
            self.loop_guards(start, entry, s.lineno)
        if infinite:
            joined = join_states(breaks)
            if joined is None:
                return False
            fr.state = joined
            return True
        fr.state = entry
        if isinstance(s, ast.While):
            fr.state = self.refine(fr, s.test, False)
        falls = self.exec_block(fr, s.orelse)
        joined = join_states([fr.state if falls else None, *breaks])
        if joined is None:
            return False
        fr.state = joined
        return True

    @staticmethod
    def loop_guards(start: State, entry: State, line: int) -> None:
        """A count guarded only inside a loop body: the path that skips the body may be impossible
        (``for _ in range(3)``), so the unguarded count from before the loop is undecided, not proven."""
        for name, v in entry.vars.items():
            before = start.vars.get(name, EMPTY)
            if any(kind(e) == "C" for e in before) and any(kind(e) == "G" and e not in before for e in v):
                entry.vars[name] = frozenset(
                    ("U", f"line {line}: guarded inside a loop that may not run") if e in before and kind(e) == "C"
                    else e for e in v)

    def try_(self, fr: Frame, s: ast.Try) -> bool:
        pre = fr.state.copy()
        points: list[State] = []  # the state before each statement of the body: where an exception may leave it
        fr.tries.append(points)
        try:
            body_falls = self.exec_block(fr, s.body)
        finally:
            fr.tries.pop()
        after_body = fr.state if body_falls else None
        ends: list[State | None] = []
        for h in s.handlers:
            fr.state = join_states([pre, *points, after_body]) or pre.copy()
            if h.type is not None:
                self.ev(fr, h.type)
            if h.name:
                fr.state.vars[h.name] = OTHER
            ends.append(fr.state if self.exec_block(fr, h.body) else None)
        if after_body is not None:
            fr.state = after_body
            ends.append(fr.state if self.exec_block(fr, s.orelse) else None)
        joined = join_states(ends)
        if s.finalbody:
            fr.state = joined or pre.copy()
            falls = self.exec_block(fr, s.finalbody)
            return falls and joined is not None
        if joined is None:
            return False
        fr.state = joined
        return True


def _load_copy(target: ast.AST) -> ast.expr:
    """The load form of an augmented-assignment target."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return node
