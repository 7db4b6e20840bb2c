"""``[[expect]]`` tables of a matrix file: the states a matrix is known to show, per cell and check.

Like pytest's strict xfail (``reports.gate.evaluate`` does the judging): a
table names the cells it applies to (a build name per axis of the matrix:
``unsloth`` and ``zoo``, or the axis of another subject, each optional: default
every build of that package), the trainer stack (``stack``,
a ``[[stack]]`` name, optional: default every stack), the check (optional:
default every registered check) and the guard state expected. Tables apply in file
order, so a narrow table after a file-wide one overrides it. Problems are
collected in the matrix file's style (``matrix.spec``): the table, the key,
the bad value, a close match and the valid values.
"""

from __future__ import annotations

import difflib
from typing import Any

FIXED_KEYS = ("stack", "check", "state")
# The unsloth x unsloth_zoo axes, for a caller that names none.
UNSLOTH_AXES = {"unsloth": "unsloth", "zoo": "unsloth_zoo"}


def _suggest(word: str, valid: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, sorted(valid), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _table_problems(where: str, table: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    problems = []
    for key, value in table.items():
        if key not in keys:
            problems.append(f"{where}: unknown key {key!r}{_suggest(key, keys)}; valid keys: {', '.join(keys)}")
        elif not isinstance(value, str):
            problems.append(f"{where}: {key!r} must be a string, got {type(value).__name__} {value!r:.60}")
    return problems


def resolve(raw: Any, roles: dict[str, str], cells: list[tuple[str, dict[str, str], str | None]],
            problems: list[str], *, stacks: list[str] | tuple[str, ...] = (),
            axes: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """``{cell id: {check id: state}}`` for ``cells`` (``(id, {axis: build name}, stack name or None)``),
    given each build's axis (``roles``: name -> axis), the file's stack names (``stacks``) and its axes
    (``axes``: axis -> package, in order; default unsloth x unsloth_zoo); problems are appended to ``problems``.
    A table's ``check`` must be one of the checks these axes run."""
    from probes.checks import for_axes, info, infos
    from probes.checks.vocabulary import GUARD_STATES

    axes = dict(UNSLOTH_AXES if axes is None else axes)
    keys = (*axes, *FIXED_KEYS)
    out: dict[str, dict[str, str]] = {cell[0]: {} for cell in cells}
    if not isinstance(raw, list):
        return out  # the top-level type check reports it
    checks = [info(n).id for n in for_axes(axes)]
    registered = [i.id for i in infos()]
    for i, table in enumerate(raw, 1):
        where = f"[[expect]] #{i}"
        if not isinstance(table, dict):
            problems.append(f"{where}: must be a table, got {type(table).__name__}")
            continue
        bad = _table_problems(where, table, keys)
        if "state" not in table:
            bad.append(f"{where}: missing required key 'state' (one of {', '.join(GUARD_STATES)})")
        for role, package in axes.items():
            name = table.get(role)
            if isinstance(name, str) and roles.get(name) != role:
                valid = [n for n, r in roles.items() if r == role]
                bad.append(f"{where}: {role} = {name!r} is not a {package} build in this file"
                           f"{_suggest(name, valid)}; {role} builds: {', '.join(valid)}")
        stack = table.get("stack")
        if isinstance(stack, str) and stack not in stacks:
            bad.append(f"{where}: stack = {stack!r} is not a [[stack]] in this file{_suggest(stack, tuple(stacks))}; "
                       + (f"stacks: {', '.join(stacks)}" if stacks else "this file has no [[stack]] tables"))
        check, state = table.get("check"), table.get("state")
        if isinstance(check, str) and check not in checks:
            what = "a check of this matrix's packages" if check in registered else "a registered check"
            bad.append(f"{where}: check = {check!r} is not {what}{_suggest(check, checks)}; "
                       f"checks: {', '.join(checks)}")
        if isinstance(state, str) and state not in GUARD_STATES:
            bad.append(f"{where}: state = {state!r} is not a guard state{_suggest(state, GUARD_STATES)}; "
                       f"valid: {', '.join(GUARD_STATES)}")
        problems += bad
        if bad:
            continue
        hits = [cid for cid, names, s in cells
                if all(table.get(r, n) == n for r, n in names.items()) and table.get("stack", s) == s]
        if not hits and cells:
            problems.append(f"{where}: names no cell of this matrix (the pair is excluded or not included)")
        for cid in hits:
            for c in [check] if check is not None else checks:
                out[cid][c] = state
    return out
