"""The install recipe: the one description of how an env gets its packages, and the one function that applies it.

A :class:`Recipe` is a frozen value: the interpreter version, the lines
``uv pip install`` gets, the overrides it forces (so a pair whose metadata
refuses the other still installs: the skew under test), the arguments a plain
resolve judges admissibility with, an extra index for torch, whether the
install may reach an index at all, uv's link mode, and whether hashes are
required. Every env the harness builds is made from one: a cell's
(``matrix.spec.trees.recipe_of``, wheels pinned by override or a source tree's own
dependencies), pinned's ``-r FILE``, the mutation survivors', the scan's
throwaway envs and the GPU runner's ``--target`` folders; nox's cell venv takes
its interpreter from :func:`venv_python`.

:func:`apply` runs the recipe into an env (``uv pip install``, or the
installer the caller names for a ``--target`` folder), from uv's cache alone
when asked (``from_cache``: the index behind this harness serves its pages
uncacheable, so an online resolve refetches every page of every package).
Two questions a cell asks ``uv pip compile`` while it installs and probes
(their answers only feed the record): :func:`admissibility_argv`, would a
plain install (no overrides) admit the pair, and :func:`index_pins_argv`,
what would the index install today, which :func:`drift` compares with what
an install from the cache put in the env.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from matrix.envs.tools import Ran, run_tool, uv_bin

# Version of the code that turns a recipe into commands (bump it when apply() changes what it runs).
RECIPE_VERSION = 2  # 2: a cell installs from uv's cache first, checked against the index
DEFAULT_PYTHON = "3.11"
QUESTION_TIMEOUT = 600  # seconds a resolve that only feeds the record may take
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

    @property
    def from_cache_ok(self) -> bool:
        """Whether uv's cache may answer first (:func:`apply` with ``from_cache``): requirement lines (a tree's own
        dependencies are resolved from its pyproject, always online), with their dependencies, without hashes,
        and an install that may reach the index to check the answer."""
        return self.admit is None and not (self.offline or self.no_deps or self.require_hashes)

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
                 installer: list[str] | None = None, target: Path | None = None, from_cache: bool = False) -> list[str]:
    """The command :func:`apply` runs: ``uv pip install --python PYTHON`` (or ``installer``, e.g. a Python's
    own ``pip install``, for a ``target`` folder), then the recipe's switches and requirements; ``from_cache``:
    uv's ``--offline``, which resolves from the index pages and wheels its cache holds."""
    argv = list(installer) if installer else [uv_bin(), "pip", "install", *(["--quiet"] if quiet else []),
                                              "--python", str(python)]
    if from_cache and not installer:
        argv.append("--offline")
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
          installer: list[str] | None = None, target: Path | None = None, env: dict[str, str] | None = None,
          from_cache: bool = False) -> Ran:
    """Install ``recipe`` into ``python``'s env (or into ``target`` with ``installer``); the overrides file is
    written to ``workdir/overrides.txt``; ``env``: exactly the installer's environment (default: ours). A
    finding for the caller to judge, not an exception."""
    override_file = None
    if recipe.overrides:
        override_file = workdir / "overrides.txt"
        workdir.mkdir(parents=True, exist_ok=True)
        override_file.write_text("\n".join(recipe.overrides) + "\n", encoding="utf-8")
    argv = install_argv(recipe, python, override_file, quiet=quiet, installer=installer, target=target,
                        from_cache=from_cache)
    return run_tool(argv,
                    timeout=timeout, exact_env=env)


def admissibility_argv(recipe: Recipe, workdir: Path, extra: list[str] | None = None) -> list[str]:
    """The ``uv pip compile`` that asks whether a plain resolve (no overrides) admits the recipe's packages,
    with ``extra`` lines (the requested torch/transformers/trl); its lines go to ``workdir/pair.in``."""
    lines = [*(extra or [])] if recipe.admit is not None else [*recipe.requirements, *(extra or [])]
    req_file = workdir / "pair.in"
    req_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = [uv_bin(), "pip", "compile", *(recipe.admit or []), str(req_file), "--python-version", recipe.python,
            "--quiet", "--no-header", "--output-file", str(workdir / "pair.lock")]
    if recipe.torch_index:
        argv += ["--extra-index-url", recipe.torch_index]
    return argv


