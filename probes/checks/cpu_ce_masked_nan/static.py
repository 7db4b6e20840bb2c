"""The static detector of this check: read ``chunked_linear_cross_entropy`` from source, never import it.

Stdlib only. The question: with ``num_items_in_batch`` None and no trainable
label, what divisor does the function hand to its autograd Function?

* ``vulnerable``: inside the ``num_items_in_batch is None`` branch the divisor
  is set to NaN/inf (``float("nan")``, ``math.nan``, ``torch.nan``), or is the
  bare label count with no floor;
* ``fixed``: in that branch every assignment is a floor of at least 1 at the top
  of its value (``clamp(min=1)``, ``max(..., 1)``, under ``.item()`` / ``float()``
  at most), none of those names is assigned again after the branch, and every
  ``.apply(...)`` and non-constant division of the function takes one of them;
* ``absent``: no ``unsloth_zoo/cpu/ops.py`` or no such function;
* ``unknown``: any other shape (abstain rather than guess), and whenever the
  function that runs may not be the one read: defined twice, decorated, rebound
  at module level, reached by ``setattr`` / ``global`` / ``exec``, or using
  ``global`` / ``nonlocal`` itself. A floor below 1 (``clamp(min=1e-8)``) is no
  floor: 0 in an integer count, after ``int()``, or in fp16.
"""

from __future__ import annotations

import ast
from typing import Any

from probes.checks import installed

REL = ("cpu", "ops.py")
FUNCTION = "chunked_linear_cross_entropy"
NAN_NAMES = {"nan", "inf"}


def _is_none_test(test: ast.AST) -> str | None:
    """The name tested by ``X is None``, if that is the test."""
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
            and isinstance(test.left, ast.Name)):
        return test.left.id
    return None


def _counts(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("sum", "count_nonzero")
               for n in ast.walk(node))


def _non_finite(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "float" and n.args
                and isinstance(n.args[0], ast.Constant) and str(n.args[0].value).lower().lstrip("+-") in NAN_NAMES):
            return True
        if isinstance(n, ast.Attribute) and n.attr in NAN_NAMES:
            return True
    return False


def _at_least_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
        not isinstance(node.value, bool) and node.value >= 1


def _floored(node: ast.AST) -> bool:
    """The value itself is a floor of at least 1 (not a floor somewhere inside it): ``c.clamp(min=1)``,
    ``torch.clamp(c, min=1)``, ``max(c, 1)``, optionally under ``.item()`` / ``float()`` / ``int()``."""
    while isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "float", "long", "int")
             and not node.args) or (isinstance(node.func, ast.Name) and node.func.id in ("float", "int")
                                    and len(node.args) == 1)):
        node = node.func.value if isinstance(node.func, ast.Attribute) else node.args[0]
    if not isinstance(node, ast.Call):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    if name in ("clamp", "clamp_min", "clip"):
        floor = next((k.value for k in node.keywords if k.arg == "min"), None)
        own = isinstance(node.func, ast.Attribute) and not (isinstance(node.func.value, ast.Name)
                                                            and node.func.value.id == "torch")
        floor = floor or (node.args[0] if own and node.args else node.args[1] if len(node.args) > 1 else None)
        cap = next((k.value for k in node.keywords if k.arg == "max"), None)
        return floor is not None and _at_least_one(floor) and (cap is None or _at_least_one(cap))
    if name in ("max", "maximum"):
        return any(_at_least_one(a) for a in node.args) and len(node.args) >= 2
    return False


def _replaced(tree: ast.Module, fn: ast.FunctionDef) -> str | None:
    """Why the function that runs may not be the one read, or None."""
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == FUNCTION]
    if len(defs) > 1:
        return f"{FUNCTION} is defined {len(defs)} times"
    if fn.decorator_list:
        return f"{FUNCTION} is decorated with @{ast.unparse(fn.decorator_list[0])}"
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(getattr(t, "id", getattr(t, "attr", None)) == FUNCTION for t in targets):
                return f"line {n.lineno} rebinds {FUNCTION}"
        if isinstance(n, (ast.Global, ast.Nonlocal)) and (FUNCTION in n.names or any(
                n is m for m in ast.walk(fn))):
            return f"line {n.lineno}: `{type(n).__name__.lower()}` (a name may be rebound behind the reading)"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "exec", "eval"):
            return f"line {n.lineno} calls {n.func.id}(), which may replace {FUNCTION}"
    return None


