"""Module names from wheel member names, and relative imports resolved the way the import system does. Stdlib only."""

from __future__ import annotations

import ast
import warnings


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
