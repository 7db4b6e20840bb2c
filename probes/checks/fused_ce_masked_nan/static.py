"""The static detector: prove from source that ``UnslothFusedLoss.forward`` guards its divisor, or abstain.

Nothing here imports torch or zoo. ``analyze_source(text)`` reads one module's text with ``ast``; with a
``read_module`` callback it follows helpers, re-exports and base classes into other modules of the same
distribution. ``analyze_files`` does the same over a ``{relative path: text}`` mapping (the scan's wheel
members) and ``detect_installed`` over the installed package, found with ``importlib.util.find_spec``.

The reading is a small abstract interpretation. It locates the forward (through re-exports, inheritance,
``forward = staticmethod(_f)``, module-level ``forward`` assignments and class definitions under ``if``),
then walks it statement by statement, following calls into functions it can read (nested, same module, same
distribution, through ``torch.compile`` / ``torch.func`` / ``functools.partial`` wrappers, and the
``loss_function`` argument as bound at the module's ``.apply`` / mapping call sites). Each value carries
what is known about it: a label count (a ``sum``/``count_nonzero`` over a comparison mask, or the size of a
masked selection) that may be zero, the same count after a recognised zero guard, or a count that went
through something the reading cannot judge. Variable names never matter; assignments are followed.

Recognised guards: ``clamp``/``clamp_min``/``clip`` with a positive floor; builtin ``max`` with a positive
argument; ``torch.max``/``torch.maximum``/``fmax`` against a positive tensor (``torch.ones_like(d)``);
``torch.where``/``masked_fill``/conditional expressions that replace a zero with a positive value; an ``if``
on ``== 0`` / ``<= 0`` / ``not ...`` (or the positive forms) of the divisor or of the count whose zero branch
returns, raises or replaces the divisor; any helper whose body does one of those on every return path.

Verdicts: ``vulnerable`` when an unguarded count reaches a division (``/``, ``//``, ``%``, ``div``,
``reciprocal``, ...); ``fixed`` when every division the count reaches is dominated by a guard and the count
escapes nowhere unguarded; ``absent`` when there is no module, class or forward; ``unknown`` otherwise, with
the reason (the count escapes into code that cannot be read, a guard that covers only some conditions, a
shape the reading does not model).

Limits, stated so a verdict can be weighed: the reading is path-insensitive, so a count guarded on one
branch of an ``if`` and not on the other is ``vulnerable`` even when the two conditions are correlated
(the runtime detector then disagrees and the cell reads ``inconsistent``); a guard that only an ``assert``,
a loop body or a compound condition provides gives ``unknown``. An in-place change of a guarded count
(``d.zero_()``, also through an alias or a helper) voids the guard; an in-place change of the labels after a
zero test on the count expression voids that test when it is made through the same name or a call of ours,
not through an alias of the labels.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CE_REL = ("fused_losses", "cross_entropy_loss.py")
CE_MODULE = "unsloth_zoo.fused_losses.cross_entropy_loss"
CE_PATH = "unsloth_zoo/fused_losses/cross_entropy_loss.py"
CLASS_NAME = "UnslothFusedLoss"
MAX_STEPS = 400_000  # expression evaluations per analysis; the real module needs a few thousand
MAX_DEPTH = 16  # nested calls followed

ModuleReader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class StaticVerdict:
    verdict: str  # vulnerable | fixed | absent | unknown
    reason: str
    file: str | None = None
    forward_line: int | None = None
    evidence_line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- abstract values
# A value is a frozenset of facts. Count facts (the ones the verdict is about):
#   ("C", file, line)        a label count that may be zero, computed at file:line
#   ("G", file, line, how)   a count after a recognised zero guard at file:line
#   ("U", reason)            a count that went through something the reading cannot judge
# Other facts: ("K", "num"|"tensor"|"any") positive; ("Z",) zero; ("N",) negative; ("O",) anything else; ("B",) a
# comparison mask; ("S",) a masked selection; ("P", name) a forward parameter; ("M", dotted) a module
# of the distribution; ("X", dotted) something from another distribution; ("R", reason) a name that
# cannot be resolved; Func and ClassInfo objects.

Val = frozenset
OTHER: Val = frozenset({("O",)})
ZERO: Val = frozenset({("Z",)})
NEG: Val = frozenset({("N",)})
MASK: Val = frozenset({("B",)})
SEL: Val = frozenset({("S",)})
POS_NUM: Val = frozenset({("K", "num")})
POS_TENSOR: Val = frozenset({("K", "tensor")})
EMPTY: Val = frozenset()
COUNT_KINDS = {"C", "G", "U"}


def _kind(e: Any) -> str:
    return e[0] if isinstance(e, tuple) else type(e).__name__


def countish(v: Val) -> bool:
    return any(_kind(e) in COUNT_KINDS for e in v)


def unguarded(v: Val) -> bool:
    return any(_kind(e) in ("C", "U") for e in v)


def join(*vals: Val) -> Val:
    out: set[Any] = set()
    for v in vals:
        out |= v
    return frozenset(out)


def positive(v: Val, *, tensor_only: bool = False) -> bool:
    """Every fact says strictly positive (a positive constant or tensor, or a guarded count)."""
    if not v:
        return False
    for e in v:
        k = _kind(e)
        if k == "G":
            continue
        if k == "K" and not (tensor_only and e[1] == "num"):
            continue
        return False
    return True


@dataclass(eq=False)
class ModuleCtx:
    name: str
    file: str
    tree: ast.Module
    globals_cache: dict[str, Val] = field(default_factory=dict)
    star: list[str] = field(default_factory=list)
    _bindings: dict[str, list[tuple[ast.AST, bool]]] | None = None


@dataclass(eq=False)
class Func:
    """A callable the reading can enter: a def or lambda, its module, its closure and pre-bound arguments."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    mod: ModuleCtx
    closure: Frame | None = None
    pre_args: tuple[Val, ...] = ()
    pre_kw: tuple[tuple[str, Val], ...] = ()

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")

    def __hash__(self) -> int:
        return id(self)


