"""The static detector: read the tree's ``nanochat/gpt.py`` and ``scripts/chat_sft.py`` by AST, never import them.

Stdlib only. Two questions, two readings:

* the model (``verdict``): where is the training loss computed (the
  ``cross_entropy(..., ignore_index=...)`` call reached from ``GPT.forward``;
  under an ``if``/``else`` or a conditional expression on the reduction
  parameter, the call on the arm a ``'mean'`` loss takes, each arm's test
  evaluated for ``'mean'``), and is an all-ignored target set guarded? ``vulnerable``: a mean reduction
  (the forward's default or a literal) with nothing around it; ``fixed``: the
  call sits under a test of the targets' values whose other arm sets the
  loss (an ``if`` statement or a conditional expression, either arm), or an
  earlier test of the targets' values returns or sets the loss before the
  call, or the loss is passed through ``nan_to_num`` / ``where`` (around the
  call or afterwards), or is divided by a floored count (in the same
  expression or afterwards), or a sum is divided by all positions
  (``targets.numel()``: finite, and the reason says it is not the mean over
  the valid targets, which the suite's n1 judges); ``unknown``: any other shape, and a mean loss
  near a test of the targets' values this reading does not follow (abstain
  rather than guess: the runtime detector, which runs the tree's own model,
  then decides; see ``verdict``).
  ``fallback`` says whether the other arm keeps the autograd graph: a
  constant tensor (``new_tensor(0.0)``) has no ``grad_fn``, so a caller's
  ``loss.backward()`` raises on it.
* the loop (``loop``, :mod:`.static_loop`): what the micro-step loop of
  ``chat_sft.py`` does with a micro-batch that has no valid target.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from . import source
from .static_loop import analyze_loop

CONSTANT_MAKERS = {"new_tensor", "tensor", "zeros", "zeros_like", "new_zeros", "full", "new_full", "as_tensor",
                   "scalar_tensor"}
FINITE_WRAPPERS = {"nan_to_num", "where", "masked_fill", "nan_to_num_"}
FLOORS = {"clamp", "clamp_min", "clip", "max", "maximum"}
SIZES = {"numel", "nelement", "size", "len"}
ALL_POSITIONS = ("divided by all positions: `{}` (line {}): finite on an all -1 batch, but not the mean over the "
                 "valid targets on a partly masked batch")


def _name(node: ast.AST) -> str:
    """The last dotted part of a called name: ``F.cross_entropy`` -> ``cross_entropy``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _parents(fn: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(fn) for child in ast.iter_child_nodes(parent)}


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    """Every function by ``Class.name`` and by bare ``name`` (methods and module functions)."""
    out: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = item
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, node)
    return out


def _ce_calls(fn: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and _name(n.func) == "cross_entropy"
            and _kw(n, "ignore_index") is not None]


def _reduction(call: ast.Call, fn: ast.FunctionDef, mean_arm: bool = False) -> str | None:
    """The reduction the default training call gets: a literal, 'mean' for the parameter on the arm a 'mean'
    test takes, or the default of the forward's parameter."""
    node = _kw(call, "reduction")
    if node is None:
        return "mean"  # torch's default
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and mean_arm and "reduction" in node.id:
        return "mean"
    if isinstance(node, ast.Name):
        args = fn.args.args + fn.args.kwonlyargs
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults)
        defaults += list(fn.args.kw_defaults)
        for arg, default in zip(args, defaults, strict=False):
            if arg.arg == node.id and isinstance(default, ast.Constant):
                return str(default.value)
    return None


