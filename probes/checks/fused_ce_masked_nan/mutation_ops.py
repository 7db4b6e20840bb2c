"""The mutation operators and the mutant generator (stdlib ``ast`` only).

A small operator set in the spirit of mutmut's classic one: ``cmp`` (swap a
comparison), ``bool`` (and/or), ``arith`` (+ - * /), ``not`` (drop a
``not``), ``negate`` (negate an ``if`` condition), ``const`` (numbers +1 or
to 0, booleans flipped), ``str`` (a string constant changed) and ``delete``
(a statement replaced by ``pass``). Docstrings, imports, log calls, message
strings and signatures are left alone; at module level only the values of
constant assignments are mutated.

Mutant ids are stable across unrelated edits: ``<scope>.<operator>.<hash>``
where the hash covers the enclosing function, the operator, the text before
and after, and the occurrence number of that same change in that function.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

# Functions left out of the scope, with why (reported in the output).
OUT_OF_SCOPE = {
    "install_at_import": "called only by `import unsloth`, which runs once per process; the real-backport "
                         "integration cells (tests/integration/test_mutants.py) exercise it",
}


@dataclass(frozen=True)
class Mutant:
    id: str
    operator: str
    scope: str
    line: int
    before: str
    after: str
    source: str

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return d


# ---------------------------------------------------------------- operators

_CMP_SWAP: dict[type, type] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
    ast.GtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_BIN_SWAP: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
_BOOL_SWAP: dict[type, type] = {ast.And: ast.Or, ast.Or: ast.And}


def _changes(node: ast.AST, parent: ast.AST | None) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST | None]]]:
    """(operator, edit) pairs for one node; an edit mutates a copy in place or returns its replacement."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _CMP_SWAP:
                def edit(n: ast.AST, i: int = i) -> None:
                    assert isinstance(n, ast.Compare)
                    n.ops[i] = _CMP_SWAP[type(n.ops[i])]()
                yield "cmp", edit
    elif isinstance(node, ast.BoolOp) and type(node.op) in _BOOL_SWAP:
        def edit_bool(n: ast.AST) -> None:
            assert isinstance(n, ast.BoolOp)
            n.op = _BOOL_SWAP[type(n.op)]()
        yield "bool", edit_bool
    elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAP:
        def edit_bin(n: ast.AST) -> None:
            assert isinstance(n, ast.BinOp)
            n.op = _BIN_SWAP[type(n.op)]()
        yield "arith", edit_bin
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not", lambda n: n.operand  # type: ignore[attr-defined]
    elif isinstance(node, ast.Constant) and not _is_docstring(node, parent):
        value = node.value
        if isinstance(value, bool):
            yield "const", lambda n: ast.Constant(not value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield "const", lambda n: ast.Constant(value + 1)
            if value != 0:
                yield "const", lambda n: ast.Constant(type(value)(0))
        elif isinstance(value, str):
            yield "str", lambda n: ast.Constant("XX" + value + "XX")
    if isinstance(node, (ast.If, ast.IfExp)):
        def edit_cond(n: ast.AST) -> None:
            assert isinstance(n, (ast.If, ast.IfExp))
            n.test = ast.UnaryOp(ast.Not(), n.test)
        yield "negate", edit_cond
    if isinstance(node, (ast.Expr, ast.Assign, ast.AugAssign, ast.Return, ast.If)) and not _is_docstring(node, parent):
        yield "delete", lambda n: ast.Pass()


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    expr = node if isinstance(node, ast.Expr) else parent if isinstance(parent, ast.Expr) else None
    return (expr is not None and isinstance(expr.value, ast.Constant) and isinstance(expr.value.value, str))


class _Walk:
    """Every mutable site of a module, in a fixed order, with its enclosing scope."""

    def __init__(self, tree: ast.Module) -> None:
        self.sites: list[tuple[ast.AST, ast.AST | None, str]] = []
        self._visit(tree, None, "<module>", top=True)

    def _visit(self, node: ast.AST, parent: ast.AST | None, scope: str, top: bool = False) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _is_message(node):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = node.name if scope == "<module>" else f"{scope}.{node.name}"
            if scope in OUT_OF_SCOPE:
                return
            # Signatures and decorators are not behaviour under test; bodies are.
            for child in node.body:
                self._visit(child, node, scope)
            return
        if scope == "<module>" and not top:
            # Module level: only the values of plain constant assignments (not __all__, not logger).
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and not any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                self.sites.append((node.value, node, scope))
            return
        if not top:
            self.sites.append((node, parent, scope))
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "type_comment"):
                continue
            if isinstance(value, list):
                for child in value:
                    if isinstance(child, ast.AST):
                        self._visit(child, node, scope)
            elif isinstance(value, ast.AST):
                self._visit(value, node, scope)

    def __iter__(self) -> Iterator[tuple[ast.AST, ast.AST | None, str]]:
        return iter(self.sites)


