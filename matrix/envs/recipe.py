"""The install recipe: the one description of how an env gets its packages, and the one function that applies it.

A :class:`Recipe` is a frozen value: the interpreter version, the lines
``uv pip install`` gets, the overrides it forces (so a pair whose metadata
refuses the other still installs: the skew under test), the arguments a plain
resolve judges admissibility with, an extra index for torch, whether the
install may reach an index at all, uv's link mode, and whether hashes are
required. Every env the harness builds is made from one: a cell's
(:func:`for_cell`, wheels pinned by override or a source tree's own
dependencies), pinned's ``-r FILE``, the mutation survivors', the scan's
throwaway envs and the GPU runner's ``--target`` folders; nox's cell venv takes
its interpreter from :func:`venv_python`.

:func:`apply` runs the recipe into an env (``uv pip install``, or the
installer the caller names for a ``--target`` folder); :func:`admissibility`
asks ``uv pip compile`` whether a plain install (no overrides) would admit it, and :func:`while_asking` asks
it while an install runs (the answer only feeds the record).
:meth:`Recipe.digest` is the recipe's identity (its fields, with paths of
this run reduced to their names, and :data:`RECIPE_VERSION`): it is part of
every cell digest, so a change to how envs are built makes stored cell
results stale. Bump :data:`RECIPE_VERSION` when this module's way of
applying a recipe changes without a field changing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from matrix.envs.tools import Ran, run_tool, uv_bin

# Version of the code that turns a recipe into commands (bump it when apply() changes what it runs).
RECIPE_VERSION = 1
DEFAULT_PYTHON = "3.11"
T = TypeVar("T")
FILE_URL = re.compile(r"file://(\S+)")


@dataclass(frozen=True)
class Recipe:
    """How an env gets its packages (see the module docstring). Tuples, so that a recipe is hashable and its
    digest does not depend on who built it."""

    python: str = DEFAULT_PYTHON
    requirements: tuple[str, ...] = ()  # what the installer gets: requirement lines, wheel paths, `-r FILE`
    overrides: tuple[str, ...] = ()  # forced through an overrides file, whatever the metadata says
    admit: tuple[str, ...] | None = None  # a plain resolve's source arguments (a tree's pyproject); None: lines
    torch_index: str | None = None  # an extra index torch may come from (None: the default index only)
    offline: bool = False  # install from local files only (`--no-index`)
    link_mode: str | None = None  # uv's --link-mode (None: uv's default, a hardlink from its cache)
    require_hashes: bool = False
    no_deps: bool = False

    def digest(self) -> str:
        """sha256 of the fields and :data:`RECIPE_VERSION`; an absolute path counts by its name only (a wheel
        file or a tree's pyproject of this run: the build digests cover their content)."""
        fields = {k: _portable(v) for k, v in dataclasses.asdict(self).items()}
        ident = {"recipe_version": RECIPE_VERSION, **fields}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()

    def as_record(self) -> dict[str, Any]:
        """The recipe as a cell JSON records it (paths as given), with its digest."""
        return {**{k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()},
                "version": RECIPE_VERSION, "digest": self.digest()}


def _portable(value: Any) -> Any:
    """``value`` without the directories of this run: an absolute path, or a ``file://`` URL in a direct
    reference (a backport's pin, ``unsloth @ file:///...whl``), counts by its last component."""
    if isinstance(value, (tuple, list)):
        return [_portable(v) for v in value]
    if isinstance(value, str) and os.path.isabs(value):
        return Path(value).name
    if isinstance(value, str):
        return FILE_URL.sub(lambda m: "file://" + m.group(1).rstrip("/").rsplit("/", 1)[-1], value)
    return value


def install_argv(recipe: Recipe, python: Path, override_file: Path | None, *, quiet: bool = False,
                 installer: list[str] | None = None, target: Path | None = None) -> list[str]:
    """The command :func:`apply` runs: ``uv pip install --python PYTHON`` (or ``installer``, e.g. a Python's
    own ``pip install``, for a ``target`` folder), then the recipe's switches and requirements."""
    argv = list(installer) if installer else [uv_bin(), "pip", "install", *(["--quiet"] if quiet else []),
                                              "--python", str(python)]
    if recipe.no_deps:
        argv.append("--no-deps")
    if recipe.offline:
        argv.append("--no-index")
    elif recipe.torch_index:
        argv += ["--extra-index-url", recipe.torch_index]
    if recipe.link_mode and not installer:
        argv += ["--link-mode", recipe.link_mode]
    if recipe.require_hashes:
        argv.append("--require-hashes")
    if target is not None:
        argv += ["--target", str(target)]
    argv += list(recipe.requirements)
    if override_file is not None:
        argv += ["--overrides", str(override_file)]
    return argv


def apply(recipe: Recipe, python: Path, workdir: Path, timeout: float, *, quiet: bool = False,
          installer: list[str] | None = None, target: Path | None = None, env: dict[str, str] | None = None) -> Ran:
    """Install ``recipe`` into ``python``'s env (or into ``target`` with ``installer``); the overrides file is
    written to ``workdir/overrides.txt``; ``env``: exactly the installer's environment (default: ours). A
    finding for the caller to judge, not an exception."""
    override_file = None
    if recipe.overrides:
        override_file = workdir / "overrides.txt"
        workdir.mkdir(parents=True, exist_ok=True)
        override_file.write_text("\n".join(recipe.overrides) + "\n", encoding="utf-8")
    return run_tool(install_argv(recipe, python, override_file, quiet=quiet, installer=installer, target=target),
                    timeout=timeout, exact_env=env)


def admissibility(recipe: Recipe, workdir: Path, extra: list[str] | None = None) -> dict[str, Any]:
    """Would a plain resolve (no overrides) admit the recipe's packages, with ``extra`` lines (the requested
    torch/transformers/trl)? Asks ``uv pip compile``: ``value`` True, False (uv exit 1, its message kept) or
    None (it could not decide)."""
    lines = [*(extra or [])] if recipe.admit is not None else [*recipe.requirements, *(extra or [])]
    req_file = workdir / "pair.in"
    req_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = [uv_bin(), "pip", "compile", *(recipe.admit or []), str(req_file), "--python-version", recipe.python,
            "--quiet", "--no-header", "--output-file", str(workdir / "pair.lock")]
    if recipe.torch_index:
        argv += ["--extra-index-url", recipe.torch_index]
    res = run_tool(argv, timeout=600)
    method = "uv pip compile (no overrides)"
    if res.returncode == 0:
        return {"value": True, "method": method, "message": ""}
    if res.returncode == 1:
        return {"value": False, "method": method, "message": res.stderr.strip()[-2000:]}
    return {"value": None, "method": method,
            "message": f"could not decide (uv exit {res.returncode}): {res.stderr.strip()[-1000:]}"}


def while_asking(recipe: Recipe, workdir: Path, extra: list[str] | None,
                 work: Callable[[], T]) -> tuple[T, float, dict[str, Any], float, float]:
    """``work()`` (the install: two uv processes share one cache) while :func:`admissibility` is asked in a
    thread: ``(work's result, its seconds, the answer, the seconds the question took, the seconds waited for
    the answer after work ended)``. An exception in either is raised here, once both have ended."""
    def asked() -> tuple[dict[str, Any], float]:
        start = time.perf_counter()
        return admissibility(recipe, workdir, extra), time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=1) as beside:
        asking = beside.submit(asked)
        start = time.perf_counter()
        done = work()
        work_s = time.perf_counter() - start
        answer, asked_s = asking.result()
    return done, work_s, answer, asked_s, time.perf_counter() - start - work_s


def venv_python(options: Any) -> str:
    """The interpreter version a cell venv is made with (nox's ``python=`` for its cell sessions)."""
    return str(getattr(options, "python", None) or DEFAULT_PYTHON)