def _str_consts(node: ast.AST) -> set[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return {str(e.value) for e in node.elts}  # type: ignore[attr-defined]
    return None


def _when_mean(test: ast.AST, param: str | None) -> bool | None:
    """A test of the reduction parameter, evaluated for 'mean' (None: another test, or it depends on more)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = _when_mean(test.operand, param)
        return None if v is None else not v
    if isinstance(test, ast.BoolOp):
        vals = [_when_mean(v, param) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and param):
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(right, ast.Name) and right.id == param:
        left, right = right, left
    consts = _str_consts(right)
    if not (isinstance(left, ast.Name) and left.id == param) or consts is None:
        return None
    if isinstance(op, (ast.Eq, ast.In, ast.Is)):
        return "mean" in consts
    if isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot)):
        return "mean" not in consts
    return None


def _on_mean_path(call: ast.AST, parents: dict[ast.AST, ast.AST], param: str | None) -> bool | None:
    """Whether every test of the reduction around the call takes the call's arm for 'mean' (None: no such test)."""
    seen, node = False, call
    while node in parents:
        parent, child = parents[node], node
        node = parent
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            v = _when_mean(parent.test, param)
            if v is None:
                continue
            seen = True
            on_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
            if on_body != v:
                return False
    return True if seen else None


def _mean_call(calls: list[ast.Call], fn: ast.FunctionDef, parents: dict[ast.AST, ast.AST]) -> tuple[ast.Call, bool]:
    """The call a 'mean' loss reaches, read arm by arm of an ``if`` on the reduction (source order otherwise);
    and whether an arm's test put it there."""
    param = next((a.arg for a in fn.args.args + fn.args.kwonlyargs if "reduction" in a.arg), None)
    ranked = [(c, _on_mean_path(c, parents, param)) for c in sorted(calls, key=lambda c: (c.lineno, c.col_offset))]
    for want in (True, None):
        for c, v in ranked:
            if v is want:
                return c, bool(v)
    return ranked[0][0], False


def _positions(node: ast.AST, fn: ast.AST, depth: int = 0) -> bool:
    """A count of every position (``targets.numel()``, ``B * T`` from a ``.size()``), never zero on a batch."""
    if depth > 4 or any(isinstance(n, ast.Compare) for n in ast.walk(node)):
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool) and node.value > 0
    if isinstance(node, ast.Call):
        return _name(node.func) in SIZES
    if isinstance(node, ast.Subscript):
        return _name(node.value) == "shape" or _positions(node.value, fn, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        return _positions(node.left, fn, depth + 1) and _positions(node.right, fn, depth + 1)
    if isinstance(node, ast.Name):
        for a in ast.walk(fn):
            if isinstance(a, ast.Assign) and any(node.id in _names(t) for t in a.targets):
                whole = isinstance(a.targets[0], ast.Tuple) and (_name(a.value) == "shape" or (
                    isinstance(a.value, ast.Call) and _name(a.value.func) == "size"))
                return whole or _positions(a.value, fn, depth + 1)
    return False


def _tainted(fn: ast.AST, seed: str) -> set[str]:
    """Names computed from ``seed`` (``valid = targets != -1``; ``n = valid.sum()``), ``seed`` included."""
    names = {seed}
    for _ in range(4):
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _names(node.value) & names:
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _tests_validity(test: ast.AST, watched: set[str]) -> bool:
    """A test on the targets' values (``valid.any()``, ``n > 0``), not on their presence (``targets is None``)."""
    if not _names(test) & watched:
        return False
    presence = [n for n in ast.walk(test) if isinstance(n, ast.Compare) and all(
        isinstance(op, (ast.Is, ast.IsNot)) for op in n.ops)]
    return not presence or any(isinstance(n, ast.Call) or (isinstance(n, ast.Compare) and n not in presence)
                               for n in ast.walk(test))


def _value_kind(value: ast.AST, line: int) -> dict[str, Any]:
    """A constant tensor (no grad_fn) or an expression of tensors, as the loss's value on the guarded arm."""
    calls = [_name(c.func) for c in ast.walk(value) if isinstance(c, ast.Call)]
    if (calls and calls[0] in CONSTANT_MAKERS) or isinstance(value, ast.Constant):
        return {"kind": "constant", "line": line, "grad_fn": False, "text": ast.unparse(value)[:120]}
    return {"kind": "expression", "line": line, "grad_fn": None, "text": ast.unparse(value)[:120]}


def _fallback(arm: list[ast.stmt], loss_names: set[str]) -> dict[str, Any] | None:
    """What the other arm of a guard sets the loss to (or returns): see ``_value_kind``."""
    for stmt in arm:
        for node in ast.walk(stmt):
            sets_loss = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in loss_names
                                                             for t in node.targets)
            value = node.value if sets_loss or isinstance(node, ast.Return) else None
            if value is not None:
                return _value_kind(value, node.lineno)
    return None


