"""A call site or a constant-key read checked against a zoo release's table, the way Python would bind it.

:func:`check` takes a ``call(...)`` or ``key[...]`` reference (``references.py``) and the table
(``symbols.py`` with ``signatures.py``'s maps) and answers ``("ok" | "missing" | "unknown", detail)``:

* a call: the callee is found by its path (a module's function, through ``from X import n`` re-exports; a
  class -- its ``__init__``, found on the class or its zoo bases; a method of a class) and the arguments are
  bound as CPython does (keywords first: an unexpected or repeated keyword; then too many positional
  arguments; then missing required ones), giving the ``TypeError`` text Python would raise. A ``*`` or
  ``**`` at the call site hides what it passes: then only what is spelled can break (an unknown keyword).
* a key: the dict's keys (``signatures.py``): a key it lacks is Python's ``KeyError``.

Anything the table cannot decide (no entry: a decorator, a base outside zoo, a dict built otherwise) is
``unknown``: never a break. Stdlib only.
"""

from __future__ import annotations

import ast
import difflib
from functools import lru_cache
from typing import Any

from probes.checks.pair_compat.signatures import parameters

Found = tuple[str, str, int]  # (parameter text "(a, b=1)", qualname for messages, leading parameters bound)


@lru_cache(maxsize=4096)
def _params(text: str) -> tuple[tuple[str, str, bool], ...]:
    fn = ast.parse(f"def f{text}: pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    return tuple((p[0], p[1], p[2]) for p in parameters(fn.args))


def _split(table: dict[str, Any], path: str) -> tuple[str, list[str]] | None:
    """The longest module prefix of ``path`` in the table and the names after it."""
    mods = table["modules"]
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:i])
        if module in mods:
            return module, parts[i:]
    return None


def _lookup(table: dict[str, Any], module: str, name: str, depth: int = 0) -> tuple[str, Any] | None:
    """``(module, callables entry)`` of a name, through ``from X import n`` re-exports, else None."""
    entry = table["modules"].get(module)
    if entry is None or depth > 8:
        return None
    if name in entry.get("callables", {}):
        return module, entry["callables"][name]
    origin = entry.get("origins", {}).get(name)
    if origin is not None:
        src, _, orig = origin.rpartition(".")
        return _lookup(table, src, orig, depth + 1)
    return None


def _method(table: dict[str, Any], module: str, cls: dict[str, Any], name: str,
            depth: int = 0) -> tuple[str, str] | bool | None:
    """``(kind:text, class name)`` of a method found on a class or its zoo bases; None where the class has no
    base that could hold it (only ``object``); False where a base is outside what the table can read."""
    if name in cls["methods"]:
        return cls["methods"][name], cls["class"]
    if depth > 8:
        return False
    for base in cls["bases"]:
        if base == "object":
            continue
        got = _lookup(table, module, base) if "." not in base else None
        if got is None or isinstance(got[1], str):
            return False  # a base from torch or transformers, or one we cannot see: undecidable
        found = _method(table, got[0], got[1], name, depth + 1)
        if found is not None:
            return found
    return None