def read_admissibility(res: Ran) -> dict[str, Any]:
    """uv's answer to :func:`admissibility_argv`: ``value`` True, False (uv exit 1, its message kept) or None
    (it could not decide)."""
    method = "uv pip compile (no overrides)"
    if res.returncode == 0:
        return {"value": True, "method": method, "message": ""}
    if res.returncode == 1:
        return {"value": False, "method": method, "message": res.stderr.strip()[-2000:]}
    what = "timed out" if res.returncode is None else f"uv exit {res.returncode}"
    return {"value": None, "method": method, "message": f"could not decide ({what}): {res.stderr.strip()[-1000:]}"}


def admissibility(recipe: Recipe, workdir: Path, extra: list[str] | None = None) -> dict[str, Any]:
    """Would a plain resolve admit the recipe's packages (:func:`admissibility_argv`, :func:`read_admissibility`)?"""
    return read_admissibility(run_tool(admissibility_argv(recipe, workdir, extra), timeout=QUESTION_TIMEOUT))


def index_pins_argv(recipe: Recipe, python: Path, workdir: Path) -> list[str]:
    """The ``uv pip compile`` that asks the index what :func:`apply` would install into ``python``'s empty env
    today: the same requirement lines and overrides, that interpreter's markers, the lock in
    ``workdir/index.lock``. Checks an install from uv's cache (:func:`drift`)."""
    (workdir / "index.in").write_text("\n".join(recipe.requirements) + "\n", encoding="utf-8")
    argv = [uv_bin(), "pip", "compile", str(workdir / "index.in"), "--python", str(python), "--quiet",
            "--no-header", "--no-annotate", "--output-file", str(workdir / "index.lock")]
    if recipe.overrides:
        (workdir / "overrides.txt").write_text("\n".join(recipe.overrides) + "\n", encoding="utf-8")
        argv += ["--overrides", str(workdir / "overrides.txt")]
    if recipe.torch_index:
        argv += ["--extra-index-url", recipe.torch_index]
    return argv


def compiled_lines(text: str) -> Iterator[tuple[int, str]]:
    """The requirement lines of ``uv pip compile`` output with their line numbers (from 1): blank lines,
    comments (a line's own, or a trailing ``  # via ...``) and option lines (``--index-url``) aside."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip().rstrip("\\").strip()
        if line and not line.startswith(("#", "-")):
            yield number, line


def exact_versions(req: Requirement) -> list[str]:
    """The versions ``req`` pins with ``==``."""
    return [spec.version for spec in req.specifier if spec.operator == "=="]


def compiled_versions(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of each line of ``uv pip compile`` output that pins a version
    (``name==version``); any other line is passed over. For a resolution that is asked about a few packages;
    an env checked against a lock reads it with :func:`read_pins`, which passes over nothing."""
    out: dict[str, str] = {}
    for _, line in compiled_lines(text):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        exact = exact_versions(req)
        if exact:
            out[canonicalize_name(req.name)] = exact[0]
    return out


def read_pins(text: str) -> dict[str, str | None]:
    """A lock's pins by normalized name: ``name==version`` gives the version, ``name @ URL`` None (a direct
    reference: its name is all a lock says of it). Every line of :func:`compiled_lines` is read as a
    requirement (``packaging``) and must be one of those two: anything else is a ``ValueError`` naming the
    line (a lock that cannot be read is no answer)."""
    pins: dict[str, str | None] = {}
    for number, line in compiled_lines(text):
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise ValueError(f"line {number} is not a requirement: {line!r} ({exc})") from exc
        exact = exact_versions(req)
        if not req.url and len(exact) != 1:
            raise ValueError(f"line {number} pins no single version: {line!r}")
        pins[canonicalize_name(req.name)] = None if req.url else exact[0]
    return pins


def drift(pins: dict[str, str | None], installed: list[dict[str, Any]]) -> list[str]:
    """How an env (``installed``: names and versions) differs from what the index resolves (``pins``), one line
    per package; empty when the env holds exactly the index's set."""
    have = {canonicalize_name(d["name"]): str(d.get("version")) for d in installed}
    lines = []
    for name in sorted(set(have) | set(pins)):
        if name not in have:
            lines.append(f"{name}: the index resolves {pins[name] or 'a direct reference'}, the env has none")
        elif name not in pins:
            lines.append(f"{name} {have[name]}: in the env, not in what the index resolves")
        elif pins[name] is not None and not _same_version(pins[name] or "", have[name]):
            lines.append(f"{name}: the env has {have[name]}, the index resolves {pins[name]}")
    return lines


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def venv_python(options: Any) -> str:
    """The interpreter version a cell venv is made with (nox's ``python=`` for its cell sessions)."""
    return str(getattr(options, "python", None) or DEFAULT_PYTHON)
