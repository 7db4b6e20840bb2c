"""One pair's verdict: unsloth's references (``references``) resolved against a zoo release's table (``symbols``).

A reference resolves to ``ok``, ``missing`` (with the exception Python would raise: ModuleNotFoundError,
ImportError or AttributeError) or ``unknown`` (with the reason the table gives). A missing reference

* *breaks the import* when it sits at module level of a module ``import unsloth`` runs and no enclosing
  ``try`` swallows its exception -> the pair is ``incompatible``;
* *breaks model loading* when it sits, unswallowed, in a function on the model-loading route -> the pair is
  ``incompatible`` with ``breaks_at: model-load`` (it imports, but ``from_pretrained`` fails);
* else it breaks a feature (a function, a guarded block, a module imported later) -> ``degraded``, with the
  features its files and functions serve (``features``).

A call whose arguments the zoo callee rejects is ``TypeError`` and a constant key a zoo dict lacks ``KeyError``
(``calls.py``), with the exception text in ``detail``; undecidable ones are never listed.

Where no reference is missing but one at import time is unknown (or an import-time file did not parse), the
pair is ``unknown``; otherwise ``compatible``. Stdlib only.
"""

from __future__ import annotations

import difflib
from typing import Any

from probes.checks.pair_compat import calls
from probes.checks.pair_compat.features import feature_of
from probes.checks.pair_compat.references import SWALLOWED_BY

VERDICTS = ("compatible", "degraded", "incompatible", "unknown")
# What a missing reference breaks, worst first: `import unsloth`; loading a model (the pair imports but
# `from_pretrained` / `get_peft_model` fail); an import-time branch; a function when called; a guarded block.
BREAKS = ("import", "model-load", "import-branch", "call", "guarded")
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


def base_kind(kind: str) -> str:
    """``from`` of ``from@load``, ``call`` of ``call(0,token=)@load``, ``key`` of ``key['x']``."""
    return kind.split("@", 1)[0].split("(", 1)[0].split("[", 1)[0]


def _where(ref: dict[str, Any]) -> dict[str, Any]:
    return {"file": ref["file"], "line": ref["line"], "function": ref["function"], "kind": ref["kind"]}


class Resolver:
    """Memoised :func:`resolve` for one zoo table (the history resolves the same paths for many releases)."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.table = table
        self._memo: dict[tuple[str, int, str], tuple[str, str, str]] = {}
        self._checked: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self._closest: dict[tuple[str, bool], str] = {}

    def __call__(self, path: str, modules: int, kind: str) -> tuple[str, str, str]:
        key = (path, modules, kind)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = resolve(self.table, path, modules, kind)
        return got

    def closest(self, missing: str, is_module: bool) -> str:
        """Memoised :func:`closest` (its fuzzy match over every module name was most of a cold history's
        judging: the same missing name recurs across unsloth releases)."""
        key = (missing, is_module)
        got = self._closest.get(key)
        if got is None:
            got = self._closest[key] = closest(self.table, missing, is_module)
        return got

    def check(self, ref: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Memoised :func:`calls.check` of a call or key reference (its path and kind say all it passes)."""
        key = (ref["path"], ref["kind"].split("@", 1)[0])
        got = self._checked.get(key)
        if got is None:
            got = self._checked[key] = calls.check(self.table, ref)
        return got


def judge(refs: dict[str, Any], table: dict[str, Any] | Resolver) -> dict[str, Any]:
    """The pair's verdict with its evidence (see the module docstring)."""
    res = table if isinstance(table, Resolver) else Resolver(table)
    missing: dict[str, dict[str, Any]] = {}
    unknown: dict[str, dict[str, Any]] = {}
    for ref in refs["refs"]:
        kind = base_kind(ref["kind"])
        extra: dict[str, Any] = {}
        if kind in ("call", "key"):  # a call's arguments, a dict's key: undecidable ones are never a break
            state, found = res.check(ref)
            if state != "missing":
                continue
            extra = dict(found)  # the memo's answer is shared
            name = ref["path"] + (f"[{ref['key']!r}]" if kind == "key" else "")
            why = extra.pop("exception")
        else:
            state, name, why = res(ref["path"], ref["modules"], kind)
        if state == "ok":
            continue
        if state == "unknown":
            u = unknown.setdefault(name, {"name": name, "reason": why, "import_time": False, "where": []})
            u["import_time"] |= (ref["import_time"] and ref["branch"] is None
                                 and not set(ref["swallowed"]) & SWALLOWED_BY["ImportError"])
            u["where"].append(_where(ref))
            continue
        # one entry per name, and per exception text where calls of one function fail in different ways
        m = missing.setdefault(f"{name}\n{extra.get('detail', '')}", {
            "name": name, "exception": why, "breaks": "guarded", "features": [], "where": [], **extra})
        swallowed = set(ref["swallowed"]) & SWALLOWED_BY[why]
        if swallowed:
            breaks = "guarded"
        elif ref["import_time"]:
            breaks = "import" if ref["branch"] is None else "import-branch"
        else:
            breaks = "model-load" if ref.get("route") == "model-load" else "call"
        if BREAKS.index(breaks) < BREAKS.index(m["breaks"]):
            m["breaks"] = breaks
            if breaks == "import-branch":
                m["branch"] = ref["branch"]
        feature = feature_of(ref["file"], ref["function"])
        if ref["import_time"] and ref["branch"] and not swallowed:
            feature = f"import unsloth on `{ref['branch']}`"
        if feature not in m["features"]:
            m["features"].append(feature)
        m["where"].append(_where(ref))
    for m in missing.values():
        if "closest" not in m:
            m["closest"] = res.closest(m["name"], m["exception"] == "ModuleNotFoundError")
    breaks_at = next((b for b in ("import", "model-load") if any(m["breaks"] == b for m in missing.values())), None)
    if breaks_at is not None:
        verdict = "incompatible"
    elif any(u["import_time"] for u in unknown.values()) or (refs.get("unparsed") and not missing):
        verdict = "unknown"
    elif missing:
        verdict = "degraded"
    else:
        verdict = "compatible"
    return {"verdict": verdict, "breaks_at": breaks_at,
            "missing": sorted(missing.values(), key=lambda m: (BREAKS.index(m["breaks"]), m["name"])),
            "unknown": sorted(unknown.values(), key=lambda u: u["name"]),
            "unparsed": list(refs.get("unparsed", []))}


def _short(m: dict[str, Any]) -> str:
    if m.get("key") is not None:
        return m["name"].rsplit("[", 1)[0].rsplit(".", 1)[-1] + f"[{m['key']!r}]"
    return m["name"].split(".")[-1] + ("()" if m.get("signature") else "")


def summary(result: dict[str, Any], limit: int = 3) -> str:
    """One line: the verdict (with where an incompatible pair breaks) and the first breaks: the missing names
    with what they break, then each failing call or key with the exception Python raises."""
    if result["verdict"] == "compatible":
        return "compatible"
    label = result["verdict"] + (" (breaks at model load)" if result.get("breaks_at") == "model-load" else "")
    shown = result["missing"][:limit]
    more = len(result["missing"]) - limit
    tail = f" and {more} more" if more > 0 else ""
    if not shown:
        return f"{label}: " + "; ".join(u["name"] for u in result["unknown"][:limit])
    names = [f"`{_short(m)}` ({', '.join(m['features'][:2])})" for m in shown if not m.get("detail")]
    parts = (["missing " + ", ".join(names)] if names else []) + [
        f"`{_short(m)}` ({', '.join(m['features'][:2])}): {m['detail']}" for m in shown if m.get("detail")]
    return f"{label}: " + "; ".join(parts) + tail