@dataclass(eq=False)
class ClassInfo:
    node: ast.ClassDef
    mod: ModuleCtx

    def __hash__(self) -> int:
        return id(self)


@dataclass
class State:
    vars: dict[str, Val] = field(default_factory=dict)
    facts: frozenset[str] = frozenset()  # dumps of expressions known nonzero here
    defs: dict[str, str] = field(default_factory=dict)  # name -> dump of the expression it was assigned

    def copy(self) -> State:
        return State(dict(self.vars), self.facts, dict(self.defs))


def join_states(states: Iterable[State | None]) -> State | None:
    live = [s for s in states if s is not None]
    if not live:
        return None
    out = live[0].copy()
    for s in live[1:]:
        for k, v in s.vars.items():
            out.vars[k] = join(out.vars.get(k, EMPTY), v)
        out.facts &= s.facts
        out.defs = {k: d for k, d in out.defs.items() if s.defs.get(k) == d}
    return out


@dataclass(eq=False)
class Frame:
    mod: ModuleCtx
    func: Func | None
    state: State
    local_names: frozenset[str]
    label: str
    returns: list[Val] = field(default_factory=list)
    loops: list[tuple[list[State], list[State]]] = field(default_factory=list)  # (breaks, continues)
    class_scope: dict[str, Val] | None = None


@dataclass(frozen=True)
class Division:
    file: str
    line: int
    where: str
    divisor: Val


@dataclass(frozen=True)
class Escape:
    file: str
    line: int
    where: str
    what: str


class Unreadable(Exception):
    """The analysis ran past its budget; the verdict is unknown."""


# --------------------------------------------------------------------------- tables

PRESERVE = {"to", "float", "double", "half", "bfloat16", "long", "int", "type", "type_as", "view", "view_as",
            "reshape", "reshape_as", "ravel", "flatten", "squeeze", "unsqueeze", "contiguous", "detach", "clone",
            "cpu", "cuda", "item", "expand", "expand_as", "abs", "mean", "requires_grad_", "squeeze_",
            "unsqueeze_", "detach_", "as_tensor", "tensor", "scalar_tensor", "asarray", "atleast_1d"}
COUNTERS = {"sum", "count_nonzero", "nansum"}
MASKERS = {"ne", "eq", "gt", "ge", "lt", "le", "not_equal", "greater", "less", "greater_equal", "less_equal",
           "logical_and", "logical_or", "logical_not", "logical_xor", "isin", "isfinite", "isnan", "isinf",
           "bitwise_and", "bitwise_or", "bitwise_not", "ne_", "eq_"}
CLAMPS = {"clamp", "clamp_min", "clip", "clamp_", "clamp_min_", "clip_"}
TMAXES = {"maximum", "fmax"}
DIVIDES = {"div", "div_", "divide", "divide_", "true_divide", "true_divide_", "floor_divide", "floor_divide_",
           "remainder", "fmod", "__truediv__", "__rtruediv__", "__floordiv__"}
