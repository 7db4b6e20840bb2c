"""One pair's verdict: unsloth's references (``references``) resolved against a zoo release's table (``symbols``).

A reference resolves to ``ok``, ``missing`` (with the exception Python would raise: ModuleNotFoundError,
ImportError or AttributeError) or ``unknown`` (with the reason the table gives). A missing reference

* *breaks the import* when it sits at module level of a module ``import unsloth`` runs and no enclosing
  ``try`` swallows its exception -> the pair is ``incompatible``;
* else it breaks a feature (a function, a guarded block, a module imported later) -> ``degraded``, with the
  features its files and functions serve (``features``).

Where no reference is missing but one at import time is unknown (or an import-time file did not parse), the
pair is ``unknown``; otherwise ``compatible``. Stdlib only.
"""

from __future__ import annotations

import difflib
from typing import Any

from probes.checks.pair_compat.features import feature_of
from probes.checks.pair_compat.references import SWALLOWED_BY

VERDICTS = ("compatible", "degraded", "incompatible", "unknown")
# Attributes every module object has, whatever its source binds.
MODULE_ATTRIBUTES = frozenset({"__dict__", "__name__", "__file__", "__path__", "__spec__", "__loader__",
                               "__package__", "__doc__", "__cached__", "__builtins__"})


def resolve(table: dict[str, Any], path: str, modules: int, kind: str) -> tuple[str, str, str]:
    """``(state, the missing or undecided name, exception or reason)``; state is ok, missing or unknown."""
    mods = table["modules"]
    parts = path.split(".")
    cur = parts[0]
    if cur not in mods:
        return "missing", cur, "ModuleNotFoundError"
    for i, part in enumerate(parts[1:], 1):
        nxt = f"{cur}.{part}"
        if nxt in mods:
            cur = nxt
            continue
        if i < modules:
            return "missing", nxt, "ModuleNotFoundError"
        entry = mods[cur]
        if part in entry["names"] or part in MODULE_ATTRIBUTES:
            return "ok", nxt, ""
        if entry["unknown"]:
            return "unknown", nxt, "; ".join(entry["unknown"][:3])
        return "missing", nxt, "ImportError" if kind == "from" else "AttributeError"
    return "ok", path, ""


def closest(table: dict[str, Any], missing: str, is_module: bool = False) -> str:
    """Where the zoo release has the missing name, or the nearest spelling, or that it has neither."""
    mods = table["modules"]
    module, _, name = missing.rpartition(".")
    if is_module or module not in mods:  # a whole module is missing
        near = difflib.get_close_matches(missing, list(mods), n=1, cutoff=0.8)
        return f"no module {missing}" + (f"; closest module: {near[0]}" if near else "")
    elsewhere = sorted(m for m, e in mods.items() if m != module and name in e["names"])
    if elsewhere:
        return f"moved to {', '.join(elsewhere[:3])}" + (" ..." if len(elsewhere) > 3 else "")
    near = difflib.get_close_matches(name, mods[module]["names"], n=1, cutoff=0.75)
    if near:
        return f"closest in {module}: {near[0]}"
    return "absent from every module of this zoo release"


def _where(ref: dict[str, Any]) -> dict[str, Any]:
    return {"file": ref["file"], "line": ref["line"], "function": ref["function"], "kind": ref["kind"]}


class Resolver:
    """Memoised :func:`resolve` for one zoo table (the history resolves the same paths for many releases)."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table
        self._memo: dict[tuple[str, int, str], tuple[str, str, str]] = {}

    def __call__(self, path: str, modules: int, kind: str) -> tuple[str, str, str]:
        key = (path, modules, kind)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = resolve(self.table, path, modules, kind)
        return got


def judge(refs: dict[str, Any], table: dict[str, Any] | Resolver) -> dict[str, Any]:
    """The pair's verdict with its evidence (see the module docstring)."""
    res = table if isinstance(table, Resolver) else Resolver(table)
    missing: dict[str, dict[str, Any]] = {}
    unknown: dict[str, dict[str, Any]] = {}
    for ref in refs["refs"]:
        state, name, why = res(ref["path"], ref["modules"], ref["kind"])
        if state == "ok":
            continue
        if state == "unknown":
            u = unknown.setdefault(name, {"name": name, "reason": why, "import_time": False, "where": []})
            u["import_time"] |= (ref["import_time"] and ref["branch"] is None
                                 and not set(ref["swallowed"]) & SWALLOWED_BY["ImportError"])
            u["where"].append(_where(ref))
            continue
        m = missing.setdefault(name, {"name": name, "exception": why, "breaks": "guarded", "features": [],
                                      "where": []})
        swallowed = set(ref["swallowed"]) & SWALLOWED_BY[why]
        if ref["import_time"] and not swallowed and ref["branch"] is None:
            m["breaks"] = "import"
        elif ref["import_time"] and not swallowed and m["breaks"] != "import":
            m["breaks"] = "import-branch"
            m["branch"] = ref["branch"]
        elif not swallowed and m["breaks"] == "guarded":
            m["breaks"] = "call"
        feature = feature_of(ref["file"], ref["function"])
        if ref["import_time"] and ref["branch"] and not swallowed:
            feature = f"import unsloth on `{ref['branch']}`"
        if feature not in m["features"]:
            m["features"].append(feature)
        m["where"].append(_where(ref))
    t = res.table
    for m in missing.values():
        m["closest"] = closest(t, m["name"], m["exception"] == "ModuleNotFoundError")
    if any(m["breaks"] == "import" for m in missing.values()):
        verdict = "incompatible"
    elif any(u["import_time"] for u in unknown.values()) or (refs.get("unparsed") and not missing):
        verdict = "unknown"
    elif missing:
        verdict = "degraded"
    else:
        verdict = "compatible"
    order = {"import": 0, "import-branch": 1, "call": 2, "guarded": 3}
    return {"verdict": verdict,
            "missing": sorted(missing.values(), key=lambda m: (order[m["breaks"]], m["name"])),
            "unknown": sorted(unknown.values(), key=lambda u: u["name"]),
            "unparsed": list(refs.get("unparsed", []))}


def summary(result: dict[str, Any], limit: int = 3) -> str:
    """One line: the verdict and the first missing names with what breaks."""
    if result["verdict"] == "compatible":
        return "compatible"
    parts = [f"`{m['name'].split('.')[-1]}` ({', '.join(m['features'][:2])})" for m in result["missing"][:limit]]
    more = len(result["missing"]) - limit
    tail = f" and {more} more" if more > 0 else ""
    if not parts:
        return f"{result['verdict']}: " + "; ".join(u["name"] for u in result["unknown"][:limit])
    return f"{result['verdict']}: missing " + ", ".join(parts) + tail
