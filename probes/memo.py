"""A static reading shared by the cells of one run that read the same bytes with the same code. Stdlib only.

A check's ``static()`` reads installed source and imports nothing under test, so what it finds is a function of
the texts it reads and of the reader's own code. Where that reading is costly (the pair reader parses every
module of unsloth and zoo: about 9 s of CPU on a 2-core host, beside the cell's ``import unsloth``), the cells
of a run that install the same unsloth, or the same zoo, need not repeat it: the guarded row of a matrix
reads the plain row's zoo, a column of zoos reads one unsloth.

:func:`shared` keys a JSON result by the SHA-256 of its name, the reader's code and the texts read, and keeps
it beside the run's raw-phase findings (the directory of ``--raw-cache``, ``probes.rawcache``: one per run,
never reused across runs). An exclusive lock on the key's ``.lock`` is held for the whole look-up-or-read, so
two cells at once (``nox -j``) read once. Without ``--raw-cache`` (a probe run by hand) nothing is shared.
Only what round-trips through JSON unchanged is stored: a result is returned as the store holds it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from probes import handoff
from probes.common import look_up_or_compute, stored_entry

SCHEMA = "skewmatrix.static-memo/1"
FOLDER = "static"  # beside the raw phase's findings


def key(name: str, code: Iterable[Path], texts: Mapping[str, str]) -> str:
    """The digest of a reading: its ``name``, the reader's source files ``code`` (their bytes, in the order
    given) and every ``{name: text}`` it reads (sorted)."""
    h = hashlib.sha256(f"{SCHEMA}\0{name}\0".encode())
    for path in code:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for member in sorted(texts):
        h.update(member.encode() + b"\0" + texts[member].encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def folder() -> Path | None:
    """Where this run's shared readings live, or None when this probe process was given no ``--raw-cache``."""
    raw = handoff.given().raw_cache
    return Path(raw).parent / FOLDER if raw else None


def stored(path: Path) -> Any:
    """The entry stored at ``path`` for its digest, or None (absent, unreadable, another schema)."""
    return stored_entry(path, SCHEMA)


def shared(name: str, code: Iterable[Path], texts: Mapping[str, str], read: Callable[[], Any],
           where: Path | None = None) -> Any:
    """``read()`` (a JSON-able result computed from ``texts`` by ``code``), or the result another cell of this
    run stored for the same key. ``where``: the folder (default :func:`folder`; None there: just ``read()``)."""
    where = where if where is not None else folder()
    if where is None:
        return read()
    kept: list[Any] = []

    def entry(result: Any) -> dict[str, Any] | None:
        form = json.loads(json.dumps(result, sort_keys=True, default=str))  # as every later cell gets it
        if form != result:  # tuples, non-string keys: a reuse would get another value
            return None
        kept.append(form)
        return {"name": name, "result": form}

    found, result = look_up_or_compute(where / f"{key(name, code, texts)}.json", SCHEMA, read, entry)
    if found is not None:
        return found["result"]
    return kept[0] if kept else result
