"""The unsloth side of the scan: the zoo range a release admits, and whether it ships a guard.

Both come from static reading of the published file: the ``Requires-Dist``
lines on ``unsloth_zoo`` in the core metadata (the range a plain install
admits, and per extra), and the ``unsloth/*.py`` modules: our backport's
marker and the guard module the scan target names, or heuristically any code
that writes the attribute of the kernel's owner the target names (an AST walk
over the modules that name the owner). A target without a guard makes the
guard ``n/a``, with the reason.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import re
from email.parser import HeaderParser
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from matrix.scan.terms import ZOO, Extract, Want
from matrix.scan.zoo import Scanned
from probes.checks import GuardScan

INIT_MEMBER = "unsloth/__init__.py"
MARKER_NAME = "SKEWMATRIX_BACKPORT.json"


def unsloth_want(s: Scanned) -> Want:
    g = s.target.guard
    if g is None:  # only the core metadata: the zoo range a release admits
        return Want(name=lambda n: False, metadata=True, key=s.id)

    def name(n: str) -> bool:
        return (n.startswith("unsloth/") and n.endswith(".py")) or n.endswith(f".dist-info/{MARKER_NAME}")

    def keep(n: str, t: str) -> bool:
        return (n in (g.member, INIT_MEMBER) or n.endswith(MARKER_NAME) or g.owner in t or g.basename in t)

    return Want(name=name, keep=keep, metadata=True, key=s.id)


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


@functools.lru_cache(maxsize=16)
def _patterns(owner: str, attribute: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A cheap text test before the AST walk (an attribute write to ``attribute`` or any ``setattr`` call), and
    the same write on ``owner`` as generated code in a string would spell it."""
    o, a = re.escape(owner), re.escape(attribute)
    writes = re.compile(rf"\.[\s\\]*{a}[\s\\)]*[-+*/|&@%^]?=(?!=)|\bsetattr\s*\(")
    text = re.compile(rf"\b{o}\s*\.\s*{a}\s*=(?!=)|setattr\(\s*{o}\s*,\s*['\"]{a}['\"]")
    return writes, text