RECIPROCALS = {"reciprocal", "reciprocal_", "rsqrt", "rsqrt_"}
INSPECT = {"is_tensor", "is_floating_point", "numel", "dim", "ndimension", "size", "element_size", "isinstance",
           "hasattr", "getattr", "print", "str", "repr", "callable", "id", "type", "any", "all", "bool",
           "_assert", "is_grad_enabled", "tolist", "nelement", "get_device", "is_contiguous", "format",
           "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "is_compiling"}
WRAPPERS = {"compile", "disable", "grad_and_value", "grad", "vmap", "checkpoint", "cache", "lru_cache",
            "staticmethod", "classmethod", "wraps", "no_grad", "inference_mode", "jit", "script"}
LIBRARIES = {"torch", "math", "numpy", "functools", "builtins", "operator", "typing", "os", "sys", "logging",
             "warnings", "inspect", "itertools", "contextlib", "dataclasses", "triton"}
BUILTIN_NAMES = set(dir(builtins))


def _num(node: ast.AST) -> float | None:
    """A numeric literal (with unary minus), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _num(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def const_truth(test: ast.AST) -> bool | None:
    """The truth of a test that does not depend on the run (``False and ...``), else None."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = const_truth(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [const_truth(v) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in parts else (True if all(p is True for p in parts) else None)
        return True if True in parts else (False if all(p is False for p in parts) else None)
    return None


def strip(node: ast.AST) -> ast.AST:
    """The expression under value-preserving wrappers: ``d.item()``, ``float(d)``, ``d.to(...)``, ``(d := e)``."""
    while True:
        if isinstance(node, ast.NamedExpr):
            node = node.target
            continue
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in PRESERVE | {"any", "all", "bool"} and not node.args:
                node = f.value
                continue
            if isinstance(f, ast.Attribute) and f.attr in ("to", "type"):
                node = f.value
                continue
            if isinstance(f, ast.Name) and f.id in ("float", "int", "bool", "abs") and len(node.args) == 1:
                node = node.args[0]
                continue
            if isinstance(f, ast.Attribute) and f.attr in ("any", "all", "as_tensor", "tensor") and \
                    isinstance(f.value, ast.Name) and len(node.args) == 1:
                node = node.args[0]
                continue
        return node


def dump(node: ast.AST) -> str:
    return ast.dump(strip(node))


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
        c = _num(right)
        subject = left
        if c is None:
            c = _num(left)
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


def _mentions_name(d: str, name: str) -> bool:
    return f"id='{name}'" in d


def _assigned_names(node: ast.AST) -> set[str]:
    """Names a function body binds (its locals), not descending into nested scopes."""
    out: set[str] = set()
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            stack.extend(n.decorator_list)
            continue
        elif isinstance(n, ast.Lambda):
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        stack.extend(ast.iter_child_nodes(n))
    return out


def _target_names(t: ast.AST) -> list[str]:
    """Names an assignment target binds (``a``, ``a, (b, *c)``); not the base of ``a.x`` or ``a[i]``."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    return []


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    a = node.args
    return [p.arg for p in [*a.posonlyargs, *a.args]]


# --------------------------------------------------------------------------- the analysis


class Analysis:
    """One reading of one entry module. See the module docstring."""

    def __init__(self, entry_name: str, entry_file: str, tree: ast.Module, reader: ModuleReader | None):
        self.reader = reader
        self.top = entry_name.split(".", maxsplit=1)[0]
        self.entry = ModuleCtx(entry_name, entry_file, tree)
        self.modules: dict[str, ModuleCtx | None] = {entry_name: self.entry}
        self.divisions: list[Division] = []
        self.escapes: list[Escape] = []
        self.sources: list[tuple[str, int]] = []
        self.memo: dict[tuple[Any, ...], Val] = {}
        self.stack: list[Func] = []
        self.steps = 0
        self.resolving: set[tuple[str, str]] = set()
        self.param_cache: dict[str, Val] = {}
        self.forward_order: list[str] = []
        self.poisoned: set[Any] = set()  # count facts some in-place method changed (aliases included)
        self.muted = 0  # > 0 while evaluating module-level code: nothing there is on the forward's path

    def reset(self) -> None:
        """Forget what one forward's reading recorded, before reading the next."""
        self.divisions, self.escapes, self.sources = [], [], []
        self.memo, self.param_cache, self.stack = {}, {}, []
        self.poisoned = set()
        self.steps = 0

    # ----------------------------------------------------------------- modules and globals

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
                        for n in _target_names(t):
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
            if name in BUILTIN_NAMES:
                return frozenset({("X", f"builtins.{name}")})
            return None
        # An unconditional binding replaces everything before it; conditional ones join.
        vals: list[Val] = []
        for stmt, conditional in binds:
            v = self.bind_value(mod, name, stmt)
            vals = [*vals, v] if conditional else [v]
        return join(*vals)

    def bind_value(self, mod: ModuleCtx, name: str, stmt: ast.AST) -> Val:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return frozenset({Func(stmt, mod)})
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
                    found.append(frozenset({Func(s, cls.mod)}))
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

    # ----------------------------------------------------------------- recording

    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Unreadable("the reading ran past its step budget")

    def new_count(self, fr: Frame, line: int) -> Val:
        if not self.muted:
            self.sources.append((fr.mod.file, line))
        return frozenset({("C", fr.mod.file, line)})

    def division(self, fr: Frame, line: int, divisor: Val) -> None:
        if countish(divisor) and not self.muted:
            self.divisions.append(Division(fr.mod.file, line, fr.label, divisor))

    def escape(self, fr: Frame, line: int, what: str, vals: Iterable[Val]) -> None:
        if any(unguarded(v) for v in vals) and not self.muted:
            self.escapes.append(Escape(fr.mod.file, line, fr.label, what))

    # ----------------------------------------------------------------- statements

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
                if not _mentions_name(d, name):
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
            self.ev(fr, target.value)
            if isinstance(target.value, ast.Name):
                self.forget(fr, target.value.id)
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
                    self.forget(fr, base.id)
                    st.vars[base.id] = self.nonzero(fr, current, target.lineno, "masked assignment of zero")
                    return
                self.mutated(fr, base, current, target.lineno, "__setitem__")
                if countish(value):
                    st.vars[base.id] = join(st.vars.get(base.id, EMPTY), value)
            else:
                self.ev(fr, base)
        elif isinstance(target, ast.Starred):
            self.assign(fr, target.value, value, None)

    def exec_stmt(self, fr: Frame, s: ast.stmt) -> bool:
        self.tick()
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
            for item in s.items:
                v = self.ev(fr, item.context_expr)
                if item.optional_vars is not None:
                    self.assign(fr, item.optional_vars, OTHER if not countish(v) else v, None)
            return self.exec_block(fr, s.body)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fr.state.vars[s.name] = frozenset({Func(s, fr.mod, closure=fr)})
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
        return st

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
                if any(_kind(e) == "C" for e in v):
                    st.vars[n] = frozenset(("U", reason) if _kind(e) == "C" else e for e in v)

    def floored(self, fr: Frame, subject: Val, floors: list[Val], line: int, what: str, *,
                tensor_only: bool = False) -> Val:
        """``subject`` after a clamp/max against ``floors``: guarded when a floor is provably positive, unchanged
        when every floor provably is not (zero, negative, another count), opaque in between."""
        if any(positive(f, tensor_only=tensor_only) for f in floors):
            return self.nonzero(fr, subject, line, f"{what} with a positive floor")
        if floors and all(f and all(_kind(e) in ("Z", "N", "C") for e in f) for f in floors):
            return subject
        if countish(subject):
            return frozenset({("U", f"line {line}: {what} with a floor the reading cannot prove positive")})
        return subject

    def mutated(self, fr: Frame, recv_node: ast.AST, recv: Val, line: int, m: str) -> Val:
        """An in-place method on a value: facts about the name lapse; a count so changed is no longer judged."""
        if isinstance(recv_node, ast.Name):
            self.forget(fr, recv_node.id)
        counts = {e for e in recv if _kind(e) in COUNT_KINDS}
        self.poisoned |= counts
        if not counts:
            return recv
        out = frozenset({("U", f"line {line}: the count is changed in place by .{m}()")})
        if isinstance(recv_node, ast.Name):
            fr.state.vars[recv_node.id] = out
        return out

    def forget(self, fr: Frame, name: str) -> None:
        """Drop the expression facts and definitions that mention ``name`` (it was rebound or mutated)."""
        st = fr.state
        st.facts = frozenset(f for f in st.facts if not _mentions_name(f, name))
        st.defs = {k: d for k, d in st.defs.items() if not _mentions_name(d, name) and k != name}

    def nonzero(self, fr: Frame, v: Val, line: int, how: str) -> Val:
        out: set[Any] = set()
        for e in v:
            k = _kind(e)
            if k in ("C", "U"):
                out.add(("G", fr.mod.file, line, f"{how} in {fr.label}"))
            elif k in ("O", "P"):
                out.add(("K", "any") if k == "O" else e)
            elif k == "Z":
                continue  # cannot be zero here: this path is infeasible for that fact
            else:
                out.add(e)
        return frozenset(out)

    def branch(self, fr: Frame, test: ast.AST, body: list[ast.stmt], orelse: list[ast.stmt]) -> bool:
        truth = const_truth(test)
        if truth is True:
            return self.exec_block(fr, body)
        if truth is False:
            return self.exec_block(fr, orelse)
        self.ev(fr, test)
        true_state, false_state = self.refine(fr, test, True), self.refine(fr, test, False)
        fr.state = true_state
        a = fr.state if self.exec_block(fr, body) else None
        fr.state = false_state
        b = fr.state if self.exec_block(fr, orelse) else None
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
            if any(_kind(e) == "C" for e in before) and any(_kind(e) == "G" and e not in before for e in v):
                entry.vars[name] = frozenset(
                    ("U", f"line {line}: guarded inside a loop that may not run") if e in before and _kind(e) == "C"
                    else e for e in v)

    def try_(self, fr: Frame, s: ast.Try) -> bool:
        pre = fr.state.copy()
        body_falls = self.exec_block(fr, s.body)
        after_body = fr.state if body_falls else None
        ends: list[State | None] = []
        for h in s.handlers:
            fr.state = join_states([pre, after_body]) or pre.copy()
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

    # ----------------------------------------------------------------- expressions

    def lookup(self, fr: Frame, name: str) -> Val:
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
            n = _num(node)
            if n is None:
                return OTHER
            return POS_NUM if n > 0 else (ZERO if n == 0 else NEG)
        if isinstance(node, ast.Name):
            return self.lookup(fr, node.id)
        if isinstance(node, ast.Attribute):
            return self.attribute(fr, node)
        if isinstance(node, ast.Subscript):
            base = self.ev(fr, node.value)
            idx = self.ev(fr, node.slice)
            if isinstance(node.value, ast.Attribute) and node.value.attr == "shape" and \
                    any(_kind(e) == "S" for e in self.ev(fr, node.value.value)):
                return self.new_count(fr, node.lineno)
            if any(_kind(e) == "B" for e in idx) and not countish(base):
                return SEL
            return base if countish(base) or any(_kind(e) in ("B", "S") for e in base) else OTHER
        if isinstance(node, ast.BinOp):
            return self.binop(fr, node.op, node.left, node.right, node.lineno)
        if isinstance(node, ast.UnaryOp):
            n = _num(node)
            if n is not None:
                return POS_NUM if n > 0 else (ZERO if n == 0 else NEG)
            v = self.ev(fr, node.operand)
            if isinstance(node.op, ast.Not):
                return OTHER
            if isinstance(node.op, ast.Invert) and any(_kind(e) == "B" for e in v):
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
            if all(any(_kind(e) == "B" for e in v) for v in vals):
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
            return frozenset({Func(node, fr.mod, closure=fr)})
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

    def attribute(self, fr: Frame, node: ast.Attribute) -> Val:
        base = self.ev(fr, node.value)
        out: set[Any] = set()
        for e in base:
            k = _kind(e)
            if k == "M":
                m = self.load(e[1])
                v = self.global_value(m, node.attr) if m is not None else None
                if v is None:
                    sub = f"{e[1]}.{node.attr}"
                    v = frozenset({("M", sub)}) if self.load(sub) is not None else frozenset(
                        {("R", f"{sub} cannot be read")})
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
            e = _num(right)
            if e is not None and e < 0:
                self.division(fr, line, lv)
        if isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) and \
                any(_kind(e) == "B" for e in lv) and any(_kind(e) == "B" for e in rv):
            return MASK
        if countish(lv) or countish(rv):
            return frozenset({("U", f"line {line}: the count goes through arithmetic "
                                    f"({type(op).__name__}) that is not a recognised guard")})
        if isinstance(op, ast.Mult) and any(_kind(e) == "B" for e in lv | rv):
            return MASK
        return OTHER

    def conditional(self, fr: Frame, test: ast.AST, body: ast.AST, orelse: ast.AST) -> Val:
        """``body if test else orelse`` and ``torch.where(test, body, orelse)``."""
        truth = const_truth(test)
        if truth is not None:
            return self.ev(fr, body if truth else orelse)
        self.ev(fr, test)
        saved = fr.state
        how = "a conditional that replaces zero"
        fr.state = self.refine(fr, test, True, how=how)
        a = self.ev(fr, body)
        fr.state = self.refine(fr, test, False, saved, how)
        b = self.ev(fr, orelse)
        fr.state = saved
        return join(a, b)

    # ----------------------------------------------------------------- calls

    def call(self, fr: Frame, node: ast.Call) -> Val:
        f = node.func
        line = node.lineno
        # torch.where and masked_fill read their branches under the condition.
        name = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else None)
        if name == "where" and len(node.args) == 3 and self.is_library(fr, f):
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
            if name.endswith("_") and isinstance(f.value, ast.Name):
                fr.state.vars[f.value.id] = out
            return out

        if isinstance(f, ast.Attribute):
            recv = self.ev(fr, f.value)
            if recv and all(_kind(e) in ("M", "X", "R") or isinstance(e, (ClassInfo, Func)) for e in recv):
                if f.attr in INSPECT and all(_kind(e) == "R" for e in recv):
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
            return any(_kind(e) == "X" for e in base)
        if isinstance(f, ast.Name):
            return any(_kind(e) == "X" for e in self.lookup(fr, f.id))
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

    def method(self, fr: Frame, node: ast.Call, m: str, recv: Val, recv_node: ast.AST) -> Val:
        line = node.lineno
        pos, kws, spread = self.args_of(fr, node)
        has_mask = any(_kind(e) == "B" for e in recv)
        if m in COUNTERS:
            if has_mask:
                return join(self.new_count(fr, line), recv - MASK) if recv - MASK else self.new_count(fr, line)
            return recv if countish(recv) else OTHER
        if m in ("numel", "nelement", "__len__") or (m == "size" and pos and pos[0] == ZERO):
            if any(_kind(e) == "S" for e in recv):
                return self.new_count(fr, line)
            return OTHER
        if m in MASKERS:
            return MASK
        if m in PRESERVE:
            return recv
        if m in CLAMPS:
            floor = pos[0] if pos else kws.get("min")
            floors = [floor] if floor is not None else [ZERO]
            out = self.floored(fr, recv, floors, line, f".{m}()")
            if m.endswith("_") and isinstance(recv_node, ast.Name):
                self.forget(fr, recv_node.id)
                fr.state.vars[recv_node.id] = out
            return out
        if m in ("max", "maximum", "fmax") and (pos or "other" in kws):
            other = pos[0] if pos else kws["other"]
            return self.floored(fr, recv, [other], line, f".{m}()", tensor_only=True)
        if m == "max" and not pos:
            return recv
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
            v = pos[-1] if pos else OTHER
            return v if not countish(recv) else join(recv, v)
        if m in INSPECT:
            return OTHER
        if m.endswith("_") and not m.startswith("_"):
            # In-place tensor arithmetic (x.add_(count)): the receiver now carries the argument.
            out = self.mutated(fr, recv_node, recv, line, m)
            if any(countish(v) for v in [*pos, *kws.values()]):
                out = frozenset({("U", f"line {line}: the count goes through .{m}(), which is not modelled")})
                if isinstance(recv_node, ast.Name):
                    fr.state.vars[recv_node.id] = out
            return out if countish(out) else OTHER
        if countish(recv):
            return frozenset({("U", f"line {line}: the count goes through .{m}(), which is not modelled")})
        vals = [*pos, *kws.values(), *spread]
        self.escape(fr, line, f".{m}()", vals)
        if any(countish(v) for v in vals):
            return frozenset({("U", f"line {line}: the count is passed to .{m}(), which is not modelled")})
        return OTHER

    def invoke(self, fr: Frame, node: ast.Call, callee: Val) -> Val:
        pos, kws, spread = self.args_of(fr, node)
        if not all(_kind(e) == "X" for e in callee):
            # Code of ours may change its arguments in place: expression facts about them lapse.
            for a in [*node.args, *(k.value for k in node.keywords)]:
                inner = a.value if isinstance(a, ast.Starred) else a
                if isinstance(inner, ast.Name):
                    self.forget(fr, inner.id)
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
            return OTHER
        k = _kind(e)
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

    def library(self, fr: Frame, node: ast.Call, path: str, pos: list[Val], kws: dict[str, Val],
                spread: list[Val]) -> Val:
        line = node.lineno
        root = path.split(".", maxsplit=1)[0]
        fname = path.rsplit(".", 1)[-1]
        allv = [*pos, *kws.values(), *spread]
        first = pos[0] if pos else OTHER
        if root not in LIBRARIES:
            self.escape(fr, line, f"{path}() from another distribution", allv)
            if any(countish(v) for v in allv):
                return frozenset({("U", f"line {line}: the count is passed to {path}(), outside the distribution")})
            return OTHER
        if fname in WRAPPERS and pos:
            return first
        if fname in WRAPPERS and not pos:
            return frozenset({("X", "functools.wraps")})  # a decorator factory: returns a wrapper
        if fname == "partial" and pos:
            out: set[Any] = set()
            for x in first:
                if isinstance(x, Func):
                    out.add(Func(x.node, x.mod, x.closure, (*x.pre_args, *pos[1:]), (*x.pre_kw, *kws.items())))
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
            return self.new_count(fr, line) if any(_kind(e) == "S" for e in first) else OTHER
        if root == "builtins" and fname == "sum":
            return first if countish(first) else OTHER
        if fname in ("staticmethod", "classmethod"):
            return first
        if fname in COUNTERS:
            if any(_kind(e) == "B" for e in first):
                return self.new_count(fr, line)
            return first if countish(first) else OTHER
        if fname == "numel":
            return self.new_count(fr, line) if any(_kind(e) == "S" for e in first) else OTHER
        if fname in MASKERS:
            return MASK
        if fname in CLAMPS:
            floor = pos[1] if len(pos) > 1 else kws.get("min")
            return self.floored(fr, first, [floor] if floor is not None else [ZERO], line, f"{fname}()")
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
            return frozenset({("U", f"line {line}: the count goes through {path}(), which is not modelled")})
        return OTHER

    def call_func(self, fr: Frame, func: Func, pos: list[Val], kws: dict[str, Val], spread: list[Val],
                  line: int) -> Val:
        node = func.node
        params = _params(node)
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
        for p in [*params, *kwonly]:
            if p not in bound:
                d = defaults.get(p)
                bound[p] = self.ev_global(func.mod, d) if d is not None and _num(d) is not None else OTHER
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
            local = frozenset(_assigned_names(func.node)) | frozenset(bound)
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

    # ----------------------------------------------------------------- the forward's callables

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
                if not _names_class(scope):
                    continue
                for n in ast.walk(scope):
                    expr = None
                    if isinstance(n, ast.Call):
                        f = n.func
                        if isinstance(f, ast.Attribute) and f.attr == "apply" and _is_class_ref(f.value):
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


