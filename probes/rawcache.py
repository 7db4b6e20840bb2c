"""The raw phase's findings, shared by the cells of one run whose raw phase reads the same inputs. Stdlib only.

The raw phase never imports unsloth: it reads zoo, torch and the rest of the trainer stack, the probes' own
code, the options and the environment. The harness computes the digest of all of that
(``matrix.cells.rawkey``) and hands this process ``--raw-cache DIR/<digest>.json`` (``probes.handoff``). The
first cell of the run with that digest runs the raw phase and stores its findings there; every later one
reads them instead of running it again. An exclusive lock on ``<digest>.lock`` is held for the whole
look-up-or-run, so two cells running at once (``nox -j``) with the same digest run the phase once: the
second waits for the first's findings (its ``import unsloth`` goes on meanwhile, in its own process).

Only a phase whose every step ended ``ok`` is stored: a step's error may come from the moment (memory,
a busy disk), and it is found again by the next cell rather than handed on. A process that crashed or hung
returns nothing here, so it stores nothing either.

What this process returns says which it was, under ``reuse``: ``reused`` (bool), ``digest``, ``from_cell``
(the cell that ran the phase) and, when reused, ``seconds_saved`` (the producer's step seconds). A reused
step's ``seconds`` is 0.0: this cell spent none on it; its ``reused_from`` names the cell that did.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes.common import write_json

SCHEMA = "skewmatrix.raw-cache/1"


def stored(path: Path) -> dict[str, Any] | None:
    """The findings stored at ``path`` for its digest, or None (absent, unreadable, another schema)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("schema") == SCHEMA and data.get("digest") == path.stem
    return data if ok and isinstance(data.get("result"), dict) else None


def storable(result: dict[str, Any]) -> bool:
    """Whether every check's raw steps ended ``ok`` and its phases module loaded (nothing else is handed on)."""
    sections = (result.get("checks") or {}).values()
    return all("error" not in (s.get("shared") or {}) and all(st.get("ok") is True for st in s["steps"].values())
               for s in sections)


def as_reused(entry: dict[str, Any]) -> dict[str, Any]:
    """The stored findings as this cell's raw phase: each step's seconds 0.0, the producer named."""
    result = json.loads(json.dumps(entry["result"]))  # a copy: the stored entry stays as it was
    saved = 0.0
    for section in (result.get("checks") or {}).values():
        for step in section["steps"].values():
            saved += float(step.get("seconds") or 0.0)
            step.update(seconds=0.0, reused_from=entry.get("cell"))
    result["reuse"] = {"reused": True, "digest": entry["digest"], "from_cell": entry.get("cell"),
                       "seconds_saved": round(saved, 3)}
    return result


def run_or_reuse(path: str | None, cell: str | None, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``compute()`` (the raw phase), unless findings for the same digest are stored at ``path``; store what it
    found when it may be handed on. ``path`` None: no sharing, just ``compute()``."""
    if not path:
        return compute()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.with_suffix(".lock").open("a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process is killed
        entry = stored(target)
        if entry is not None:
            return as_reused(entry)
        result = compute()
        if storable(result):
            write_json(target, {"schema": SCHEMA, "digest": target.stem, "cell": cell, "result": result})
        result["reuse"] = {"reused": False, "digest": target.stem, "from_cell": cell,
                           "stored": storable(result)}
        return result
