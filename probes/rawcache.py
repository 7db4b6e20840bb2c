"""The raw phase's findings, shared by the cells of one run whose raw phase reads the same inputs. Stdlib only.

The raw phase never imports unsloth: it reads zoo, torch and the rest of the trainer stack, the probes' own
code, the options and the environment. The harness computes the digest of all of that
(``matrix.cells.rawkey``) and hands this process ``--raw-cache DIR/<digest>.json`` (``probes.handoff``). The
first cell of the run with that digest runs the raw phase and stores its findings there; every later one
reads them instead of running it again. An exclusive lock on ``<digest>.lock`` is held for the whole
look-up-or-run, so two cells running at once (``nox -j``) with the same digest run the phase once: the
second waits for the first's findings (its ``import unsloth`` goes on meanwhile, in its own process).

The findings name installed files by their paths, and later steps compare the functions they find with
them (a guard "replaced" zoo's function when its file differs). Each cell has its env elsewhere, so the
stored findings carry the producer's places (its env's prefix, working directory, ``PYTHONPATH``) and a
reusing cell gets them relocated to its own: what it would have found itself, since the digest guarantees
the same installed bytes.

Only a phase whose every step ended ``ok`` is stored: a step's error may come from the moment (memory,
a busy disk), and it is found again by the next cell rather than handed on. A process that crashed or hung
returns nothing here, so it stores nothing either.

What this process returns says which it was, under ``reuse``: ``reused`` (bool), ``digest``, ``from_cell``
(the cell that ran the phase) and, when reused, ``seconds_saved`` (the producer's step seconds). A reused
step's ``seconds`` is 0.0: this cell spent none on it; its ``reused_from`` names the cell that did.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes.common import look_up_or_compute, stored_entry

SCHEMA = "skewmatrix.raw-cache/1"


def stored(path: Path) -> dict[str, Any] | None:
    """The findings stored at ``path`` for its digest, or None (absent, unreadable, another schema)."""
    return stored_entry(path, SCHEMA, dict)


def storable(result: dict[str, Any]) -> bool:
    """Whether every check's raw steps ended ``ok`` and its phases module loaded (nothing else is handed on)."""
    sections = (result.get("checks") or {}).values()
    return all("error" not in (s.get("shared") or {}) and all(st.get("ok") is True for st in s["steps"].values())
               for s in sections)


def places(workdir: Path) -> dict[str, str]:
    """Where this cell's raw phase runs: the env (``sys.prefix``: every installed file's path starts there),
    its working directory, and its ``PYTHONPATH`` entries (the cell's link to the probes). Findings name
    files by these paths, and later steps compare what they find with them."""
    found = {"prefix": sys.prefix, "workdir": str(workdir)}
    for i, entry in enumerate(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p):
        found[f"pythonpath{i}"] = entry
    return found


def relocate(result: dict[str, Any], theirs: dict[str, str], mine: dict[str, str]) -> dict[str, Any]:
    """``result`` with each of the producer's places (``theirs``) replaced by this cell's (``mine``): the
    installed files are the same bytes (the digest keys them), only where they lie differs. A place is
    replaced where it is a whole path or a path's leading part, never inside a longer name
    (``.../cell-a`` is not ``.../cell-a-fix``)."""
    def written(path: str) -> str:  # as a path is written inside a JSON string
        return json.dumps(path)[1:-1]

    to = {written(theirs[k]): written(mine[k]) for k in theirs if k in mine and theirs[k] != mine[k]}
    text = json.dumps(result)
    if not to:
        return json.loads(text)
    # one pass, longest first: a replaced path is never replaced again
    pattern = "|".join(re.escape(old) for old in sorted(to, key=len, reverse=True))
    return json.loads(re.sub(f"(?:{pattern})(?![\\w.-])", lambda m: to[m.group(0)], text))


def as_reused(entry: dict[str, Any], here: dict[str, str]) -> dict[str, Any]:
    """The stored findings as this cell's raw phase: relocated to this cell's places, each step's seconds 0.0,
    the producer named."""
    result = relocate(entry["result"], entry.get("places") or {}, here)  # a copy: the entry stays as it was
    saved = 0.0
    for section in (result.get("checks") or {}).values():
        for step in section["steps"].values():
            saved += float(step.get("seconds") or 0.0)
            step.update(seconds=0.0, reused_from=entry.get("cell"))
    result["reuse"] = {"reused": True, "digest": entry["digest"], "from_cell": entry.get("cell"),
                       "seconds_saved": round(saved, 3)}
    return result


def run_or_reuse(path: str | None, cell: str | None, compute: Callable[[], dict[str, Any]],
                 here: dict[str, str] | None = None) -> dict[str, Any]:
    """``compute()`` (the raw phase), unless findings for the same digest are stored at ``path``; store what it
    found when it may be handed on. ``here``: this cell's places (:func:`places`). ``path`` None: no sharing,
    just ``compute()``."""
    if not path:
        return compute()
    here = here or {}

    def entry(result: dict[str, Any]) -> dict[str, Any] | None:
        return {"cell": cell, "places": here, "result": result} if storable(result) else None

    found, result = look_up_or_compute(Path(path), SCHEMA, compute, entry, dict)
    if found is not None:
        return as_reused(found, here)
    result["reuse"] = {"reused": False, "digest": Path(path).stem, "from_cell": cell, "stored": storable(result)}
    return result