def _assigned_after(fn: ast.FunctionDef, branch: ast.If, names: set[str]) -> int | None:
    """A line outside the None branch (and after its start) that binds one of ``names`` again."""
    inside = {id(n) for n in ast.walk(branch)}
    for n in ast.walk(fn):
        if id(n) in inside or getattr(n, "lineno", 0) < branch.lineno:
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and n.id in names:
            return n.lineno
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_") and \
                isinstance(n.func.value, ast.Name) and n.func.value.id in names:
            return n.lineno  # ``divisor.zero_()``
    return None


def analyze_source(text: str, file: str | None = None) -> dict[str, Any]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return {"verdict": "unknown", "reason": f"cannot parse: {exc.msg} (line {exc.lineno})", "file": file}
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == FUNCTION), None)
    if fn is None:
        return {"verdict": "absent", "reason": f"no function {FUNCTION}", "file": file}
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    # The branch taken when the caller gives no count: an `<argument> is None` test whose body counts labels.
    branch = next((n for n in ast.walk(fn) if isinstance(n, ast.If) and _is_none_test(n.test) in params
                   and any(_counts(s) for s in n.body)), None)
    if branch is None:
        return {"verdict": "unknown", "reason": f"{FUNCTION} has no `<count argument> is None` branch to judge",
                "file": file, "line": fn.lineno}
    assigns = [n for stmt in branch.body for n in ast.walk(stmt) if isinstance(n, ast.Assign)]
    targets = {t.id for a in assigns for t in a.targets if isinstance(t, ast.Name)}
    if not assigns:
        return {"verdict": "unknown", "reason": "the None branch assigns nothing", "file": file, "line": branch.lineno}
    for a in assigns:
        if _non_finite(a.value):
            return {"verdict": "vulnerable", "file": file, "line": a.lineno,
                    "reason": f"line {a.lineno}: with {_is_none_test(branch.test)} None the divisor is set to a "
                              "non-finite value (an all-masked batch gives a NaN loss)"}
    if all(_floored(a.value) for a in assigns) and all(isinstance(t, ast.Name) for a in assigns for t in a.targets):
        why = _replaced(tree, fn)
        again = _assigned_after(fn, branch, targets)
        # What consumes the divisor: the autograd call, or a division by something other than a constant.
        consumers: list[list[ast.AST]] = [list(n.args) for n in ast.walk(fn) if isinstance(n, ast.Call)
                                          and isinstance(n.func, ast.Attribute) and n.func.attr == "apply"]
        consumers += [[n.right] for n in ast.walk(fn) if isinstance(n, ast.BinOp) and isinstance(
            n.op, (ast.Div, ast.FloorDiv, ast.Mod)) and not isinstance(n.right, ast.Constant)]
        unfed = [c for c in consumers if not any(isinstance(x, ast.Name) and x.id in targets
                                                 for a in c for x in ast.walk(a))]
        if why is None and again is None and consumers and not unfed:
            return {"verdict": "fixed", "file": file, "line": branch.lineno,
                    "reason": f"line {branch.lineno}: every divisor assigned when the count argument is None has a "
                              f"floor of at least 1 ({', '.join(sorted(targets))}) and reaches the autograd call"}
        because = why or (f"line {again} assigns the floored divisor again after the None branch" if again else
                          "a division or .apply() call takes something other than the floored divisor")
        return {"verdict": "unknown", "file": file, "line": branch.lineno,
                "reason": f"the None branch floors its divisor, but {because}; cannot prove the floor holds"}
    return {"verdict": "unknown", "file": file, "line": branch.lineno,
            "reason": "the None branch neither floors its divisor (a floor of at least 1 at the top of the value) "
                      "nor sets it non-finite; cannot prove either"}


def detect_installed() -> dict[str, Any]:
    return installed.detect_installed(REL, analyze_source, "no unsloth_zoo/cpu/ops.py (this zoo has no CPU backend)")
