"""The static detector of this check: read ``grpo_compute_loss`` from source, never import it.

Stdlib only. The question: on every ``loss_type`` branch whose loss is
divided by the trainer's ``num_items_in_batch``, does the divisor carry a
positive floor (``clamp(min=1)``, ``max(..., 1)``), so that a batch whose
completions are all masked (a count of 0) gives 0 / 1 and not 0 / 0?

The divisor is followed through the names it is built from (``normalizer =
num_items_in_batch / num_processes``, assigned on one or both arms of an
``if``), through arithmetic, ``float()``/``int()``/``.to()`` and conditional
expressions. Per division the count reaches it ``floored`` (every path passes
a floor call with a positive constant), ``bare`` (some path does not), or
``unknown`` (a call or shape the detector does not follow).

* ``vulnerable``: some division reaches the count bare, and no test of the
  count's value (``== 0``, ``if count:``, an early return) could guard it;
* ``fixed``: every division that reaches the count reaches it floored;
* ``absent``: no ``unsloth_zoo/rl_replacements.py``, no ``grpo_compute_loss``,
  or it never divides by the count (the releases before the count-normalised
  loss types);
* ``unknown``: anything else -- the detector abstains rather than guess.
"""

from __future__ import annotations

import ast
from typing import Any

from probes.checks import installed

REL = ("rl_replacements.py",)
FUNCTION = "grpo_compute_loss"
COUNT = "num_items_in_batch"
FLOORS = frozenset({"clamp", "clamp_min", "clip", "max", "maximum", "fmax"})
# Calls that hand their first argument's value on unchanged in size (a cast, a move, a tensor of it).
PASS_THROUGH = frozenset({"float", "int", "to", "as_tensor", "tensor", "detach", "item", "type", "double"})
# A tensor's shape, never its values: a loss sum's ``.size(0)`` does not carry the count into a divisor.
SHAPE = frozenset({"size", "numel", "dim", "shape", "ndim", "dtype", "device"})
TYPE_TESTS = frozenset({"is_tensor", "isinstance"})
ORDER = {"floored": 0, "unknown": 1, "bare": 2}  # the worse status wins when paths meet


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    return None


def _positive(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool) and node.value > 0)


def _worst(statuses: list[str]) -> str | None:
    return max(statuses, key=ORDER.__getitem__) if statuses else None


class _Reader:
    """The count's status in an expression, following the names assigned in ``fn``."""

    def __init__(self, fn: ast.FunctionDef) -> None:
        self.assigns: dict[str, list[ast.expr]] = {}
        self.branches = _branches(fn)
        self.at = 0  # the line of the division being read: only assignments that can reach it count
        self.opaque: set[str] = set()  # names bound some way the reader does not follow
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.assigns.setdefault(t.id, []).append(node.value)
                    else:
                        self.opaque |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                if isinstance(node, ast.AugAssign):
                    self.opaque.add(node.target.id)
                elif node.value is not None:
                    self.assigns.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, (ast.For, ast.With, ast.NamedExpr)):
                target = getattr(node, "target", None)
                if target is not None:
                    self.opaque |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    def status(self, node: ast.AST, seen: frozenset[str] = frozenset()) -> str | None:
        """None: the expression does not depend on the count."""
        if isinstance(node, ast.Name):
            return self._name_status(node.id, seen)
        if isinstance(node, ast.Constant):
            return None
        if isinstance(node, ast.Call):
            return self._call_status(node, seen)
        if isinstance(node, ast.BinOp):
            return _worst([s for s in (self.status(node.left, seen), self.status(node.right, seen)) if s])
        if isinstance(node, ast.UnaryOp):
            return self.status(node.operand, seen)
        if isinstance(node, ast.IfExp):
            return _worst([s for s in (self.status(node.body, seen), self.status(node.orelse, seen)) if s])
        if isinstance(node, ast.Attribute):
            return None if node.attr in SHAPE else self.status(node.value, seen)
        return "unknown" if self._mentions(node, seen) else None

    def _name_status(self, name: str, seen: frozenset[str]) -> str | None:
        if name in seen:  # normalizer = normalizer * k: the earlier value's status, counted elsewhere;
            return "bare" if name == COUNT else None  # count = max(count, 1): the earlier value is the raw read
        values = [v for v in self.assigns.get(name, []) if self._reaches(v.lineno)]
        if name == COUNT:
            reads = [v for v in values if self._is_read(v)]
            others = [v for v in values if not self._is_read(v)]
            if not others:
                return "bare"  # the trainer's value as read from the kwargs (or the parameter itself)
            got = [s for v in others if (s := self.status(v, seen | {name}))]
            # Re-assigned: floored when every re-assignment floors it (the raw read precedes them).
            return "floored" if got and all(s == "floored" for s in got) and reads else _worst(got) or "unknown"
        if name in self.opaque:
            return "unknown" if any(self._mentions(v, seen | {name}) for v in values) or not values else None
        return _worst([s for v in values if (s := self.status(v, seen | {name}))])

    def _reaches(self, line: int) -> bool:
        """An assignment at ``line`` precedes the division and sits in no other ``loss_type`` arm than its own."""
        if self.at and line > self.at:
            return False
        return not any(a <= line <= b and not a <= self.at <= b for a, b, _ in self.branches) if self.at else True

    @staticmethod
    def _is_read(value: ast.expr) -> bool:
        return (isinstance(value, ast.Call) and _name(value) == "get" and bool(value.args)
                and isinstance(value.args[0], ast.Constant) and value.args[0].value == COUNT)

    def _call_status(self, node: ast.Call, seen: frozenset[str]) -> str | None:
        name = _name(node)
        if name in SHAPE and isinstance(node.func, ast.Attribute):
            return None
        inner = [s for a in [*node.args, *(k.value for k in node.keywords)] if (s := self.status(a, seen))]
        receiver = self.status(node.func.value, seen) if isinstance(node.func, ast.Attribute) else None
        if not inner and not receiver:
            return None
        floors = [*node.args, *(k.value for k in node.keywords if k.arg in ("min", None))]
        if name in FLOORS and any(_positive(a) for a in floors):
            return "floored"
        if name in PASS_THROUGH:
            return _worst([*inner, *([receiver] if receiver else [])])
        return "unknown"

    def _mentions(self, node: ast.AST, seen: frozenset[str]) -> bool:
        return any(isinstance(n, ast.Name) and self._name_status(n.id, seen) is not None for n in ast.walk(node))

    def value_tests(self, fn: ast.FunctionDef) -> list[int]:
        """Lines of tests on the count's value (not its type, not ``is None``): a guard the reader does not follow."""
        lines = []
        for node in ast.walk(fn):
            test = getattr(node, "test", None) if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) else None
            if test is None or not self._mentions(test, frozenset()):
                continue
            if _name(test) in TYPE_TESTS or (isinstance(test, ast.Compare) and all(
                    isinstance(o, (ast.Is, ast.IsNot)) for o in test.ops)):
                continue
            lines.append(node.lineno)
        return lines


