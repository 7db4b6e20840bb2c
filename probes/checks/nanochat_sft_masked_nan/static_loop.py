"""The static reading of ``scripts/chat_sft.py``'s micro-step loop: what happens to a micro-batch with no valid target.

Stdlib only. The loop is the ``for`` over ``range(<grad accumulation
steps>)``. Found in it: the model call (``model(x, y)``), each
``.backward()``, a branch on the targets (``(y != -1).any()``, a count of
valid targets...), what the loop logs (the name assigned ``loss.detach()``)
and how it normalizes (``loss / grad_accum_steps``). Verdicts:

* ``guarded``: every ``backward()`` sits under a branch on the targets, so an
  all-masked micro-batch never reaches it (``skips_forward`` says whether the
  model is still called on it; ``logs`` what the logged loss becomes);
* ``unguarded``: forward and backward run on every micro-batch as they are;
* ``unknown``: no such loop (abstain).

``optimizer`` notes whether ``optimizer.step()`` runs unconditionally after
the loop: with every micro-batch of a step skipped, it runs with no gradient.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FILE = "scripts/chat_sft.py"


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return ""


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def find_loop(tree: ast.AST) -> ast.For | None:
    """The micro-step loop: ``for _ in range(<...accum...>)`` whose body calls ``backward``."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.For) and _call_name(node.iter) == "range"
                and any("accum" in n for n in _names(node.iter))
                and any(_call_name(c) == "backward" for c in ast.walk(node))):
            return node
    return None


def _tainted(body: list[ast.stmt], seed: str) -> set[str]:
    names = {seed}
    for _ in range(4):
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Assign) and _names(node.value) & names and not (
                        isinstance(node.value, ast.Call) and _call_name(node.value) == "model"):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _parents(root: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(root) for child in ast.iter_child_nodes(parent)}


def _guards(node: ast.AST, parents: dict[ast.AST, ast.AST], loop: ast.For, watched: set[str]) -> list[ast.If]:
    """The branches on the targets between ``node`` and the loop, taken when there IS a valid target."""
    out = []
    while node in parents and node is not loop:
        parent = parents[node]
        if isinstance(parent, ast.If) and _names(parent.test) & watched and node in parent.body:
            out.append(parent)
        node = parent
    return out


def _early_skip(loop: ast.For, watched: set[str]) -> ast.If | None:
    """``if <no valid target>: continue`` at the top of the loop body."""
    for stmt in loop.body:
        if isinstance(stmt, ast.If) and _names(stmt.test) & watched and any(
                isinstance(s, ast.Continue) for s in stmt.body):
            return stmt
    return None


def analyze_loop(text: str, file: str = FILE) -> dict[str, Any]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return {"verdict": "unknown", "reason": f"{file}: cannot parse: {exc.msg} (line {exc.lineno})", "file": file}
    loop = find_loop(tree)
    if loop is None:
        return {"verdict": "unknown", "file": file,
                "reason": f"{file}: no micro-step loop (for ... in range(<grad accumulation steps>) with backward())"}
    calls = [c for c in ast.walk(loop) if isinstance(c, ast.Call)]
    model = next((c for c in calls if _call_name(c) == "model" and len(c.args) >= 2), None)
    backwards = [c for c in calls if _call_name(c) == "backward"]
    targets = model.args[1].id if model is not None and isinstance(model.args[1], ast.Name) else "y"
    watched = _tainted(loop.body, targets)
    parents = _parents(loop)
    early = _early_skip(loop, watched)
    guarded_bw = [bool(_guards(b, parents, loop, watched)) or early is not None for b in backwards]
    skips_forward = model is not None and (bool(_guards(model, parents, loop, watched)) or early is not None)
    out: dict[str, Any] = {"file": file, "line": loop.lineno, "model_call_line": getattr(model, "lineno", None),
                           "backward_lines": [b.lineno for b in backwards], "skips_forward": skips_forward,
                           "normalization": _normalization(loop), "logs": _logged(loop, parents, watched),
                           "optimizer": _optimizer(tree, loop)}
    at = f"{file}:{loop.lineno}"
    if backwards and all(guarded_bw):
        guard = early or _guards(backwards[0], parents, loop, watched)[0]
        out.update(verdict="guarded", guard_line=guard.lineno, guard_test=ast.unparse(guard.test)[:120])
        fwd = "skips the forward too" if skips_forward else "still runs the model on it (its loss is computed)"
        out["reason"] = (f"{at}: an all-masked micro-batch is skipped by `if {out['guard_test']}` (line "
                         f"{guard.lineno}): no backward; it {fwd}; logged loss: {out['logs']['text']}; "
                         f"{out['optimizer']['text']}")
        return out
    out.update(verdict="unguarded", reason=(f"{at}: every micro-batch goes through model(x, y) and backward() "
                                            f"({out['normalization'] or 'no normalization found'}); nothing tests "
                                            "for a micro-batch with no valid target"))
    return out


