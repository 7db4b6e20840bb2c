"""What the static reading works with: the verdict, the target's names, and the abstract values and records.

``StaticVerdict`` is what every entry point returns. A value of the reading is a frozenset of facts (the
legend is below); ``ModuleCtx``, ``Func``, ``ClassInfo``, ``State`` and ``Frame`` carry what the reading knows
about a module, a callable, a class, a program point and a call; ``Division`` and ``Escape`` record where a
count is divided or lost. Nothing here knows how source is read.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
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
#   ("C", file, line, name)  the caller's count: forward parameter ``name`` (``n_items``), which may be 0
#   ("G", file, line, how)   a count after a recognised zero guard at file:line
#   ("U", reason)            a count that went through something the reading cannot judge
# Other facts: ("K", "num"|"tensor"|"any") positive (a constant at least 1); ("F",) a constant in (0, 1), which is
# 0 after int() or in an integer count's dtype, and 1e-8 is 0 in fp16; ("Z",) zero; ("N",) negative; ("None",) None;
# ("T", text) a string constant; ("Q", reason) a sum over something that is not a recognised mask (maybe a
# count in another spelling); ("O",) anything else (None included); ("B",) a
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
FRAC: Val = frozenset({("F",)})
NONE: Val = frozenset({("None",)})
EMPTY: Val = frozenset()
COUNT_KINDS = {"C", "G", "U"}


def kind(e: Any) -> str:
    return e[0] if isinstance(e, tuple) else type(e).__name__


def countish(v: Val) -> bool:
    return any(kind(e) in COUNT_KINDS for e in v)


def unguarded(v: Val) -> bool:
    return any(kind(e) in ("C", "U") for e in v)


def join(*vals: Val) -> Val:
    out: set[Any] = set()
    for v in vals:
        out |= v
    return frozenset(out)


NOT_NONE_KINDS = {"C", "G", "K", "F", "Z", "N", "B", "S", "T", "Q", "Func", "ClassInfo", "M"}


def maybe_none(v: Val) -> bool:
    """The value may be None: a fact says so, or says nothing about it (a parameter, an opaque value)."""
    return not v or any(kind(e) not in NOT_NONE_KINDS for e in v)


def number(n: float) -> Val:
    """A numeric constant: positive only from 1 up (a fraction is a floor some dtype or ``int()`` makes 0)."""
    if n >= 1:
        return POS_NUM
    return FRAC if n > 0 else (ZERO if n == 0 else NEG)


def positive(v: Val, *, tensor_only: bool = False) -> bool:
    """Every fact says strictly positive (a positive constant or tensor, or a guarded count)."""
    if not v:
        return False
    for e in v:
        k = kind(e)
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
    defaults: tuple[tuple[str, Val], ...] | None = None  # evaluated where a nested def / lambda was made

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
    tries: list[list[State]] = field(default_factory=list)  # states where an enclosing handler may take over
    class_scope: dict[str, Val] | None = None


@dataclass(frozen=True)
class Division:
    file: str
    line: int
    where: str
    divisor: Val
    note: str = ""  # what divides, when it is not a written ``/`` (the stock mean of cross_entropy)


@dataclass(frozen=True)
class Escape:
    file: str
    line: int
    where: str
    what: str


class Unreadable(Exception):
    """The analysis ran past its budget; the verdict is unknown."""
