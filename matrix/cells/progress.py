"""Progress output: colour on a TTY only, a ticker for long steps, the per-cell line.

Colour follows the usual conventions: only when the stream is a terminal,
never when ``NO_COLOR`` is set (https://no-color.org), always when
``FORCE_COLOR`` is set. A long step (a cold download of torch, the probes)
prints "still <doing>… N s" every few seconds, so a CI log never goes quiet
for a minute. ``cell_line`` is the ``[k/N] cell ID → verdict (seconds)``
line printed as each cell finishes; ``next_k`` counts finished cells of one
run across the parallel session processes nox spawns (a file under the
output directory, appended under a lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from matrix import settings

COLOURS = {"green": "32", "yellow": "33", "red": "31", "bold": "1", "dim": "2"}
KIND_COLOUR = {"pass": "green", "xfail": "yellow", "fail": "red", "xpass": "red"}


def use_colour(stream: TextIO | None = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def paint(text: str, colour: str, stream: TextIO | None = None) -> str:
    return f"\033[{COLOURS[colour]}m{text}\033[0m" if use_colour(stream) else text


@contextlib.contextmanager
def ticking(say: Callable[[str], Any], doing: str, every: float | None = None) -> Iterator[None]:
    """While the block runs, ``say("still <doing>… N s")`` every ``every`` seconds (default 15)."""
    every = every if every is not None else float(settings.value(settings.TICK_ENV) or 15)  # tests make it short
    stop = threading.Event()
    start = time.perf_counter()

    def tick() -> None:
        while not stop.wait(every):
            say(f"still {doing}… {time.perf_counter() - start:.0f} s")

    thread = threading.Thread(target=tick, name=f"tick-{doing}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def next_k(out: Path, run_id: str) -> int:
    """1 for the first cell of run ``run_id`` to finish, 2 for the next, … (safe across processes)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f".progress-{run_id}"
    with path.open("a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        k = len(fh.read().splitlines()) + 1
        fh.write(f"{k}\n")
        fh.flush()
        fcntl.flock(fh, fcntl.LOCK_UN)
    return k


def cell_line(k: int, n: int, cell_id: str, states: dict[str, str], kind: str, seconds: float,
              stream: TextIO | None = None) -> str:
    """``[k/N] cell ID → check: state, … KIND (seconds)``; KIND is PASS, XFAIL, FAIL or XPASS."""
    verdict = ", ".join(f"{check}: {state}" for check, state in states.items()) or "no verdict"
    label = paint(kind.upper(), KIND_COLOUR.get(kind, "bold"), stream)
    return f"[{k}/{n}] cell {cell_id} → {verdict} {label} ({seconds:.1f} s)"
