"""Locating the forward: which ``UnslothFusedLoss.forward`` definitions the entry module makes reachable.

``locate`` resolves the class through re-exports and conditional definitions, finds ``forward`` in its body or
its bases, applies a module-level ``UnslothFusedLoss.forward = ...`` patch, and returns the forwards to judge,
or the verdict when there is nothing to judge (no class or forward: ``absent``; a base or binding that
cannot be read: ``unknown``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .analysis import Analysis
from .syntax import const_truth, is_class_ref
from .values import CE_MODULE, CLASS_NAME, EMPTY, ClassInfo, Func, StaticVerdict, Val, join, kind


@dataclass(frozen=True)
class Located:
    forwards: tuple[Func, ...] = ()
    classes: tuple[ClassInfo, ...] = ()
    verdict: StaticVerdict | None = None  # set when the forward cannot be judged (absent / unknown)


def module_name(file: str | None) -> str:
    """The dotted module a file path names (from its ``unsloth_zoo`` component), else the CE module."""
    if file:
        parts = file.replace("\\", "/").split("/")
        if "unsloth_zoo" in parts:
            rel = parts[len(parts) - 1 - parts[::-1].index("unsloth_zoo"):]
            if rel[-1].endswith(".py"):
                rel[-1] = rel[-1][:-3]
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                return ".".join(rel)
    return CE_MODULE


def locate(an: Analysis, file: str | None) -> Located:
    cls_val = an.global_value(an.entry, CLASS_NAME)
    if cls_val is None:
        return Located(verdict=StaticVerdict("absent", f"no class {CLASS_NAME} in the module", file))
    classes = [e for e in cls_val if isinstance(e, ClassInfo)]
    unresolved = [e[1] for e in cls_val if kind(e) == "R"]
    if unresolved:
        return Located(verdict=StaticVerdict("unknown", f"{CLASS_NAME}: {unresolved[0]}", file))
    if not classes:
        return Located(verdict=StaticVerdict(
            "unknown", f"{CLASS_NAME} is bound to something the reading cannot resolve to a class", file))
    forwards: list[Func] = []
    problems: list[str] = []
    for cls in classes:
        fwd = an.class_attr(cls, "forward")
        fwd = _patched_forward(an, cls, fwd)
        if fwd is None:
            external = _external_bases(an, cls)
            if external:
                problems.append(f"{CLASS_NAME} defines no forward and inherits from {external}, which cannot "
                                "be read")
            continue
        funcs = [e for e in fwd if isinstance(e, Func)]
        if len(funcs) != len(fwd):
            problems.append(f"{CLASS_NAME}.forward is bound to an expression the reading cannot resolve")
        forwards += funcs
    if problems:
        return Located(verdict=StaticVerdict("unknown", problems[0], file))
    if not forwards:
        return Located(verdict=StaticVerdict("absent", f"{CLASS_NAME} has no forward", file))
    return Located(forwards=tuple(forwards), classes=tuple(classes))


def _patched_forward(an: Analysis, cls: ClassInfo, fwd: Val | None) -> Val | None:
    """A module-level ``UnslothFusedLoss.forward = ...`` in the class's module replaces (or, under a
    condition, joins) the forward its body defines."""
    out = fwd

    def walk(stmts: list[ast.stmt], conditional: bool) -> None:
        nonlocal out
        for s in stmts:
            if isinstance(s, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "forward" and is_class_ref(t.value)
                    for t in s.targets):
                v = an.ev_global(cls.mod, s.value)
                out = join(out or EMPTY, v) if conditional else v
            elif isinstance(s, ast.If) and const_truth(s.test) is not False:
                walk(s.body, True)
                walk(s.orelse, True)

    walk(cls.mod.tree.body, False)
    return out


def _external_bases(an: Analysis, cls: ClassInfo, seen: set[int] | None = None) -> str | None:
    """A base class (anywhere up the tree) that cannot be read and is not torch's ``autograd.Function``."""
    seen = seen or set()
    seen.add(id(cls.node))
    for base in cls.node.bases:
        for e in an.ev_global(cls.mod, base):
            if isinstance(e, ClassInfo):
                if id(e.node) not in seen:
                    inner = _external_bases(an, e, seen)
                    if inner:
                        return inner
            elif kind(e) == "X" and e[1].split(".")[0] in ("torch", "builtins", "typing", "abc"):
                continue
            elif kind(e) in ("X", "R"):
                return ast.unparse(base)
    return None