def _divisions(fn: ast.FunctionDef) -> list[tuple[ast.AST, ast.expr]]:
    out: list[tuple[ast.AST, ast.expr]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            out.append((node, node.right))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            out.append((node, node.value))
        elif isinstance(node, ast.Call) and _name(node) in ("div", "true_divide", "divide") and len(node.args) >= 2:
            out.append((node, node.args[1]))
    return out


def _branches(fn: ast.FunctionDef) -> list[tuple[int, int, list[str]]]:
    """(first line, last line, loss types) of every arm of a ``loss_type`` dispatch (``if loss_type == ...``)."""
    out = []
    for node in ast.walk(fn):
        test = getattr(node, "test", None) if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "loss_type"):
            continue
        assert isinstance(node, ast.If)
        values = [c.value for c in ast.walk(test.comparators[0]) if isinstance(c, ast.Constant)
                  and isinstance(c.value, str)]
        out.append((node.body[0].lineno, max(s.end_lineno or s.lineno for s in node.body), values))
    return out


def _loss_types(branches: list[tuple[int, int, list[str]]], line: int) -> list[str]:
    """The ``loss_type`` values of the innermost dispatch arm that holds ``line``."""
    inside = [b for b in branches if b[0] <= line <= b[1]]
    return max(inside, key=lambda b: b[0])[2] if inside else []


def analyze_source(text: str, file: str | None = None) -> dict[str, Any]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return {"verdict": "unknown", "reason": f"cannot parse: {exc.msg} (line {exc.lineno})", "file": file}
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION), None)
    if fn is None:
        return {"verdict": "absent", "reason": f"no function {FUNCTION}", "file": file}
    reader = _Reader(fn)
    found = []
    for node, divisor in _divisions(fn):
        reader.at = node.lineno
        s = reader.status(divisor)
        if s is not None:
            found.append((node.lineno, s, _loss_types(reader.branches, node.lineno)))
    reader.at = 0
    if not found:
        return {"verdict": "absent", "file": file, "line": fn.lineno,
                "reason": f"{FUNCTION} never divides by {COUNT} (no count-normalised loss type yet)"}

    def where(items: list[tuple[int, str, list[str]]]) -> str:
        return ", ".join(f"line {ln}" + (f" (loss_type {'/'.join(t)})" if t else "") for ln, _, t in items)

    bare = [f for f in found if f[1] == "bare"]
    unknown = [f for f in found if f[1] == "unknown"]
    tests = reader.value_tests(fn)
    if bare and not tests:
        return {"verdict": "vulnerable", "file": file, "line": bare[0][0],
                "reason": f"{where(bare)}: the loss is divided by {COUNT} with no floor, so a batch whose "
                          "completions are all masked (count 0) gives 0 / 0 = NaN"}
    if bare:
        return {"verdict": "unknown", "file": file, "line": tests[0],
                "reason": f"{where(bare)} divides by an unfloored {COUNT}, but line(s) "
                          f"{', '.join(map(str, tests))} test the count's value in a way the detector does not "
                          "follow; abstaining"}
    if unknown:
        return {"verdict": "unknown", "file": file, "line": unknown[0][0],
                "reason": f"{where(unknown)}: the divisor reaches {COUNT} through a call or shape the detector "
                          "does not follow; abstaining"}
    return {"verdict": "fixed", "file": file, "line": found[0][0],
            "reason": f"{where(found)}: every division by {COUNT} floors it at a positive constant"}


def detect_installed() -> dict[str, Any]:
    return installed.detect_installed(REL, analyze_source, "no unsloth_zoo/rl_replacements.py")