def _normalization(loop: ast.For) -> str | None:
    for node in ast.walk(loop):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Div)
                and any(isinstance(t, ast.Name) and t.id == "loss" for t in node.targets)):
            return f"line {node.lineno}: {ast.unparse(node)}"
    return None


def _logged(loop: ast.For, parents: dict[ast.AST, ast.AST], watched: set[str]) -> dict[str, Any]:
    """What the loop keeps for logging from a micro-batch: the ``X = loss.detach()`` name and its other values."""
    detach = next((n for n in ast.walk(loop) if isinstance(n, ast.Assign) and _call_name(n.value) == "detach"
                   and isinstance(n.targets[0], ast.Name)), None)
    if detach is None:
        return {"name": None, "text": "no `x = loss.detach()` in the loop"}
    name = detach.targets[0].id  # type: ignore[attr-defined]
    before_guard = not _guards(detach, parents, loop, watched)
    others = [n for n in ast.walk(loop) if isinstance(n, ast.Assign) and n is not detach
              and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    if before_guard:
        text = (f"`{name}` = the model's loss, assigned at line {detach.lineno} before any test of the targets "
                "(an all-masked micro-batch logs whatever the model returned: NaN on a vulnerable model)")
    elif others:
        text = f"`{name}` = `{ast.unparse(others[0].value)}` for a skipped micro-batch (line {others[0].lineno})"
    else:
        text = f"`{name}` keeps the previous micro-batch's value for a skipped micro-batch"
    return {"name": name, "line": detach.lineno, "before_guard": before_guard,
            "masked_value": ast.unparse(others[0].value) if others and not before_guard else None, "text": text}


def _optimizer(tree: ast.AST, loop: ast.For) -> dict[str, Any]:
    """``optimizer.step()`` after the loop, and whether anything keeps it from running with no gradient."""
    parents = _parents(tree)
    body = getattr(parents.get(loop), "body", [])
    after = body[body.index(loop) + 1:] if loop in body else []
    steps = [c for stmt in after for c in ast.walk(stmt)
             if _call_name(c) == "step" and "optimizer" in ast.unparse(c)]
    if not steps:
        return {"line": None, "unconditional": None, "text": "no optimizer.step() found after the loop"}
    step = steps[0]
    conditional = False
    node: ast.AST = step
    while node in parents and parents[node] is not parents.get(loop):
        node = parents[node]
        test = ast.unparse(node.test) if isinstance(node, ast.If) else ""
        conditional |= bool(test) and "scaler" not in test
    text = (f"optimizer.step() (line {step.lineno}) runs after every loop, even when every micro-batch was "
            "skipped and no parameter has a gradient") if not conditional else (
            f"optimizer.step() (line {step.lineno}) is conditional")
    return {"line": step.lineno, "unconditional": not conditional, "text": text}


# ---------------------------------------------------------------- lifting the loop for the suite (loop.py runs it)


class NotLiftable(Exception):
    """The script's loop cannot be lifted or run in the harness; the message says why."""


@dataclass
class Lifted:
    loop: Any   # code object of the micro-step loop
    after: Any  # code object of the optimizer step that follows it
    names: frozenset[str]
    logged: str  # the name the loop keeps for logging (``train_loss``)
    lines: tuple[int, int]
    pre: Any = None  # code object of the plain statements just before the loop (``train_loss = None``)
    log: Any = None  # code object of what the printed loss is made of, ending in ``PRINTED = <the printed loss>``
    printed: str | None = None  # the printed loss's expression (``debiased_smooth_loss``); None: no print found
    constants: dict[str, Any] | None = None  # the script's top-level ``name = <literal>`` (``ema_beta = 0.9``)


PRINTED = "__printed_loss__"


class _FirstUse(ast.NodeVisitor):
    """Each name's first use in execution order: an assignment's value before its targets, ``x += 1`` a read."""

    def __init__(self) -> None:
        self.first: dict[str, str] = {}

    def visit_Name(self, node: ast.Name) -> None:
        self.first.setdefault(node.id, "load" if isinstance(node.ctx, ast.Load) else "store")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.first.setdefault(node.target.id, "load")
        else:
            self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)