def target(table: dict[str, Any], path: str, receiver: str) -> Found | None:
    """What a call to ``path`` binds against (see :data:`Found`), or None when undecidable."""
    split = _split(table, path)
    if split is None:
        return None
    module, rest = split
    got = _lookup(table, module, rest[0])
    if got is None:
        return None
    where, entry = got
    if isinstance(entry, str):  # a function
        return (entry, rest[0], 0) if len(rest) == 1 and receiver == "path" else None
    if len(rest) == 1 and receiver == "path":  # a class: its constructor
        init = _method(table, where, entry, "__init__")
        if init is None:
            return "()", entry["class"], 0  # object.__init__: no arguments
        if init is False:
            return None
        kind, text = init[0].split(":", 1)
        return (text, f"{init[1]}.__init__", 1) if kind == "plain" else None
    if len(rest) == 2:
        found = _method(table, where, entry, rest[1])
        if not found:
            return None
        kind, text = found[0].split(":", 1)
        bound = {"static": 0, "class": 1, "plain": 1 if receiver == "instance" else 0}[kind]
        return text, f"{found[1]}.{rest[1]}", bound
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _names(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" and {quoted[-1]}"


def bind(found: Found, call: dict[str, Any]) -> str | None:
    """The ``TypeError`` text binding ``call`` (``callsites.shape``) to ``found`` raises, or None when it binds."""
    text, qual, skip = found
    params = _params(text)[skip:]
    pos = [p for p in params if p[1] in ("posonly", "pos")]
    by_name = {p[0] for p in params if p[1] in ("pos", "kwonly")}
    varargs = any(p[1] == "varargs" for p in params)
    varkw = any(p[1] == "varkw" for p in params)
    n = call["positional"]
    filled = {p[0] for p in pos[:n]}
    for k in call["keywords"]:
        if k not in by_name and not varkw:
            if any(p[0] == k and p[1] == "posonly" for p in params):
                return f"TypeError: {qual}() got some positional-only arguments passed as keyword arguments: '{k}'"
            return f"TypeError: {qual}() got an unexpected keyword argument '{k}'"
        if k in filled:
            return f"TypeError: {qual}() got multiple values for argument '{k}'"
    if not call["star"] and not varargs and n > len(pos):
        lo = sum(not p[2] for p in pos) + skip
        hi = len(pos) + skip
        takes = _plural(hi, "positional argument") if lo == hi else f"from {lo} to {hi} positional arguments"
        if hi == 0 and not params:
            return f"TypeError: {qual}() takes no arguments"
        return f"TypeError: {qual}() takes {takes} but {n + skip} {'was' if n + skip == 1 else 'were'} given"
    if call["star"] or call["dstar"]:
        return None
    given = filled | set(call["keywords"])
    missing = [p[0] for p in pos if not p[2] and p[0] not in given]
    if missing:
        return f"TypeError: {qual}() missing {_plural(len(missing), 'required positional argument')}: {_names(missing)}"
    missing = [p[0] for p in params if p[1] == "kwonly" and not p[2] and p[0] not in given]
    if missing:
        what = _plural(len(missing), "required keyword-only argument")
        return f"TypeError: {qual}() missing {what}: {_names(missing)}"
    return None


def dict_keys(table: dict[str, Any], path: str) -> list[str] | None:
    """The keys of the zoo dict at ``path`` (through re-exports), or None when undecidable or not such a dict."""
    split = _split(table, path)
    if split is None or len(split[1]) != 1:
        return None
    module, name = split[0], split[1][0]
    for _ in range(8):
        entry = table["modules"].get(module)
        if entry is None:
            return None
        if name in entry.get("dicts", {}):
            keys: list[str] | None = entry["dicts"][name]
            return keys
        origin = entry.get("origins", {}).get(name)
        if origin is None:
            return None
        module, _, name = origin.rpartition(".")
    return None


def check(table: dict[str, Any], ref: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(state, evidence)`` of a call or key reference: ``ok``, ``unknown`` or ``missing`` with
    ``{"exception", "detail", "signature" | "key", "closest"}``."""
    if "key" in ref:
        keys = dict_keys(table, ref["path"])
        if keys is None:
            return "unknown", {}
        if ref["key"] in keys:
            return "ok", {}
        near = difflib.get_close_matches(ref["key"], keys, n=1, cutoff=0.75)
        dict_name = ref["path"].rsplit(".", 1)[-1]
        return "missing", {"exception": "KeyError", "detail": f"KeyError: {ref['key']!r}", "key": ref["key"],
                           "closest": f"{dict_name} has {len(keys)} keys" + (f"; closest: {near[0]!r}" if near else
                                                                            f", not {ref['key']!r}")}
    found = target(table, ref["path"], ref["call"]["receiver"])
    if found is None:
        return "unknown", {}
    error = bind(found, ref["call"])
    if error is None:
        return "ok", {}
    signature = f"{found[1]}{found[0]}"
    return "missing", {"exception": "TypeError", "detail": error, "signature": signature,
                       "closest": f"zoo defines {signature}"}