def _enclosing_guard(parent: ast.AST, child: ast.AST, watched: set[str], loss_names: set[str],
                     fn: ast.AST, reduction: str | None) -> tuple[ast.AST, dict[str, Any] | None, str] | None:
    """The guard a node enclosing the call makes (``if``/conditional expression on the targets' values, a
    finite wrapper, a floored divisor): (node, fallback, words), or None when it is not one."""
    if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test and _tests_validity(parent.test,
                                                                                                 watched):
        if isinstance(parent, ast.If):
            on_body = child in parent.body
            fallback = _fallback(parent.orelse if on_body else parent.body, loss_names)
        else:
            on_body = child is parent.body
            fallback = _value_kind(parent.orelse if on_body else parent.body, parent.lineno)
        when = ast.unparse(parent.test) if on_body else f"not ({ast.unparse(parent.test)})"
        return parent, fallback, f"cross_entropy runs only when `{when}` (line {parent.lineno})"
    if isinstance(parent, ast.Call) and _name(parent.func) in FINITE_WRAPPERS and child is not parent.func:
        return parent, None, f"the loss is passed through {_name(parent.func)} (line {parent.lineno})"
    if (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div) and child is parent.left
            and any(isinstance(c, ast.Call) and _name(c.func) in FLOORS for c in ast.walk(parent.right))):
        return parent, None, f"the loss is divided by a floored count: `{ast.unparse(parent.right)}` " \
                             f"(line {parent.lineno})"
    if (reduction == "sum" and isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div)
            and child is parent.left and _positions(parent.right, fn)):
        return parent, None, "the sum is " + ALL_POSITIONS.format(ast.unparse(parent.right), parent.lineno)
    return None


def _early_exit(fn: ast.FunctionDef, call: ast.Call, watched: set[str],
                loss_names: set[str]) -> tuple[ast.If, dict[str, Any]] | None:
    """An ``if`` on the targets' values before the call, not around it, that returns or sets the loss."""
    for node in ast.walk(fn):
        if (isinstance(node, ast.If) and node.lineno < call.lineno and _tests_validity(node.test, watched)
                and not any(n is call for n in ast.walk(node))):
            fallback = _fallback(node.body, loss_names)
            if fallback is not None:
                return node, fallback
    return None


def _unfollowed_test(fn: ast.FunctionDef, watched: set[str]) -> ast.AST | None:
    """A test of the targets' values this reading did not follow (a reason to abstain, not to say vulnerable)."""
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)) and _tests_validity(node.test, watched):
            return node
    return None


def _post_guard(fn: ast.FunctionDef, loss: str, after: int, reduction: str | None) -> tuple[ast.AST, str] | None:
    """A later assignment of the loss, or of a name made from it (``loss = loss_sum / n``), that makes it finite
    whatever the count (``nan_to_num``, ``where``, a floored divisor)."""
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and node.lineno > after
                and any(isinstance(t, ast.Name) for t in node.targets)
                and loss in _names(node.value)):
            called = {_name(c.func) for c in ast.walk(node.value) if isinstance(c, ast.Call)}
            words = f"the loss is made finite afterwards (line {node.lineno}: {ast.unparse(node)[:100]})"
            if called & FINITE_WRAPPERS:
                return node, words
            div = isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Div)
            if div and any(isinstance(c, ast.Call) and _name(c.func) in FLOORS
                           for c in ast.walk(node.value.right)):  # type: ignore[attr-defined]
                return node, words
            if div and reduction == "sum" and _positions(node.value.right, fn):  # type: ignore[attr-defined]
                right = node.value.right  # type: ignore[attr-defined]
                return node, "the sum is afterwards " + ALL_POSITIONS.format(ast.unparse(right), node.lineno)
    return None


def _loss_call(fns: dict[str, ast.FunctionDef], forward: ast.FunctionDef) -> tuple[ast.FunctionDef, list[ast.Call]]:
    """The function that computes the loss: the forward itself, or a helper it calls."""
    calls = _ce_calls(forward)
    if calls:
        return forward, calls
    called = {_name(c.func) for c in ast.walk(forward) if isinstance(c, ast.Call)}
    for name in sorted(called):
        fn = fns.get(f"GPT.{name}") or fns.get(name)
        if fn is not None and _ce_calls(fn):
            return fn, _ce_calls(fn)
    return forward, []


def _fixed(base: dict[str, Any], at: str, line: int, words: str, fallback: dict[str, Any],
           then: str = "; otherwise the loss is") -> dict[str, Any]:
    grad = ("a constant with no grad_fn: a caller's loss.backward() raises on it"
            if fallback["kind"] == "constant" else f"`{fallback['text']}`")
    return {**base, "verdict": "fixed", "guard_line": line, "fallback": fallback,
            "reason": f"{at}: {words}{then} {grad} (line {fallback['line']})"}