def free_names(stmts: list[ast.stmt]) -> set[str]:
    """Names the statements read before binding them, builtins excluded: what the harness must provide."""
    seen = _FirstUse()
    for stmt in stmts:
        seen.visit(stmt)
    return {n for n, use in seen.first.items() if use == "load" and not hasattr(builtins, n)}


def _printed_loss(stmt: ast.stmt) -> ast.expr | None:
    """The value a print formats after ``loss:`` (``print0(f"... | loss: {debiased_smooth_loss:.6f} | ...")``)."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.JoinedStr):
            for before, part in zip(node.values, node.values[1:], strict=False):
                if (isinstance(before, ast.Constant) and str(before.value).rstrip().endswith("loss:")
                        and isinstance(part, ast.FormattedValue)):
                    return part.value
    return None


def _slice(region: list[ast.stmt], expr: ast.expr) -> list[ast.stmt]:
    """The statements of ``region`` the value of ``expr`` depends on (assignments, and the ``if``s around them)."""
    needed, chosen = _names(expr), []
    for stmt in reversed(region):
        stored = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if stored & needed:
            chosen.insert(0, stmt)
            needed |= _names(stmt)
    return chosen


def _constants(tree: ast.Module) -> dict[str, Any]:
    return {t.id: stmt.value.value for stmt in tree.body if isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Constant) for t in stmt.targets if isinstance(t, ast.Name)}


def lift_source(text: str, filename: str = "chat_sft.py") -> Lifted:
    """The loop, the plain statements just before it, the optimizer step after it (up to ``zero_grad`` or, with
    none there, the step itself) and, when the script prints a ``loss:``, the statements that make that value."""
    tree = ast.parse(text)
    loop = find_loop(tree)
    if loop is None:
        raise NotLiftable(f"{filename}: no micro-step loop")
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    body = getattr(parents.get(loop), "body", [])
    at = body.index(loop)
    pre: list[ast.stmt] = []
    for stmt in reversed(body[:at]):
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            break
        pre.insert(0, stmt)
    rest = body[at + 1:]
    printing = next((i for i, stmt in enumerate(rest) if _printed_loss(stmt) is not None), len(rest))
    ends = [i for i, stmt in enumerate(rest[:printing]) if "zero_grad" in ast.unparse(stmt)] or [
        i for i, stmt in enumerate(rest[:printing]) if any(
            _call_name(c) == "step" and "optimizer" in ast.unparse(c) for c in ast.walk(stmt))][-1:]
    if not ends:
        raise NotLiftable(f"{filename}: no model.zero_grad(...) or optimizer step after the micro-step loop "
                          f"(line {loop.lineno})")
    after = rest[:ends[0] + 1]
    expr = _printed_loss(rest[printing]) if printing < len(rest) else None
    log: list[ast.stmt] = []
    if expr is not None:
        log = _slice(rest[ends[0] + 1:printing], expr)
        log.append(ast.copy_location(ast.Assign(targets=[ast.Name(PRINTED, ast.Store())], value=expr),
                                     rest[printing]))
    detach = next((n.targets[0].id for n in ast.walk(loop) if isinstance(n, ast.Assign)
                   and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
                   and n.value.func.attr == "detach" and isinstance(n.targets[0], ast.Name)), "train_loss")

    def code(stmts: list[ast.stmt]) -> Any:
        return compile(ast.fix_missing_locations(ast.Module(body=stmts, type_ignores=[])), filename, "exec")

    return Lifted(code([loop]), code(after), frozenset(free_names([*pre, loop, *after, *log])), detach,
                  (loop.lineno, after[-1].end_lineno or after[-1].lineno), code(pre), code(log),
                  None if expr is None else ast.unparse(expr), _constants(tree))


def lift(path: Path) -> Lifted:
    return lift_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
