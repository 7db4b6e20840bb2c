"""Syntax-level helpers of the static reading: the tables of known operations and questions asked of one node.

The tables name the tensor methods and library functions whose effect on a count is modelled (counted,
preserved, clamped, divided, only inspected). The helpers read literals and constant tests, strip
value-preserving wrappers so two spellings of a count compare equal, and list the names a function binds
or a target assigns. None of them follows data flow; ``guards.py`` and the ``Analysis`` mixins do.
"""

from __future__ import annotations

import ast
import builtins

from .values import CLASS_NAME

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
           "remainder", "fmod", "__truediv__", "__floordiv__", "__mod__", "__itruediv__", "__ifloordiv__", "truediv",
           "floordiv", "mod", "itruediv", "ifloordiv", "imod"}
RDIVIDES = {"__rtruediv__", "__rfloordiv__", "__rmod__", "__rdiv__"}  # the receiver (first argument) divides
RECIPROCALS = {"reciprocal", "reciprocal_", "rsqrt", "rsqrt_"}
INSPECT = {"is_tensor", "is_floating_point", "numel", "dim", "ndimension", "size", "element_size", "isinstance",
           "hasattr", "getattr", "print", "str", "repr", "callable", "id", "type", "any", "all", "bool",
           "_assert", "is_grad_enabled", "tolist", "nelement", "get_device", "is_contiguous", "format",
           "debug", "info", "warning", "warn", "error", "exception", "critical", "log", "is_compiling"}
WRAPPERS = {"compile", "disable", "grad_and_value", "grad", "vmap", "cache", "lru_cache",
            "staticmethod", "classmethod", "wraps", "no_grad", "inference_mode", "jit", "script"}
LIBRARIES = {"torch", "math", "numpy", "functools", "builtins", "operator", "typing", "os", "sys", "logging",
             "warnings", "inspect", "itertools", "contextlib", "dataclasses", "triton"}
BUILTIN_NAMES = set(dir(builtins))
# Losses whose default reduction is the mean over unmasked labels: (position of ``reduction``, positions of the
# legacy ``size_average`` / ``reduce`` arguments).
MEAN_LOSSES = {"cross_entropy": (6, (3, 5)), "nll_loss": (6, (3, 5)), "CrossEntropyLoss": (4, (1, 3)),
               "NLLLoss": (4, (1, 3))}
REFLECTIVE = {"exec", "eval", "globals", "locals", "vars", "__import__"}  # builtins that reach any name
INPLACE_DUNDERS = {"__setitem__", "__delitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                   "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"}


def strip_starred(node: ast.AST) -> ast.AST:
    return node.value if isinstance(node, ast.Starred) else node


def num(node: ast.AST) -> float | None:
    """A numeric literal (with unary minus), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = num(node.operand)
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


def mentions_name(d: str, name: str) -> bool:
    return f"id='{name}'" in d


def assigned_names(node: ast.AST) -> set[str]:
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


def target_names(t: ast.AST) -> list[str]:
    """Names an assignment target binds (``a``, ``a, (b, *c)``); not the base of ``a.x`` or ``a[i]``."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Starred):
        return target_names(t.value)
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in target_names(e)]
    return []


def param_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> list[str]:
    a = node.args
    return [p.arg for p in [*a.posonlyargs, *a.args]]


def is_class_ref(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == CLASS_NAME) or (
        isinstance(node, ast.Attribute) and node.attr == CLASS_NAME)


def names_class(scope: ast.AST) -> bool:
    for n in ast.walk(scope):
        if (isinstance(n, ast.Name) and n.id == CLASS_NAME) or (isinstance(n, ast.Attribute) and n.attr == CLASS_NAME):
            return True
    return False


def declared_in_nested(node: ast.AST, decl: type[ast.Global] | type[ast.Nonlocal]) -> set[str]:
    """Names a ``global`` / ``nonlocal`` statement declares anywhere inside ``node`` (nested scopes included)."""
    return {name for n in ast.walk(node) if isinstance(n, decl) for name in n.names}