def analyze_model(text: str, file: str = source.GPT) -> dict[str, Any]:
    """The model's reading of ``gpt.py``'s text (the detector's core; unit-tested on snippets)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return {"verdict": "unknown", "reason": f"{file}: cannot parse: {exc.msg} (line {exc.lineno})", "file": file}
    fns = _functions(tree)
    forward = fns.get("GPT.forward")
    if forward is None:
        return {"verdict": "unknown", "reason": f"{file}: no GPT.forward", "file": file}
    where, calls = _loss_call(fns, forward)
    if not calls:
        return {"verdict": "unknown", "file": file, "line": forward.lineno,
                "reason": f"{file}:{forward.lineno}: GPT.forward computes no cross_entropy(..., ignore_index=...)"}
    parents = _parents(where)
    call, mean_arm = _mean_call(calls, where, parents)
    qual = "GPT.forward" if where is forward else where.name
    at = f"{file}:{call.lineno}"
    reduction = _reduction(call, where, mean_arm)
    stmt: ast.AST = call
    while stmt in parents and not isinstance(stmt, ast.stmt):
        stmt = parents[stmt]
    loss_names = {t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)} or {"loss"}
    targets_arg = call.args[1] if len(call.args) > 1 else _kw(call, "target")
    watched: set[str] = set()
    for seed in (_names(targets_arg) if targets_arg is not None else set()):
        watched |= _tainted(where, seed)
    base = {"file": file, "line": call.lineno, "function": qual, "reduction": reduction,
            "call": ast.unparse(call)[:200]}
    node: ast.AST = call
    while node in parents:
        parent, child = parents[node], node
        node = parent
        guard = _enclosing_guard(parent, child, watched, loss_names, where, reduction)
        if guard is None:
            continue
        at_node, fallback, words = guard
        if isinstance(at_node, (ast.If, ast.IfExp)):
            if fallback is None:
                return {**base, "verdict": "unknown", "guard_line": at_node.lineno,
                        "reason": f"{at}: the loss is computed under a test of the targets at line {at_node.lineno} "
                                  "but the other arm does not set it"}
            return _fixed(base, at, at_node.lineno, words, fallback)
        return {**base, "verdict": "fixed", "guard_line": at_node.lineno, "reason": f"{at}: {words}"}
    early = _early_exit(where, call, watched, loss_names)
    if early is not None:
        test, fallback = early
        return _fixed(base, at, test.lineno, f"before it, when `{ast.unparse(test.test)}` (line {test.lineno})",
                      fallback, then=", the loss is")
    post = _post_guard(where, next(iter(loss_names)), call.lineno, reduction)
    if post is not None:
        return {**base, "verdict": "fixed", "guard_line": post[0].lineno, "reason": f"{at}: {post[1]}"}
    unfollowed = _unfollowed_test(where, watched)
    if unfollowed is not None:
        return {**base, "verdict": "unknown", "guard_line": unfollowed.lineno,
                "reason": f"{at}: a {reduction!r} loss next to a test of the targets' values this reading does not "
                          f"follow (line {unfollowed.lineno}: `{ast.unparse(unfollowed.test)[:80]}`)"}
    if reduction == "mean":
        return {**base, "verdict": "vulnerable",
                "reason": f"{at}: {qual} returns cross_entropy(ignore_index=..., reduction='mean') with no "
                          "guard: an all-ignored target set divides by zero (NaN)"}
    return {**base, "verdict": "unknown",
            "reason": f"{at}: reduction {reduction!r} with no guard; cannot prove the all-masked case either way"}


def analyze_tree(root: Path) -> dict[str, Any]:
    model = analyze_model((root / source.GPT).read_text(encoding="utf-8", errors="replace"))
    loop = analyze_loop((root / source.SFT).read_text(encoding="utf-8", errors="replace"))
    return {**model, "loop": loop, "tree": source.describe(root)}


def detect() -> dict[str, Any]:
    """``static()``'s answer for the tree under test (``unknown`` with the reason when there is none)."""
    try:
        root = source.find_tree()
    except source.NoTree as exc:
        return {"verdict": "unknown", "reason": str(exc), "loop": {"verdict": "unknown", "reason": str(exc)}}
    return analyze_tree(root)
