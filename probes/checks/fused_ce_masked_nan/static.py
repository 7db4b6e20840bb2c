"""The static detector: read ``UnslothFusedLoss.forward`` from source, never import it.

``analyze_source(text)`` is pure (stdlib ``ast`` only) so the wide scan can
run it on files read out of wheels and sdists; ``detect_installed()`` finds
the installed zoo module through ``importlib.util.find_spec`` of the
top-level package, which locates files without executing zoo.

Verdicts: ``absent`` (no fused CE module, class or forward), ``fixed`` (the
divisor derived from the label count is guarded against zero), ``vulnerable``
(it is not), ``unknown`` (the source does not have a shape we can judge).

A guard is any of these, on the divisor inside ``forward``:
* a clamp (``clamp``/``clamp_min``/``clip``) or ``max``/``torch.maximum``
  with a positive constant in the expression assigned to it;
* a comparison with 0 in that expression (``torch.where(d == 0, ...)``);
* a call to a function of the same module whose body does one of the above
  with its argument (one level deep: ``_nonzero_count(d)``);
* an ``if`` on the divisor or the label count compared with 0 (or ``not d``)
  whose body reassigns the divisor, returns, or raises.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CE_REL = ("fused_losses", "cross_entropy_loss.py")
CLASS_NAME = "UnslothFusedLoss"
DIVISOR = "divisor"
CLAMPS = {"clamp", "clamp_min", "clip", "clamp_"}
MAXES = {"max", "maximum", "fmax"}


@dataclass(frozen=True)
class StaticVerdict:
    verdict: str  # vulnerable | fixed | absent | unknown
    reason: str
    file: str | None = None
    forward_line: int | None = None
    evidence_line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive_const(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
        node.value, bool) and node.value > 0


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def _guards_expr(expr: ast.AST) -> bool:
    """Does ``expr`` contain a zero guard (clamp/max with a positive constant, or a == 0 test)?"""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            args = list(node.args) + [k.value for k in node.keywords if k.arg in (None, "min", "other")]
            if name in CLAMPS and any(_positive_const(a) for a in args):
                return True
            if name in MAXES and any(_positive_const(a) for a in args):
                return True
        if isinstance(node, ast.Compare) and (
            any(_is_zero(c) for c in node.comparators) or _is_zero(node.left)
        ) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.Gt, ast.LtE, ast.Lt, ast.GtE)) for op in node.ops):
            return True
    return False


def _guarding_functions(tree: ast.Module) -> set[str]:
    """Module-level functions whose body guards a value against zero."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            _guards_expr(stmt) for stmt in node.body
        ):
            out.add(node.name)
    return out


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _assigns(stmt: ast.AST, name: str) -> bool:
    for n in ast.walk(stmt):
        targets: list[ast.AST] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def analyze_source(text: str, file: str | None = None) -> StaticVerdict:
    """Judge the zoo cross-entropy module's source text. See the module docstring."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return StaticVerdict("unknown", f"cannot parse the module: {exc.msg} (line {exc.lineno})", file)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS_NAME), None)
    if cls is None:
        return StaticVerdict("absent", f"no class {CLASS_NAME} in the module", file)
    fwd = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if fwd is None:
        return StaticVerdict("absent", f"{CLASS_NAME} has no forward", file)
    line = fwd.lineno
    assigns = [n for n in ast.walk(fwd) if isinstance(n, (ast.Assign, ast.AnnAssign)) and _assigns(n, DIVISOR)]
    if not assigns:
        return StaticVerdict("unknown", f"{CLASS_NAME}.forward assigns no '{DIVISOR}'; cannot judge its divisor",
                             file, line)
    # The count-derived divisor: a `.sum()` over a comparison (labels != ignore_index).
    counted = [a for a in assigns if a.value is not None and any(
        isinstance(n, ast.Call) and _call_name(n) in ("sum", "count_nonzero") for n in ast.walk(a.value))]
    if not counted:
        return StaticVerdict("unknown", f"'{DIVISOR}' in {CLASS_NAME}.forward is not derived from a label count",
                             file, line)
    helpers = _guarding_functions(tree)
    for a in assigns:
        if a.value is None:
            continue
        if _guards_expr(a.value):
            return StaticVerdict("fixed", f"line {a.lineno}: the divisor is guarded against zero in place",
                                 file, line, a.lineno)
        for n in ast.walk(a.value):
            if isinstance(n, ast.Call) and _call_name(n) in helpers and _mentions(n, {DIVISOR, "n_items", "labels"}):
                return StaticVerdict("fixed", f"line {a.lineno}: the divisor passes through {_call_name(n)}(), "
                                     "which guards zero", file, line, a.lineno)
    for node in ast.walk(fwd):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and _guards_expr(test) and _mentions(test, {DIVISOR, "labels", "n_items"}):
            body = ast.Module(body=node.body, type_ignores=[])
            if _assigns(body, DIVISOR) or any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(body)):
                return StaticVerdict("fixed", f"line {node.lineno}: a zero divisor or empty label set is handled "
                                     "by a branch", file, line, node.lineno)
    first = counted[0]
    return StaticVerdict("vulnerable", f"line {first.lineno}: the divisor falls back to the label count with "
                         "no zero guard (all-masked batch divides by 0)", file, line, first.lineno)


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


def detect_installed() -> StaticVerdict:
    if importlib.util.find_spec("unsloth_zoo") is None:
        return StaticVerdict("absent", "unsloth_zoo is not installed")
    path = locate_installed()
    if path is None:
        return StaticVerdict("absent", "unsloth_zoo has no fused_losses/cross_entropy_loss.py")
    return analyze_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
