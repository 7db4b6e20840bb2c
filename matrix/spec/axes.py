"""The axes of a matrix: which packages its builds may name, which check subject they form, and the cells.

A matrix's builds are the packages of one check subject (``probes.checks.Subject``):
unsloth x unsloth_zoo wheels, or a source tree such as a nanochat checkout. Each
package is an axis; a cell takes one build per axis (``[pairs]``: the product by
default, ``include`` / ``exclude`` naming a build per axis).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from packaging.utils import canonicalize_name

from matrix.spec.tables import suggest
from probes import checks


def packages() -> dict[str, str]:
    """Every package a build may name (canonical distribution name -> its axis), from the checks' subjects."""
    return {canonicalize_name(dist): role for s in checks.subjects() for dist, role in s.axes.items()}


def subject_of(roles: Any) -> checks.Subject | None:
    """The registered subject whose axes are exactly ``roles``, or None."""
    return next((s for s in checks.subjects() if set(s.roles) == set(roles)), None)


def subjects_text() -> str:
    return "; ".join(" x ".join(s.axes) for s in checks.subjects())


def subject(by_role: dict[str, list[Any]], problems: list[str]) -> checks.Subject | None:
    """The one check subject whose packages the file's builds are: every axis needs a build."""
    present = set(by_role)
    fits = [s for s in checks.subjects() if present <= set(s.roles)]
    if not fits:
        names = {r: ", ".join(b.name for b in bs) for r, bs in by_role.items()}
        problems.append("the builds mix packages no one check is about ("
                        + "; ".join(f"{r}: {n}" for r, n in names.items())
                        + f"); a matrix's builds are the packages of one check subject: {subjects_text()}")
        return None
    subject = fits[0]
    missing = [d for d, r in subject.axes.items() if r not in present]
    if missing:
        problems.append(f"no {', '.join(missing)} build: a matrix of {' x '.join(subject.axes)} needs at least one "
                        "build of each package")
        return None
    return subject


def pair_ref(where: str, entry: Any, builds: dict[str, Any], roles: tuple[str, ...],
              problems: list[str]) -> tuple[Any, ...] | None:
    keys = set(entry) if isinstance(entry, dict) else set()
    if not isinstance(entry, dict) or keys - {*roles, "options"} or not set(roles) <= keys:
        shape = ", ".join(f"{r} = NAME" for r in roles)
        problems.append(f"{where}: each entry must be {{ {shape} }}, got {entry!r:.80}")
        return None
    out = []
    for role in roles:
        name = entry[role]
        b = builds.get(name) if isinstance(name, str) else None
        if b is None:
            problems.append(f"{where}: {role} = {name!r} is not a build in this file{suggest(str(name), builds)}; "
                            f"builds: {', '.join(builds)}")
            return None
        if b.role != role:
            problems.append(f"{where}: {role} = {name!r} is a {b.package} build")
            return None
        out.append(b)
    return tuple(out)


def expand(pairs: dict[str, Any], builds: dict[str, Any], by_role: dict[str, list[Any]], options: Any,
           problems: list[str], *, make_cell: Callable[..., Any], parse_options: Callable[..., Any]) -> list[Any]:
    """The cells ``[pairs]`` selects: one build per axis (``by_role``, in the subject's order), each with its
    options; ``make_cell(builds, options)`` and ``parse_options`` are ``matrix.spec``'s (which imports this)."""
    product = pairs.get("product", True)
    roles = tuple(by_role)
    chosen: list[tuple[tuple[Any, ...], Any]] = []
    if product is True:
        chosen = [(combo, options) for combo in itertools.product(*by_role.values())]
    for i, entry in enumerate(pairs.get("include", []) if isinstance(pairs.get("include"), list) else [], 1):
        ref = pair_ref(f"[pairs] include #{i}", entry, builds, roles, problems)
        if ref:
            opts, p = parse_options(f"[pairs] include #{i} options", entry.get("options", {}), options)
            problems += p
            chosen = [c for c in chosen if c[0] != ref] + [(ref, opts)]
    excluded = set()
    for i, entry in enumerate(pairs.get("exclude", []) if isinstance(pairs.get("exclude"), list) else [], 1):
        ref = pair_ref(f"[pairs] exclude #{i}", entry, builds, roles, problems)
        if ref:
            excluded.add(tuple(b.name for b in ref))
    cells = [make_cell(combo, o) for combo, o in chosen if tuple(b.name for b in combo) not in excluded]
    if builds and not cells and not problems:
        problems.append("[pairs]: the selection is empty (product = false and no include, or all excluded)")
    return cells
