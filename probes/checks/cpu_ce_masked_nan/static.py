"""The static detector of this check: read ``chunked_linear_cross_entropy`` from source, never import it.

Stdlib only. The question: with ``num_items_in_batch`` None and no trainable
label, what divisor does the function hand to its autograd Function?

* ``vulnerable``: inside the ``num_items_in_batch is None`` branch the divisor
  is set to NaN/inf (``float("nan")``, ``math.nan``, ``torch.nan``), or is the
  bare label count with no floor;
* ``fixed``: in that branch every assignment of the divisor has a positive
  floor (``clamp(min=1)``, ``max(..., 1)``) and none sets it to NaN;
* ``absent``: no ``unsloth_zoo/cpu/ops.py`` or no such function;
* ``unknown``: any other shape (abstain rather than guess).
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


def _floored(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
            args = [*n.args, *(k.value for k in n.keywords if k.arg in ("min", None))]
            positive = any(isinstance(a, ast.Constant) and isinstance(a.value, (int, float))
                           and not isinstance(a.value, bool) and a.value > 0 for a in args)
            if name in ("clamp", "clamp_min", "clip", "max", "maximum") and positive:
                return True
    return False


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
    if all(_floored(a.value) for a in assigns if any(isinstance(t, ast.Name) for t in a.targets)):
        return {"verdict": "fixed", "file": file, "line": branch.lineno,
                "reason": f"line {branch.lineno}: every divisor assigned when the count argument is None has a "
                          f"positive floor ({', '.join(sorted(targets))})"}
    return {"verdict": "unknown", "file": file, "line": branch.lineno,
            "reason": "the None branch neither floors its divisor nor sets it non-finite; cannot prove either"}


def detect_installed() -> dict[str, Any]:
    return installed.detect_installed(REL, analyze_source, "no unsloth_zoo/cpu/ops.py (this zoo has no CPU backend)")
