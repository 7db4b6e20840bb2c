"""Module names from wheel member names, and relative imports resolved the way the import system does. Stdlib only."""

from __future__ import annotations

import ast
import warnings
from collections import deque
from collections.abc import Iterator

# Fields whose nodes are leaves no reader looks at: a name's load/store context, an operator (a reader asks
# ``node.ctx`` or ``compare.ops`` of the node that holds them, never meets them in a walk).
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_FIELDS: dict[type, tuple[str, ...]] = {}


def module_of(member: str, package: str) -> tuple[str, bool] | None:
    """``(dotted module, is_package)`` of a wheel member inside ``package``, or None for any other file."""
    if not member.endswith(".py") or not member.startswith(package + "/"):
        return None
    parts = member[:-3].split("/")
    if not all(p.isidentifier() for p in parts):
        return None  # not importable by name (a script with a dash, a data folder)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def resolve_relative(module: str, is_package: bool, target: str | None, level: int) -> str | None:
    """The absolute module an ``ImportFrom`` names (``from ..x import y`` inside ``module``), or None above the root."""
    if level == 0:
        return target
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) - 1:
        return None
    base = parts[:len(parts) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def parse(text: str) -> ast.Module:
    """``ast.parse`` of a release's source, deaf to the warnings old sources raise (an invalid escape such as
    ``"\\d"`` is a SyntaxWarning): a caller that turns warnings into errors (pytest's ``filterwarnings = error``)
    must not read a parsable module as unparsable."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def children(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` in the same order, less the leaves of :data:`_LEAF_FIELDS`, as a list (the
    readers walk every node of a release: a third of the nodes and two generators per node saved)."""
    fields = _FIELDS.get(type(node))
    if fields is None:
        fields = _FIELDS[type(node)] = tuple(f for f in node._fields if f not in _LEAF_FIELDS)
    out: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out += [v for v in value if isinstance(v, ast.AST)]
    return out


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk(node)``: the same nodes in the same breadth-first order, less those :func:`children` leaves out."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(children(node))
        yield node
