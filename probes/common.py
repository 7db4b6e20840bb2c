"""Helpers shared by the probe processes: result files, versions, error text.

Every probe process writes exactly one JSON file (path given with
``--out``) atomically, so a crash leaves either a complete result or none,
and the parent judges the process by its exit code and that file together.
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def stored_entry(path: Path, schema: str, result: type = object) -> dict[str, Any] | None:
    """The entry a run stored at ``path`` (``<digest>.json``): its JSON object when it is of ``schema``, keyed by
    the file's own digest and holds a ``result`` of type ``result``; None when absent, unreadable or anything
    else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("schema") == schema and data.get("digest") == path.stem
    return data if ok and "result" in data and isinstance(data["result"], result) else None


@contextmanager
def held(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``'s ``.lock`` sibling for the block: two processes looking up or storing the
    same entry take turns. The kernel releases it when the file closes, also when the process is killed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def look_up_or_compute(path: Path, schema: str, compute: Callable[[], Any],
                       entry: Callable[[Any], dict[str, Any] | None],
                       result: type = object) -> tuple[dict[str, Any] | None, Any]:
    """``(stored, None)`` when ``path`` holds an entry of ``schema`` (:func:`stored_entry`); otherwise
    ``(None, compute())``, having stored ``entry(computed)`` (plus ``schema`` and ``digest``) unless it is None.
    The whole look-up-or-compute runs under :func:`held`, so of two processes with the same ``path`` only
    the first computes; the second waits and gets what the first stored."""
    with held(path):
        found = stored_entry(path, schema, result)
        if found is not None:
            return found, None
        computed = compute()
        kept = entry(computed)
        if kept is not None:
            write_json(path, {**kept, "schema": schema, "digest": path.stem})
        return None, computed


def dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def error_text(exc: BaseException, limit: int = 6) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(tb[-limit:]).strip()
    return f"{type(exc).__name__}: {exc}\n{tail}"


def import_raw_kernel(result: dict[str, Any], module: str, load: Callable[[], Any], function: str) -> Any:
    """The zoo module a runtime detector calls (``load()``, timed into ``result["import_s"]``), or None with
    ``result`` saying ``absent`` where this zoo has no ``module`` or no callable ``function`` in it.

    Raises where importing it imported unsloth: the detector would not be raw.
    """
    start = time.perf_counter()
    try:
        mod = load()
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            result.update(verdict="absent", reason=f"no module {module}")
            return None
        raise
    result["import_s"] = round(time.perf_counter() - start, 3)
    if not callable(getattr(mod, function, None)):
        result.update(verdict="absent", reason=f"{module} has no {function}")
        return None
    if "unsloth" in sys.modules:
        raise RuntimeError("importing zoo imported unsloth; the runtime detector would not be raw")
    return mod


def exception_chain(exc: BaseException, limit: int = 8) -> list[dict[str, Any]]:
    """An exception and what it was raised from or during (``__cause__`` / ``__context__``), outermost first.

    A wrapper such as "Please install unsloth_zoo" hides the real error in its chain; each link keeps its
    type, message, ``name`` (an ImportError's), how it is linked to the one before, and its last frames.
    """
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    link = "raised"
    while cur is not None and id(cur) not in seen and len(out) < limit:
        seen.add(id(cur))
        frames = traceback.extract_tb(cur.__traceback__)[-3:]
        out.append({"type": type(cur).__name__, "message": str(cur)[:2000], "link": link,
                    "name": getattr(cur, "name", None), "where": [f"{f.filename}:{f.lineno}" for f in frames]})
        link = "__cause__" if cur.__cause__ is not None else "__context__"
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return out


class Forked:
    """A child started by :func:`fork_start`: ``child(send, *args)`` in a forked process (what it patches, and a
    hang, stay there). :meth:`result` is the one result it sends, or ``{"state": "error", "reason": ...}`` when
    it has not sent one ``timeout`` seconds after it started, or died. The child is not daemonic: what it runs
    may start processes of its own."""

    def __init__(self, child: Callable[..., None], args: tuple[Any, ...], timeout: float, what: str) -> None:
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=child, args=(send, *args))
        self._proc.start()
        send.close()
        self._deadline, self._timeout, self._what = time.monotonic() + timeout, timeout, what
        self._got: dict[str, Any] | None = None
        _UNCOLLECTED.append(self)

    def result(self) -> dict[str, Any]:
        if self._got is not None:
            return self._got
        what, timeout = self._what, self._timeout
        try:
            if self._recv.poll(max(self._deadline - time.monotonic(), 0.0)):
                self._got = self._recv.recv()
            else:
                self._got = {"state": "error", "reason": f"{what} did not end within {timeout:.0f} s"}
        except EOFError:
            self._proc.join(10)
            self._got = {"state": "error", "reason": f"the process {what} died (exit code {self._proc.exitcode})"}
        finally:
            self.stop()
        return self._got

    def stop(self) -> None:
        """Kill the child if it still runs, and let it go (what it had not sent is lost)."""
        if self in _UNCOLLECTED:
            _UNCOLLECTED.remove(self)
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(10)
        self._recv.close()


_UNCOLLECTED: list[Forked] = []


def fork_start(child: Callable[..., None], args: tuple[Any, ...], timeout: float, what: str) -> Forked:
    """Start ``child`` in a forked process now, to collect its result later (:meth:`Forked.result`): work a
    step starts early, so that it runs beside the steps before it."""
    return Forked(child, args, timeout, what)


def reap() -> None:
    """Stop every child started and never collected (a step that never ran, or failed before collecting)."""
    for forked in list(_UNCOLLECTED):
        forked.stop()


def in_fork(child: Callable[..., None], args: tuple[Any, ...], timeout: float, what: str) -> dict[str, Any]:
    """``child(send, *args)`` in a forked process, and the one result it sends (see :class:`Forked`)."""
    return fork_start(child, args, timeout, what).result()