def _load_copy(target: ast.AST) -> ast.expr:
    """The load form of an augmented-assignment target."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return node


def _is_class_ref(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == CLASS_NAME) or (
        isinstance(node, ast.Attribute) and node.attr == CLASS_NAME)


def _names_class(scope: ast.AST) -> bool:
    for n in ast.walk(scope):
        if (isinstance(n, ast.Name) and n.id == CLASS_NAME) or (isinstance(n, ast.Attribute) and n.attr == CLASS_NAME):
            return True
    return False


# --------------------------------------------------------------------------- locating and judging the forward


@dataclass(frozen=True)
class _Located:
    forwards: tuple[Func, ...] = ()
    verdict: StaticVerdict | None = None  # set when the forward cannot be judged (absent / unknown)


def _module_name(file: str | None) -> str:
    """The dotted module a file path names (from its ``unsloth_zoo`` component), else the CE module."""
    if file:
        parts = file.replace("\\", "/").split("/")
        if "unsloth_zoo" in parts:
            rel = parts[len(parts) - 1 - parts[::-1].index("unsloth_zoo"):]
            if rel[-1].endswith(".py"):
                rel[-1] = rel[-1][:-3]
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                return ".".join(rel)
    return CE_MODULE


def _locate(an: Analysis, file: str | None) -> _Located:
    cls_val = an.global_value(an.entry, CLASS_NAME)
    if cls_val is None:
        return _Located(verdict=StaticVerdict("absent", f"no class {CLASS_NAME} in the module", file))
    classes = [e for e in cls_val if isinstance(e, ClassInfo)]
    unresolved = [e[1] for e in cls_val if _kind(e) == "R"]
    if unresolved:
        return _Located(verdict=StaticVerdict("unknown", f"{CLASS_NAME}: {unresolved[0]}", file))
    if not classes:
        return _Located(verdict=StaticVerdict(
            "unknown", f"{CLASS_NAME} is bound to something the reading cannot resolve to a class", file))
    forwards: list[Func] = []
    problems: list[str] = []
    for cls in classes:
        fwd = an.class_attr(cls, "forward")
        fwd = _patched_forward(an, cls, fwd)
        if fwd is None:
            external = _external_bases(an, cls)
            if external:
                problems.append(f"{CLASS_NAME} defines no forward and inherits from {external}, which cannot "
                                "be read")
            continue
        funcs = [e for e in fwd if isinstance(e, Func)]
        if len(funcs) != len(fwd):
            problems.append(f"{CLASS_NAME}.forward is bound to an expression the reading cannot resolve")
        forwards += funcs
    if problems:
        return _Located(verdict=StaticVerdict("unknown", problems[0], file))
    if not forwards:
        return _Located(verdict=StaticVerdict("absent", f"{CLASS_NAME} has no forward", file))
    return _Located(forwards=tuple(forwards))


def _patched_forward(an: Analysis, cls: ClassInfo, fwd: Val | None) -> Val | None:
    """A module-level ``UnslothFusedLoss.forward = ...`` in the class's module replaces (or, under a
    condition, joins) the forward its body defines."""
    out = fwd

    def walk(stmts: list[ast.stmt], conditional: bool) -> None:
        nonlocal out
        for s in stmts:
            if isinstance(s, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "forward" and _is_class_ref(t.value)
                    for t in s.targets):
                v = an.ev_global(cls.mod, s.value)
                out = join(out or EMPTY, v) if conditional else v
            elif isinstance(s, ast.If) and const_truth(s.test) is not False:
                walk(s.body, True)
                walk(s.orelse, True)

    walk(cls.mod.tree.body, False)
    return out


def _external_bases(an: Analysis, cls: ClassInfo, seen: set[int] | None = None) -> str | None:
    """A base class (anywhere up the tree) that cannot be read and is not torch's ``autograd.Function``."""
    seen = seen or set()
    seen.add(id(cls.node))
    for base in cls.node.bases:
        for e in an.ev_global(cls.mod, base):
            if isinstance(e, ClassInfo):
                if id(e.node) not in seen:
                    inner = _external_bases(an, e, seen)
                    if inner:
                        return inner
            elif _kind(e) == "X" and e[1].split(".")[0] in ("torch", "builtins", "typing", "abc"):
                continue
            elif _kind(e) in ("X", "R"):
                return ast.unparse(base)
    return None


