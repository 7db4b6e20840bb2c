"""Known operations for the static reading: what tensor methods and library functions do to a count.

The ``Operations`` mixin of ``Analysis`` models ``.sum()`` / ``count_nonzero`` over a mask (a new count),
value-preserving methods, clamps and maxima (guards when the floor is positive), divisions and reciprocals
(recorded), constructors (``ones``/``zeros``/``full``), wrappers such as ``torch.compile`` and
``functools.partial``, and in-place methods (which void a guard). Anything else a count goes through makes
it undecided.
"""

from __future__ import annotations

import ast
from typing import Any

from .syntax import (
    CLAMPS,
    COUNTERS,
    DIVIDES,
    INPLACE_DUNDERS,
    INSPECT,
    LIBRARIES,
    MASKERS,
    MEAN_LOSSES,
    PRESERVE,
    RDIVIDES,
    RECIPROCALS,
    REFLECTIVE,
    TMAXES,
    WRAPPERS,
    strip_starred,
)
from .values import (
    MASK,
    NONE,
    OTHER,
    POS_NUM,
    POS_TENSOR,
    ZERO,
    Frame,
    Func,
    Unreadable,
    Val,
    countish,
    join,
    kind,
    positive,
)


class Operations:
    """Part of ``Analysis`` (``analysis.py``): the effect of tensor methods and library functions."""

    def method(self, fr: Frame, node: ast.Call, m: str, recv: Val, recv_node: ast.AST) -> Val:
        line = node.lineno
        pos, kws, spread = self.args_of(fr, node)
        has_mask = any(kind(e) == "B" for e in recv)
        if m in COUNTERS:
            if has_mask:
                return join(self.new_count(fr, line), recv - MASK) if recv - MASK else self.new_count(fr, line)
            return recv if countish(recv) else self.opaque_sum(line, recv)
        if m in ("numel", "nelement", "__len__") or (m == "size" and pos and pos[0] == ZERO):
            if any(kind(e) == "S" for e in recv):
                return self.new_count(fr, line)
            return OTHER
        if m in MASKERS:
            return MASK
        if m in ("mean", "nanmean") and has_mask:
            return self.new_count(fr, line)  # the share of kept labels: 0 when every label is masked
        if m in ("mean", "nanmean") and any(kind(e) == "S" for e in recv):
            self.mean_route(fr, line, f".{m}() of a masked selection", None, None)
        if m in PRESERVE:
            return recv
        if m in CLAMPS:
            floor = pos[0] if pos else kws.get("min")
            floors = [floor] if floor is not None and floor != NONE else [ZERO]
            out = self.floored(fr, recv, floors, line, f".{m}()")
            out = self.capped(fr, out, pos[1] if len(pos) > 1 else kws.get("max"), line, f".{m}()")
            if m.endswith("_"):
                self.clobber(fr)
                if isinstance(recv_node, ast.Name):
                    fr.state.vars[recv_node.id] = out
            return out
        if m in ("max", "maximum", "fmax") and (pos or "other" in kws):
            other = pos[0] if pos else kws["other"]
            return self.floored(fr, recv, [other], line, f".{m}()", tensor_only=True)
        if m == "max" and not pos:
            return recv
        if m in RDIVIDES:
            self.division(fr, line, recv)
            return OTHER
        if m in DIVIDES:
            divisor = pos[0] if pos else kws.get("other", OTHER)
            self.division(fr, line, divisor)
            return frozenset({("U", f"line {line}: the count is divided")}) if countish(recv) else OTHER
        if m in RECIPROCALS:
            self.division(fr, line, recv)
            return OTHER
        if m in ("new_ones",):
            return POS_TENSOR
        if m in ("new_zeros",):
            return ZERO
        if m in ("new_tensor", "new_full", "fill_"):
            if m == "fill_":
                recv = self.mutated(fr, recv_node, recv, line, m)
            v = pos[-1] if pos else OTHER
            return v if not countish(recv) else join(recv, v)
        if m in INSPECT:
            return OTHER
        if (m.endswith("_") and not m.startswith("_")) or m in INPLACE_DUNDERS:
            # In-place tensor arithmetic (x.add_(count)): the receiver now carries the argument.
            out = self.mutated(fr, recv_node, recv, line, m)
            if any(countish(v) for v in [*pos, *kws.values()]):
                out = frozenset({("U", f"line {line}: the count goes through .{m}(), which is not modelled")})
                if isinstance(recv_node, ast.Name):
                    fr.state.vars[recv_node.id] = out
            return out if countish(out) else OTHER
        if countish(recv):
            self.escape(fr, line, f".{m}(), which is not modelled (it may divide by it)", [recv])
            return frozenset({("U", f"line {line}: the count goes through .{m}(), which is not modelled")})
        vals = [*pos, *kws.values(), *spread]
        self.escape(fr, line, f".{m}()", vals)
        self.expose(vals)
        if any(countish(v) for v in vals):
            return frozenset({("U", f"line {line}: the count is passed to .{m}(), which is not modelled")})
        return OTHER


    @staticmethod
    def opaque_sum(line: int, of: Val) -> Val:
        """A sum over something the reading cannot tell from a label mask (``(labels + 100).bool().sum()``) may be
        a label count in another spelling: as a divisor it is undecided, not ignored. A sum of a known positive or
        zero value stays what it is."""
        if of and all(kind(e) in ("K", "Z", "N", "F", "T") for e in of):
            return OTHER
        return frozenset({("Q", f"line {line}: a sum the reading cannot tell from a label count divides here")})

    def invoke_values(self, fr: Frame, callee: Val, pos: list[Val], line: int) -> Val:
        """Call each readable function in ``callee`` (arguments not given are unknown)."""
        funcs = [f for f in callee if isinstance(f, Func)]
        return join(*(self.call_func(fr, f, pos, {}, [] if pos else [OTHER], line) for f in funcs)) if funcs \
            else OTHER

    def library(self, fr: Frame, node: ast.Call, path: str, pos: list[Val], kws: dict[str, Val],
                spread: list[Val]) -> Val:
        line = node.lineno
        root = path.split(".", maxsplit=1)[0]
        fname = path.rsplit(".", 1)[-1]
        allv = [*pos, *kws.values(), *spread]
        first = pos[0] if pos else OTHER
        inplace = (fname.endswith("_") and not fname.startswith("_")) or fname in INPLACE_DUNDERS
        flagged = any(k.arg == "inplace" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                      for k in node.keywords)
        if (inplace and node.args) or "out" in kws or flagged:
            # ``torch.Tensor.zero_(d)``, ``torch.ne(a, b, out=labels)``, ``F.dropout(x, inplace=True)``.
            target = strip_starred(node.args[0]) if (inplace or flagged) and node.args else next(
                (k.value for k in node.keywords if k.arg == "out"), node)
            self.mutated(fr, target, self.ev(fr, target) if target is not node else OTHER, line, fname)
        if fname == "checkpoint" and pos:  # torch.utils.checkpoint.checkpoint(fn, *args) calls fn(*args)
            return self.invoke_values(fr, first, pos[1:], line)
        if fname not in WRAPPERS | {"partial", "staticmethod", "classmethod"}:
            # A function of ours handed to library code (map, a hook, another distribution) may be called there.
            for v in allv:
                self.invoke_values(fr, frozenset(e for e in v if isinstance(e, Func)), [], line)
        if root == "builtins" and fname in REFLECTIVE and not self.muted:
            raise Unreadable(f"line {line}: {fname}() is reflective code the reading does not model")
        if root not in LIBRARIES:
            if allv and not self.muted:  # handed data: it may compute a loss (a stock mean) the reading never sees
                self.foreign.append((fr.mod.file, line, fr.label, path))
            self.escape(fr, line, f"{path}() from another distribution", allv)
            if any(countish(v) for v in allv):
                return frozenset({("U", f"line {line}: the count is passed to {path}(), outside the distribution")})
            return OTHER
        if root == "torch" and fname in MEAN_LOSSES:
            at, legacy = MEAN_LOSSES[fname]
            reduction = kws.get("reduction", pos[at] if len(pos) > at else None)
            if any(k in kws for k in ("size_average", "reduce")) or \
                    any(len(pos) > i and pos[i] != NONE for i in legacy):
                reduction = OTHER  # the legacy arguments decide the reduction instead
            labels = node.args[1] if fname[0].islower() and len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "target"), None)
            self.mean_route(fr, line, f"{fname}()", reduction, labels)
        if fname in ("mean", "nanmean") and root == "torch" and any(kind(e) == "B" for e in first):
            return self.new_count(fr, line)
        if fname in ("mean", "nanmean") and root == "torch" and any(kind(e) == "S" for e in first):
            self.mean_route(fr, line, f"torch.{fname}() of a masked selection", None, None)
        if fname in WRAPPERS and pos:
            return first
        if fname in WRAPPERS and not pos:
            return frozenset({("X", "functools.wraps")})  # a decorator factory: returns a wrapper
        if fname == "partial" and pos:
            out: set[Any] = set()
            for x in first:
                if isinstance(x, Func):
                    out.add(Func(x.node, x.mod, x.closure, (*x.pre_args, *pos[1:]), (*x.pre_kw, *kws.items()),
                                 x.defaults))
                else:
                    out.add(("R", f"line {line}: functools.partial of something other than a readable function"))
            return frozenset(out)
        if fname == "max" and root == "builtins":
            if len(pos) < 2:
                return first if countish(first) else OTHER
            floors = [v for v in pos if positive(v)]
            rest = join(*(v for v in pos if not positive(v)))
            if floors:
                return join(self.nonzero(fr, rest, line, "max() with a positive floor"), *floors)
            return self.floored(fr, rest, pos, line, "max()")
        if fname == "min" and root == "builtins":
            return join(*pos) if any(countish(v) for v in pos) else OTHER
        if root == "builtins" and fname in ("float", "int", "abs", "round"):
            return first
        if root == "builtins" and fname == "len":
            return self.new_count(fr, line) if any(kind(e) == "S" for e in first) else OTHER
        if root == "builtins" and fname == "sum":
            return first if countish(first) else OTHER
        if fname in ("staticmethod", "classmethod"):
            return first
        if fname in COUNTERS:
            if any(kind(e) == "B" for e in first):
                return self.new_count(fr, line)
            return first if countish(first) else self.opaque_sum(line, first)
        if fname == "numel":
            return self.new_count(fr, line) if any(kind(e) == "S" for e in first) else OTHER
        if fname in MASKERS:
            return MASK
        if fname in CLAMPS:
            floor = pos[1] if len(pos) > 1 else kws.get("min")
            out = self.floored(fr, first, [floor] if floor is not None and floor != NONE else [ZERO], line,
                               f"{fname}()")
            return self.capped(fr, out, pos[2] if len(pos) > 2 else kws.get("max"), line, f"{fname}()")
        if fname in ("max", *TMAXES) and root == "torch" and (len(pos) >= 2 or "other" in kws):
            other = pos[1] if len(pos) > 1 else kws["other"]
            if positive(first, tensor_only=True):
                first, other = other, first
            return self.floored(fr, first, [other], line, f"torch.{fname}()", tensor_only=True)
        if fname == "max" and root == "torch":
            return first if countish(first) else OTHER
        if fname in ("ones", "ones_like"):
            return POS_TENSOR
        if fname in ("zeros", "zeros_like"):
            return ZERO
        if fname in ("full", "full_like"):
            fill = pos[1] if len(pos) > 1 else kws.get("fill_value", OTHER)
            return POS_TENSOR if positive(fill) and not countish(fill) else fill
        if fname in PRESERVE:
            return POS_TENSOR if first == POS_NUM else first
        if fname in RDIVIDES:
            self.division(fr, line, first)
            return OTHER
        if fname in DIVIDES:
            divisor = pos[1] if len(pos) > 1 else kws.get("other", OTHER)
            self.division(fr, line, divisor)
            return frozenset({("U", f"line {line}: the count is divided")}) if countish(first) else OTHER
        if fname in RECIPROCALS:
            self.division(fr, line, first)
            return OTHER
        if fname in INSPECT:
            return OTHER
        if any(countish(v) for v in allv):
            self.escape(fr, line, f"{path}(), which is not modelled (it may divide by it)", allv)
            return frozenset({("U", f"line {line}: the count goes through {path}(), which is not modelled")})
        return OTHER
