"""Checking the tables of a matrix file: types, unknown keys, names, cell ids, close-match suggestions.

Shared by ``matrix.spec`` (options, builds, pairs, gate) and ``matrix.spec.stacks``
(``[[stack]]``). Every message names where the problem is (the table), the key
and the bad value, and suggests a close match where there is one.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$")
TYPE_NAMES = {str: "a string", int: "an integer", bool: "a boolean", list: "an array", dict: "a table"}


def suggest(word: str, valid: Any) -> str:
    close = difflib.get_close_matches(word, sorted(valid), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def type_problem(where: str, key: str, value: Any, want: type | tuple[type, ...]) -> str | None:
    wants = want if isinstance(want, tuple) else (want,)
    # bool is an int subclass in Python but not in TOML: keep them apart.
    ok = isinstance(value, wants) and not (isinstance(value, bool) and bool not in wants)
    if ok:
        return None
    names = " or ".join(TYPE_NAMES.get(w, w.__name__) for w in wants)
    return f"{where}: {key!r} must be {names}, got {type(value).__name__} {value!r:.60}"


def check_keys(where: str, table: dict[str, Any], valid: dict[str, Any]) -> list[str]:
    problems = []
    for key, value in table.items():
        if key not in valid:
            problems.append(f"{where}: unknown key {key!r}{suggest(key, valid)}; valid keys: {', '.join(valid)}")
            continue
        p = type_problem(where, key, value, valid[key])
        if p:
            problems.append(p)
    return problems


def name_problem(where: str, name: Any) -> str | None:
    """A build or stack name becomes part of cell ids and directory names."""
    if isinstance(name, str) and not NAME_RE.fullmatch(name):
        return (f"{where}: name {name!r} must be 1-48 characters of letters, digits, '.', '_', '-', "
                "starting with a letter or digit")
    return None


def nox_safe(cell_id: str) -> str:
    """How nox turns a session id into an env directory name (lowercase, [^\\w\\s-] -> '-')."""
    return re.sub(r"[^\w\s-]", "-", cell_id.lower())


def id_collisions(ids: list[str]) -> list[str]:
    """Cell ids must stay distinct, also once nox maps them to directory names (``nox_safe``)."""
    problems = []
    seen: dict[str, str] = {}
    for cid in ids:
        key = nox_safe(cid)
        if key in seen:
            same = "share the id" if seen[key] == cid else "collide once nox maps ids to directory names"
            problems.append(f"cells {seen[key]!r} and {cid!r} {same} ({key!r}); rename one of the builds or stacks")
        seen[key] = cid
    return problems