def _where(file: str, line: int, entry_file: str) -> str:
    return f"line {line}" if file == entry_file else f"{file}:{line}"


def _judge(an: Analysis, fwd: Func, file: str | None) -> StaticVerdict:
    params = _params(fwd.node)
    an.forward_order = params[1:]  # .apply() passes everything but ctx
    bound: dict[str, Val] = {params[0]: OTHER} if params else {}
    for p in params[1:]:
        bound[p] = frozenset({("P", p)})
    a = fwd.node.args
    for p in a.kwonlyargs:
        bound[p.arg] = frozenset({("P", p.arg)})
    if a.vararg:
        bound[a.vararg.arg] = OTHER
    if a.kwarg:
        bound[a.kwarg.arg] = OTHER
    # Lines are reported in ``file``; a forward read from another module is named in the reason instead.
    fline = fwd.node.lineno if fwd.mod is an.entry else None
    where_fwd = "" if fwd.mod is an.entry else f" (in {fwd.mod.file}:{fwd.node.lineno})"
    verdict = _judged(an, fwd, bound, file, fline, where_fwd)
    if where_fwd and not verdict.reason.startswith(CLASS_NAME):
        verdict = StaticVerdict(verdict.verdict, f"{CLASS_NAME}.forward{where_fwd}: {verdict.reason}", verdict.file,
                                verdict.forward_line, verdict.evidence_line)
    return verdict