def guard_in_source(text: str, name: str, guard: GuardScan) -> tuple[str, str]:
    """``(state, evidence)`` for one module: does it replace ``guard.attribute`` of ``guard.owner``?

    ``present``: an assignment or ``setattr`` of the attribute on the owner's name or an alias bound from an
    expression that names it (``X = mod.<owner>``, ``X = getattr(mod, "<owner>")``),
    or generated code in a string doing the same. ``unknown``: the module names the owner in code and writes
    the attribute on something we cannot resolve. ``absent``: neither.
    """
    owner, attribute = guard.owner, guard.attribute
    writes_attr, attr_text = _patterns(owner, attribute)
    if not writes_attr.search(text):
        return "absent", ""  # every present/unknown case below needs one of these spellings
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return "unknown", f"{name}: cannot parse ({exc.msg}, line {exc.lineno})"
    # One walk collects everything; the alias pass below only looks at assignments near a reference.
    refs: list[tuple[int, int]] = []
    assigns: list[ast.Assign | ast.AnnAssign] = []
    writes: list[tuple[ast.AST, ast.AST]] = []  # (statement or call, object whose attribute is written)
    unresolved: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == owner:
                refs.append((node.lineno, node.col_offset))
            elif attr_text.search(node.value):
                return "present", f"{name}:{node.lineno}: generated code assigns {owner}.{attribute}"
        elif isinstance(node, ast.Name | ast.Attribute) and _name_of(node) == owner:
            refs.append((node.lineno, node.col_offset))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            if not isinstance(node, ast.AugAssign) and node.value is not None:
                assigns.append(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            writes += [(node, t.value) for t in targets if isinstance(t, ast.Attribute) and t.attr == attribute]
        elif isinstance(node, ast.Call) and _name_of(node.func) == "setattr" and len(node.args) >= 2:
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and attr.value == attribute:
                writes.append((node, node.args[0]))
            elif not isinstance(attr, ast.Constant):
                unresolved.append(node.lineno)
    if not refs:
        return "absent", ""

    def inside(pos: tuple[int, int], n: ast.AST) -> bool:
        end = (getattr(n, "end_lineno", None) or n.lineno, getattr(n, "end_col_offset", None) or 0)
        return (n.lineno, n.col_offset) <= pos <= end

    aliases = {owner}
    for a in assigns:
        if a.value is not None and any(inside(r, a.value) for r in refs):
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            aliases |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    for stmt, obj in writes:
        what = _name_of(obj)
        if what in aliases:
            how = "setattr on" if isinstance(stmt, ast.Call) else "assigns"
            return "present", f"{name}:{stmt.lineno}: {how} {what}.{attribute}"
        unresolved.append(stmt.lineno)
    if unresolved:
        lines = ", ".join(str(n) for n in sorted(set(unresolved))[:5])
        return "unknown", (f"{name}: names {owner} and writes a {attribute} attribute (or a computed attribute) "
                           f"on an object the static reading cannot resolve (line {lines})")
    return "absent", ""


def guard_state(ex: Extract, s: Scanned) -> dict[str, Any]:
    """Guard present / absent / unknown in one unsloth extract, with the evidence; ``n/a`` when the target
    names no guard."""
    g = s.target.guard
    if g is None:
        return {"state": "n/a", "kind": None,
                "evidence": [f"n/a: the scan target of check {s.id} names no guard (none exists for its kernel)"]}
    evidence: list[str] = []
    marker = next((n for n in ex.members if n.endswith(MARKER_NAME)), None)
    if marker is not None:
        with contextlib.suppress(ValueError):
            info = json.loads(ex.members[marker])
            evidence.append(f"{marker}: skewmatrix backport {info.get('backport', info.get('name', '?'))!r}")
    if g.member in ex.members:
        wired = g.basename in ex.members.get(INIT_MEMBER, "")
        if wired:
            evidence.append(f"{g.member} ships and {INIT_MEMBER} imports it")
            return {"state": "present", "kind": "skewmatrix-backport", "evidence": evidence}
        return {"state": "unknown", "kind": "skewmatrix-backport",
                "evidence": [*evidence, f"{g.member} ships but {INIT_MEMBER} never imports it"]}
    if marker is not None:
        return {"state": "unknown", "kind": "skewmatrix-backport",
                "evidence": [*evidence, f"a backport marker but no {g.member}"]}
    unknown: list[str] = []
    for name in sorted(ex.members):
        if not name.endswith(".py"):
            continue
        state, why = guard_in_source(ex.members[name], name, g)
        if state == "present":
            return {"state": "present", "kind": "heuristic", "evidence": [why]}
        if state == "unknown":
            unknown.append(why)
    if unknown:
        return {"state": "unknown", "kind": "heuristic", "evidence": unknown}
    if ex.scanned == 0:
        return {"state": "unknown", "kind": None, "evidence": [f"no unsloth/*.py found in {ex.filename}"]}
    return {"state": "absent", "kind": None,
            "evidence": [f"{ex.scanned} module(s) read; none replaces {g.owner}.{g.attribute}"]}


ZOO_REQ = re.compile(r"\s*unsloth[-_.]+zoo\b", re.IGNORECASE)


def zoo_requirements(metadata: str | None) -> dict[str, Any]:
    """The ``unsloth_zoo`` requirements in core metadata: the plain-install range and per-extra ranges."""
    if metadata is None:
        return {"known": False, "reason": "no core metadata found", "requirements": [], "plain": None, "extras": {}}
    msg = HeaderParser().parsestr(metadata)
    extras = [canonicalize_name(e) for e in msg.get_all("Provides-Extra") or []]
    env = {**default_environment(), "extra": ""}
    reqs: list[dict[str, Any]] = []
    plain: SpecifierSet | None = None
    by_extra: dict[str, SpecifierSet] = {}
    for line in msg.get_all("Requires-Dist") or []:
        if not ZOO_REQ.match(line):  # parsing every requirement is slow; the name must lead the line
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            if "zoo" in line.lower():
                reqs.append({"requirement": line, "invalid": True})
            continue
        if canonicalize_name(req.name) != ZOO:
            continue
        marker = str(req.marker) if req.marker else None
        in_plain = req.marker is None or req.marker.evaluate(env)
        via = [e for e in extras if req.marker is not None and not in_plain
               and req.marker.evaluate({**env, "extra": e})]
        reqs.append({"requirement": line, "specifier": str(req.specifier), "marker": marker,
                     "extras_of_zoo": sorted(req.extras), "plain_install": in_plain, "via_extras": via})
        if in_plain:
            plain = req.specifier if plain is None else plain & req.specifier
        for e in via:
            by_extra[e] = req.specifier if e not in by_extra else by_extra[e] & req.specifier
    return {"known": True, "requirements": reqs, "plain": None if plain is None else str(plain),
            "extras": {e: str(s) for e, s in sorted(by_extra.items())}}


def analyze_unsloth(ex: Extract, s: Scanned) -> dict[str, Any]:
    """The per-file part of an unsloth verdict (cacheable): its zoo requirements and its guard."""
    return {"zoo_requirement": zoo_requirements(ex.metadata), "guard": guard_state(ex, s)}
