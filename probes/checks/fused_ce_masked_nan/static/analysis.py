"""The static reading of one entry module: ``Analysis``, its state, and what it records along the forward.

``Analysis`` joins the mixins that hold the reading's parts (module resolution, statements, guards,
expressions, calls, known operations) and owns the state they share: the modules read so far, the label
counts found (``sources``), the divisions a count reaches, the escapes, the memo of function results, the
call stack and the step budget.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from .calls import Calls
from .expressions import Expressions
from .guards import Guards
from .modules import ModuleResolution
from .operations import Operations
from .statements import Statements
from .values import (
    MAX_STEPS,
    ZERO,
    Division,
    Escape,
    Frame,
    Func,
    ModuleCtx,
    ModuleReader,
    Unreadable,
    Val,
    countish,
    kind,
    unguarded,
)


class Analysis(ModuleResolution, Statements, Guards, Expressions, Calls, Operations):
    """One reading of one entry module. See the package docstring (``static/__init__.py``)."""

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
        self.blind: list[tuple[str, int, str]] = []  # divisions by a value the reading cannot name
        self.unresolved: list[tuple[str, int, str, str]] = []  # divisions by a name it cannot resolve
        self.foreign: list[tuple[str, int, str, str]] = []  # calls into another distribution on the path
        self.exposed: set[Any] = set()  # count facts stored where the reading loses them (ctx.d = d, xs.append(d))
        self.declarations: dict[tuple[int, type], set[str]] = {}  # global / nonlocal names per scope node
        self.muted = 0  # > 0 while evaluating module-level code: nothing there is on the forward's path
        # Forward parameters that stand in for the label count (the caller's ``n_items``): found by the first
        # reading of a forward, bound as counts by the second (``judge.py``).
        self.alternatives: set[str] = set()
        self.none_divided: set[str] = set()  # parameters known None where a count is divided
        self.param_divisors: set[str] = set()  # parameters that reach any division as (part of) its divisor
        self.none_sides: list[tuple[Frame, frozenset[str]]] = []  # parameters known None on the path read now

    def reset(self) -> None:
        """Forget what one forward's reading recorded, before reading the next."""
        self.divisions, self.escapes, self.sources = [], [], []
        self.memo, self.param_cache, self.stack = {}, {}, []
        self.poisoned, self.exposed, self.blind, self.unresolved, self.foreign = set(), set(), [], [], []
        self.alternatives, self.none_divided, self.param_divisors, self.none_sides = set(), set(), set(), []
        self.steps = 0


    # ----------------------------------------------------------------- recording

    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Unreadable("the reading ran past its step budget")

    def new_count(self, fr: Frame, line: int) -> Val:
        if not self.muted:
            self.sources.append((fr.mod.file, line))
        return frozenset({("C", fr.mod.file, line)})

    def division(self, fr: Frame, line: int, divisor: Val, note: str = "") -> None:
        if self.muted:
            return
        params = {e[1] for e in divisor if kind(e) == "P"}
        self.param_divisors |= params
        if not countish(divisor) and any(kind(e) in ("O", "R", "X") for e in divisor):
            self.blind.append((fr.mod.file, line, fr.label))  # may be a count the reading lost (``ctx.d``)
        self.unresolved += [(fr.mod.file, line, fr.label, e[1]) for e in divisor if kind(e) == "R"]
        # A zero the reading can see (``float`` shadowed to 0) divides too, and so does a sum that may be a count.
        if countish(divisor) or divisor >= ZERO or any(kind(e) == "Q" for e in divisor):
            self.divisions.append(Division(fr.mod.file, line, fr.label, divisor, note))
            # A forward parameter divided by in place of the count: joined with it into one divisor
            # (``n_items if n_items is not None else count``), or divided by itself somewhere and known
            # None where the count is divided (``if n_items is None: x / count`` ... ``x / n_items``).
            self.alternatives |= params
            self.none_divided |= {n for frame, names in self.none_sides if frame is fr for n in names}

    def mean_route(self, fr: Frame, line: int, what: str, reduction: Val | None, labels: ast.AST | None) -> None:
        """A stock mean (``cross_entropy`` / ``nll_loss`` / their modules with ``reduction="mean"``, the default,
        or ``.mean()`` of a masked selection) divides by the number of unmasked labels: a division by a new label
        count, unguarded, unless the reduction is provably ``"sum"`` or ``"none"``."""
        texts = {e[1] for e in reduction if kind(e) == "T"} if reduction is not None else {"mean"}
        if reduction is not None and texts <= {"sum", "none"} and all(kind(e) == "T" for e in reduction):
            return
        count = self.new_count(fr, line)
        root = labels
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if "mean" not in texts or not all(kind(e) == "T" for e in reduction or ()):
            count = frozenset({("U", f"line {line}: {what} with a reduction the reading cannot resolve (the "
                                     "default is the mean, NaN on an all-masked batch)")})
        elif isinstance(root, ast.Name) and any(f"id='{root.id}'" in f for f in fr.state.facts):
            count = frozenset({("U", f"line {line}: {what} takes the stock mean after a zero test on the labels, "
                                     "which the reading does not match to the mean's own count")})
        self.division(fr, line, count, f"the stock mean of {what} at line {line} in {fr.label} divides by the "
                                       "number of unmasked labels")

    def caller_counts(self) -> set[str]:
        """The forward parameters the first reading found standing in for the label count."""
        return self.alternatives | (self.none_divided & self.param_divisors)

    def escape(self, fr: Frame, line: int, what: str, vals: Iterable[Val]) -> None:
        vals = list(vals)
        self.expose(vals)
        if any(unguarded(v) for v in vals) and not self.muted:
            self.escapes.append(Escape(fr.mod.file, line, fr.label, what))