def _judged(an: Analysis, fwd: Func, bound: dict[str, Val], file: str | None, fline: int | None,
            where_fwd: str) -> StaticVerdict:
    entry = an.entry.file
    for dec in fwd.node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        val = an.ev_global(fwd.mod, target)
        if not val or not all(_kind(e) == "X" and e[1].split(".")[0] in LIBRARIES for e in val):
            return StaticVerdict("unknown", f"{CLASS_NAME}.forward{where_fwd} is wrapped by @{ast.unparse(target)}, "
                                 "which the reading does not follow", file, fline)
    try:
        an.run_func(fwd, bound, fwd.node.lineno)
    except (Unreadable, RecursionError) as exc:
        return StaticVerdict("unknown", f"{CLASS_NAME}.forward{where_fwd}: {exc or 'too deeply nested'}",
                             file, fline)
    if an.poisoned:
        # A guarded count some in-place method changed (maybe through an alias) proves nothing any more.
        poison = frozenset(an.poisoned)
        an.divisions = [Division(d.file, d.line, d.where, frozenset(
            ("U", "the count is changed in place after its guard") if e in poison and _kind(e) == "G" else e
            for e in d.divisor)) for d in an.divisions]
    if not an.sources:
        return StaticVerdict("unknown", f"{CLASS_NAME}.forward{where_fwd} derives no label count (no sum or "
                             "count over a comparison mask); cannot judge its divisor", file, fline)
    for d in an.divisions:
        counts = sorted((e for e in d.divisor if _kind(e) == "C"), key=lambda e: (e[1], e[2]))
        if counts or (d.divisor >= ZERO and countish(d.divisor)):
            src = counts[0] if counts else None
            src_text = f"the label count from {_where(src[1], src[2], entry)}" if src else "a zero"
            evidence = src[2] if src and src[1] == entry else (d.line if d.file == entry else None)
            return StaticVerdict(
                "vulnerable", f"{src_text} reaches the division at {_where(d.file, d.line, entry)} in {d.where} "
                "with no zero guard on some path (an all-masked batch divides by 0)", file, fline, evidence)
    for d in an.divisions:
        opaque = [e[1] for e in d.divisor if _kind(e) == "U"]
        if opaque:
            return StaticVerdict("unknown", f"the division at {_where(d.file, d.line, entry)} in {d.where}: "
                                 f"{sorted(opaque)[0]}", file, fline, d.line if d.file == entry else None)
    if an.escapes:
        e = an.escapes[0]
        return StaticVerdict("unknown", f"{_where(e.file, e.line, entry)} in {e.where}: the unguarded count "
                             f"escapes into {e.what}, so its division cannot be checked", file, fline,
                             e.line if e.file == entry else None)
    guarded = [d for d in an.divisions if countish(d.divisor)]
    if guarded:
        d = guarded[0]
        g = sorted(e for e in d.divisor if _kind(e) == "G")[0]
        return StaticVerdict(
            "fixed", f"the label count reaches the division at {_where(d.file, d.line, entry)} in {d.where} only "
            f"through a zero guard ({g[3]} at {_where(g[1], g[2], entry)})", file, fline,
            g[2] if g[1] == entry else (d.line if d.file == entry else None))
    src = an.sources[0]
    return StaticVerdict("unknown", f"the label count from {_where(src[0], src[1], entry)} reaches no division "
                         "the reading can see", file, fline)


