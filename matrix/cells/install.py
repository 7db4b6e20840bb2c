"""A cell's install: from uv's cache first, checked against the index while the cell probes.

The index behind this harness serves its ``/simple/`` pages with no
Cache-Control, ETag or Last-Modified, so every online ``uv pip install``
refetches the page of every package it resolves (about 200 for an unsloth
pair): 1.7 to 7 s a cell, where an install from uv's cache (``--offline``)
takes half a second. So a cell whose env is empty and whose recipe is
requirement lines (``Recipe.from_cache_ok``) installs from the cache first,
and falls back to the index at once when the cache cannot answer (a cold
cache, a release it has not seen).

An install from the cache is only as good as the cache's pages, so the cell
asks the index, beside the install and the probes, what it would install
today (``recipe.index_pins_argv``); when the cell finishes, ``recipe.drift``
compares the answer with what the env holds. The cell JSON's
``install_check`` says what was done; any difference, or no answer from the
index, sets ``redo``: the cell is redone from the index in a fresh env, and
a stored result that still says ``redo`` is never reused. The admissibility
question (would a plain install admit the pair) is asked the same way.

Both questions are processes started before the install and read when the
cell finishes (``matrix.envs.tools.start_tool``), no threads: they share the
cell's process group, so an interrupt stops them with the cell.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from matrix import settings
from matrix.cells.progress import ticking
from matrix.envs import recipe
from matrix.envs.envrun import create_env, ensure_env
from matrix.envs.recipe import Recipe
from matrix.envs.tools import Ran, Started, start_tool
from matrix.errors import SkewmatrixError

COLD = "installing (a cold uv cache downloads torch, ~3 GB)"
DEFAULT_MIN_FREE_GB = 6.0


def disk_problem(where: Path) -> str | None:
    """A message when the disk under ``where`` has less free space than a cell needs."""
    need_gb = float(settings.value(settings.MIN_FREE_ENV) or DEFAULT_MIN_FREE_GB)
    probe = where
    while not probe.exists():
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1024**3
    if free_gb >= need_gb:
        return None
    return (f"{probe}: {free_gb:.1f} GB free, a cell env needs at least {need_gb:.1f} GB (uv cache downloads "
            f"+ env); free some space or set {settings.MIN_FREE_ENV}")


def holds_packages(env_dir: Path) -> bool:
    """Whether anything is installed in the env (a ``.dist-info`` in its site-packages)."""
    return any(env_dir.glob("lib/python*/site-packages/*.dist-info"))


def fresh_env(env_dir: Path, python: str) -> None:
    """An empty env at ``env_dir`` (whatever was there is removed)."""
    shutil.rmtree(env_dir, ignore_errors=True)
    res = create_env(env_dir, python)
    if not res.ok:
        raise SkewmatrixError(f"cannot create a Python {python} env at {env_dir}:\n{res.tail()}")


class Questions:
    """The cell's questions to the index, started before its install and read when the cell finishes."""

    def __init__(self, how: Recipe, workdir: Path, extra: list[str], python: Path, check_cache: bool) -> None:
        self.workdir = workdir
        asked = workdir / "asked"
        self.admit = start_tool(recipe.admissibility_argv(how, workdir, extra), asked, "admissibility",
                                recipe.QUESTION_TIMEOUT)
        self.pins: Started | None = None
        if check_cache:
            self.pins = start_tool(recipe.index_pins_argv(how, python, workdir), asked, "index-pins",
                                   recipe.QUESTION_TIMEOUT)
        self.from_cache = False

    def installed_from_index(self) -> None:
        """The install asked the index itself: the pins question is not needed."""
        if self.pins is not None:
            self.pins.kill()
            self.pins = None

    def read(self, record: dict[str, Any], step: Any) -> None:
        """Wait for the answers and write them into the cell's ``record``: ``admissible`` and its step (the
        seconds waited for it here, ``ran_s`` its whole time), and ``install_check``."""
        start = time.perf_counter()
        record["admissible"] = recipe.read_admissibility(self.admit.wait())
        waited = time.perf_counter() - start
        step("admissibility", waited, record["admissible"]["value"] is not None,
             ran_s=round(time.perf_counter() - self.admit.started, 3), beside="install and probes")
        record["install_check"] = self.check(record.get("installed") or [])

    def check(self, installed: list[dict[str, Any]]) -> dict[str, Any]:
        """What the install's source was and, for one from the cache, whether the index agrees with the env."""
        if not self.from_cache or self.pins is None:
            return {"from_cache": False, "matches_index": None, "drift": [], "redo": False,
                    "message": "installed from the index"}
        res = self.pins.wait()
        if not res.ok:
            why = "timed out" if res.returncode is None else f"uv exit {res.returncode}"
            return {"from_cache": True, "matches_index": None, "drift": [], "redo": True,
                    "message": f"the index did not answer ({why}): {res.stderr.strip()[-1000:]}"}
        try:
            pins = recipe.read_pins((self.workdir / "index.lock").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return {"from_cache": True, "matches_index": None, "drift": [], "redo": True,
                    "message": f"the index's answer is unreadable: {exc}"}
        moved = recipe.drift(pins, installed) if installed else ["nothing recorded as installed"]
        return {"from_cache": True, "matches_index": not moved, "drift": moved, "redo": bool(moved),
                "message": ("the env holds what the index resolves today" if not moved else
                            "uv's cache resolved otherwise than the index: redone from the index")}

    def kill(self) -> None:
        for started in (self.admit, self.pins):
            if started is not None:
                started.kill()


@contextlib.contextmanager
def asking(how: Recipe, workdir: Path, extra: list[str], python: Path, check_cache: bool) -> Iterator[Questions]:
    """:class:`Questions` started now, stopped on leaving (whatever was not read by then is not wanted)."""
    questions = Questions(how, workdir, extra, python, check_cache)
    try:
        yield questions
    finally:
        questions.kill()


def prepare(env_dir: Path, python_version: str, create: bool, how: Recipe, from_cache: bool) -> bool:
    """Make the env when asked to; whether its install will come from uv's cache (an empty env, a recipe of
    requirement lines, and ``from_cache`` allowed)."""
    if create:
        ensure_env(env_dir, python_version)
    return from_cache and how.from_cache_ok and not holds_packages(env_dir)


def install(how: Recipe, env_dir: Path, python_version: str, workdir: Path, timeout: float, say: Any,
            questions: Questions, cached: bool, log_path: Path) -> tuple[Ran, float]:
    """Apply ``how`` to the env: from uv's cache when ``cached`` (then, if the cache cannot answer, from the
    index into an emptied env), else from the index. Writes each attempt's output to ``log_path``; returns
    how the last attempt ended and the seconds of the whole."""
    start = time.perf_counter()
    python = env_dir / "bin" / "python"
    log = []
    if cached:
        res = recipe.apply(how, python, workdir, timeout, from_cache=True)
        log.append(f"== from uv's cache (exit {res.returncode})\n{res.stdout}{res.stderr}")
        if res.ok:
            questions.from_cache = True
            log_path.write_text("".join(log), encoding="utf-8")
            return res, time.perf_counter() - start
        if holds_packages(env_dir):  # part of a failed install: the index's install starts from nothing
            fresh_env(env_dir, python_version)
    questions.installed_from_index()
    with ticking(say, COLD):
        res = recipe.apply(how, python, workdir, timeout)
    log.append(f"== from the index (exit {res.returncode})\n{res.stdout}{res.stderr}")
    log_path.write_text("".join(log), encoding="utf-8")
    return res, time.perf_counter() - start