def _skip(node: ast.AST, parent: ast.AST | None) -> bool:
    """Strings that only word a message (log text, exception text) are not behaviour."""
    if isinstance(parent, ast.Call):
        func = parent.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("warning", "info", "debug", "error", "TypeError", "ValueError", "RuntimeError"):
            return True
    return isinstance(parent, ast.JoinedStr) or isinstance(node, ast.JoinedStr)


def _is_message(node: ast.AST) -> bool:
    """A statement that only logs (removing it changes no behaviour the suite could see)."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id == "logger")


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for i, child in enumerate(value):
                if child is old:
                    value[i] = new
                    return
    raise ValueError(f"node not found under its parent at line {getattr(old, 'lineno', '?')}")


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 120 else text[:117] + "..."


def generate(source: str) -> list[Mutant]:
    """Every mutant of ``source`` (a guard module), ids stable across unrelated edits.

    Each change is made on the one parsed tree, unparsed, and undone.
    """
    tree = ast.parse(source)
    seen: dict[tuple[str, str, str, str], int] = {}
    mutants: list[Mutant] = []
    for node, parent, scope in _Walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _skip(node, parent):
            continue
        holder = parent if parent is not None else tree
        # A constant reads better with its surroundings, when they are short.
        context = parent if isinstance(node, ast.Constant) and parent is not None \
            and len(ast.unparse(parent)) <= 80 else None
        for operator, edit in _changes(node, parent):
            if operator == "delete" and _is_message(node):
                continue
            before_text = _snippet(context or node)
            saved = {f: (list(v) if isinstance(v, list) else v) for f, v in ast.iter_fields(node)}
            replacement = edit(node)
            if replacement is not None:
                _replace(holder, node, replacement)
            after_text = _snippet(context or (replacement if replacement is not None else node))
            try:
                mutated = ast.unparse(tree)
                compile(mutated, "<mutant>", "exec")
            except (SyntaxError, ValueError):
                mutated = ""
            finally:
                if replacement is not None:
                    _replace(holder, replacement, node)
                for f, v in saved.items():
                    setattr(node, f, v)
            if not mutated:
                continue
            key = (scope, operator, before_text, after_text)
            seen[key] = seen.get(key, 0) + 1
            digest = hashlib.sha256("\0".join([*key, str(seen[key])]).encode()).hexdigest()[:8]
            mutants.append(Mutant(f"{scope}.{operator}.{digest}", operator, scope, getattr(node, "lineno", 0),
                                  before_text, after_text, mutated))
    return mutants


def sample(mutants: list[Mutant], n: int | None) -> list[Mutant]:
    """A deterministic sample of ``n`` (all when None): ordered by a hash of the id, not by position."""
    if n is None or n >= len(mutants):
        return mutants
    ranked = sorted(mutants, key=lambda m: hashlib.sha256(m.id.encode()).hexdigest())
    keep = {m.id for m in ranked[:n]}
    return [m for m in mutants if m.id in keep]