def analyze_source(text: str, file: str | None = None, *,
                   read_module: ModuleReader | None = None) -> StaticVerdict:
    """Judge the zoo cross-entropy module's source text. See the module docstring.

    ``read_module(dotted)`` returns the source of another module of the same distribution (or None); with
    it, re-exports, base classes and helpers are followed across modules. ``file`` names the module (a path
    containing ``unsloth_zoo/``; the CE module's name is assumed otherwise) and is echoed in the verdict.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return StaticVerdict("unknown", f"cannot parse the module: {exc.msg} (line {exc.lineno})", file)
    name = _module_name(file)
    entry_file = file or CE_PATH
    an = Analysis(name, entry_file, tree, read_module)
    try:
        located = _locate(an, file)
        if located.verdict is not None:
            return located.verdict
        verdicts = []
        for fwd in located.forwards:
            an.reset()
            verdicts.append(_judge(an, fwd, file))
    except (Unreadable, RecursionError) as exc:
        return StaticVerdict("unknown", f"cannot read {CLASS_NAME}.forward: {exc or 'too deeply nested'}", file)
    except Exception as exc:  # a release the reading trips on is a finding (unknown), not a failed scan
        return StaticVerdict("unknown", f"the static reading failed ({type(exc).__name__}: {exc}); this is a "
                             "detector bug worth reporting", file)
    kinds = {v.verdict for v in verdicts}
    if len(kinds) == 1:
        return verdicts[0]
    if "unknown" in kinds:
        return next(v for v in verdicts if v.verdict == "unknown")
    lines = ", ".join(str(v.forward_line) for v in verdicts)
    return StaticVerdict("unknown", f"{CLASS_NAME} has several definitions (forwards at lines {lines}) whose "
                         f"verdicts disagree ({', '.join(v.verdict for v in verdicts)}); which one runs depends "
                         "on the environment", file, verdicts[0].forward_line)


# --------------------------------------------------------------------------- inputs: files and installed


def files_reader(files: Mapping[str, str]) -> ModuleReader:
    """A ``read_module`` over ``{relative path: text}`` (``unsloth_zoo/x/y.py`` or ``.../__init__.py``)."""
    by_path = {k.replace("\\", "/").lstrip("./"): v for k, v in files.items()}

    def read(dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        return by_path.get(f"{base}.py", by_path.get(f"{base}/__init__.py"))

    return read


def analyze_files(files: Mapping[str, str]) -> StaticVerdict:
    """Judge a zoo release from its Python files, ``{relative path: text}`` with paths like
    ``unsloth_zoo/fused_losses/cross_entropy_loss.py`` (other files of the wheel are read as needed)."""
    reader = files_reader(files)
    text = reader(CE_MODULE)
    if text is None:
        return StaticVerdict("absent", f"no {CE_PATH}", None)
    return analyze_source(text, CE_PATH, read_module=reader)


def locate_installed() -> Path | None:
    """Path of the installed zoo CE module, found without executing zoo."""
    spec = importlib.util.find_spec("unsloth_zoo")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        candidate = Path(loc).joinpath(*CE_REL)
        if candidate.is_file():
            return candidate
    return None


def installed_reader(roots: Iterable[Path]) -> ModuleReader:
    """A ``read_module`` over the installed package directories (files are read, never imported)."""
    roots = list(roots)

    def read(dotted: str) -> str | None:
        parts = dotted.split(".")
        if parts[0] != "unsloth_zoo":
            return None
        for root in roots:
            base = root.joinpath(*parts[1:])
            for cand in (base.with_name(base.name + ".py") if parts[1:] else None, base / "__init__.py"):
                if cand is not None and cand.is_file():
                    return cand.read_text(encoding="utf-8", errors="replace")
        return None

    return read


def detect_installed() -> StaticVerdict:
    spec = importlib.util.find_spec("unsloth_zoo")
    if spec is None:
        return StaticVerdict("absent", "unsloth_zoo is not installed")
    path = locate_installed()
    if path is None:
        return StaticVerdict("absent", "unsloth_zoo has no fused_losses/cross_entropy_loss.py")
    roots = [Path(loc) for loc in spec.submodule_search_locations or []]
    return analyze_source(path.read_text(encoding="utf-8", errors="replace"), str(path),
                          read_module=installed_reader(roots))
