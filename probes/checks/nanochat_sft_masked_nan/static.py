"""The static detector: read the tree's ``nanochat/gpt.py`` and ``scripts/chat_sft.py`` by AST, never import them.

Stdlib only. Two questions, two readings:

* the model (``verdict``): where is the training loss computed (the
  ``cross_entropy(..., ignore_index=...)`` call reached from ``GPT.forward``),
  and is an all-ignored target set guarded? ``vulnerable``: a mean reduction
  (the forward's default or a literal) with nothing around it; ``fixed``: the
  call sits under a test of the targets' values whose other arm sets the
  loss (a constant, or an expression of the logits), or the loss is passed
  through ``nan_to_num`` / ``where`` afterwards, or is divided by a floored
  count; ``unknown``: any other shape (abstain rather than guess).
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


def _reduction(call: ast.Call, fn: ast.FunctionDef) -> str | None:
    """The reduction the default training call gets: a literal, or the default of the forward's parameter."""
    node = _kw(call, "reduction")
    if node is None:
        return "mean"  # torch's default
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        args = fn.args.args + fn.args.kwonlyargs
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults)
        defaults += list(fn.args.kw_defaults)
        for arg, default in zip(args, defaults, strict=False):
            if arg.arg == node.id and isinstance(default, ast.Constant):
                return str(default.value)
    return None


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


def _fallback(arm: list[ast.stmt], loss_names: set[str]) -> dict[str, Any] | None:
    """What the other arm of a guard sets the loss to: a constant (no grad_fn) or an expression of tensors."""
    for stmt in arm:
        for node in ast.walk(stmt):
            sets_loss = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in loss_names
                                                             for t in node.targets)
            value = node.value if sets_loss or isinstance(node, ast.Return) else None
            if value is None:
                continue
            calls = [_name(c.func) for c in ast.walk(value) if isinstance(c, ast.Call)]
            if calls and calls[0] in CONSTANT_MAKERS:
                return {"kind": "constant", "line": node.lineno, "grad_fn": False, "text": ast.unparse(value)[:120]}
            return {"kind": "expression", "line": node.lineno, "grad_fn": None, "text": ast.unparse(value)[:120]}
    return None


def _post_guard(fn: ast.FunctionDef, loss: str, after: int) -> ast.AST | None:
    """A later assignment of the loss, or of a name made from it (``loss = loss_sum / n``), that makes it finite
    whatever the count (``nan_to_num``, ``where``, a floored divisor)."""
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and node.lineno > after
                and any(isinstance(t, ast.Name) for t in node.targets)
                and loss in _names(node.value)):
            called = {_name(c.func) for c in ast.walk(node.value) if isinstance(c, ast.Call)}
            if called & FINITE_WRAPPERS:
                return node
            if isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Div) and any(
                    isinstance(c, ast.Call) and _name(c.func) in FLOORS for c in ast.walk(node.value.right)):
                return node
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
    call = calls[0]
    qual = "GPT.forward" if where is forward else where.name
    at = f"{file}:{call.lineno}"
    reduction = _reduction(call, where)
    parents = _parents(where)
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
        if isinstance(parent, ast.If) and _tests_validity(parent.test, watched) and child in parent.body:
            fallback = _fallback(parent.orelse, loss_names)
            if fallback is None:
                return {**base, "verdict": "unknown", "guard_line": parent.lineno,
                        "reason": f"{at}: the loss is computed under a test of the targets at line {parent.lineno} "
                                  "but the other arm does not set it"}
            grad = ("a constant with no grad_fn: a caller's loss.backward() raises on it"
                    if fallback["kind"] == "constant" else f"`{fallback['text']}`")
            return {**base, "verdict": "fixed", "guard_line": parent.lineno, "fallback": fallback,
                    "reason": f"{at}: cross_entropy runs only when `{ast.unparse(parent.test)}` "
                              f"(line {parent.lineno}); otherwise the loss is {grad} (line {fallback['line']})"}
    post = _post_guard(where, next(iter(loss_names)), call.lineno)
    if post is not None:
        return {**base, "verdict": "fixed", "guard_line": post.lineno,
                "reason": f"{at}: the loss is made finite afterwards (line {post.lineno}: {ast.unparse(post)[:100]})"}
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
