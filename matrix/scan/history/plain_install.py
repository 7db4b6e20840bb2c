"""What a plain ``pip install unsloth==X`` gets today: the zoo release uv resolves over the whole dependency graph.

unsloth declares only a floor on zoo, but zoo's own caps on TRL and transformers (and unsloth's caps on them)
make a resolver skip the newest zoo for many older unsloth releases: ``unsloth==2025.8.5`` admits zoo 2026.10.9,
yet ``uv pip compile`` picks zoo 2026.3.6. So the answer is ``uv pip compile`` of ``unsloth==X`` alone, for
Python :data:`PYTHON` on :data:`PLATFORM` (only the index is read, nothing installed), run through the harness's
tool runner (``matrix.envs.tools.run_tool``) by a bounded worker pool. A release uv cannot resolve is a finding
with uv's own message (``n/a: uv: ...``); with no uv answer at all (``--offline`` and nothing cached, a network
error, ``--floor-only``) the answer is the floor-only pick of ``metadata_caps.plain_pick``, labelled
``resolved_by: "floor-only"``.

**The cache** (``<scan cache>/plain-install/``, one JSON per release): its key is the release, the Python, the
platform and the *index state*: the newest release of each of :data:`MOVERS` (zoo, TRL, transformers), since a
new release of one of them is what moves a resolution. Other packages (torch, peft, accelerate) can move it
too without changing that key, so an entry also goes stale after :data:`TTL` (7 days). A resolution that fails
with uv's "no solution" is cached like an answer; a network or tool error is never cached.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from matrix.envs import recipe
from matrix.envs.tools import run_tool, uv_bin
from matrix.errors import SkewmatrixError
from matrix.scan.cache import read_json, write_atomic

PYTHON = "3.11"
PLATFORM = "x86_64-unknown-linux-gnu"  # uv's --python-platform: the Linux x86_64 host users train on
MOVERS = ("unsloth_zoo", "trl", "transformers")
SHOWN = ("trl", "transformers", "torch")  # what the resolution pairs the zoo with, kept in the answer
TTL = timedelta(days=7)
WORKERS = 4
TIMEOUT_S = 300
FOLDER = "plain-install"

Answer = dict[str, Any]
Resolver = Callable[[str, Path], Answer]


def state_key(state: Mapping[str, str | None]) -> str:
    """The index state a resolution depends on, in one short digest (see the module docstring)."""
    text = json.dumps({"python": PYTHON, "platform": PLATFORM, **dict(state)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_file(cache: Path, project: str, version: str, state: Mapping[str, str | None]) -> Path:
    return cache / FOLDER / f"{canonicalize_name(project)}-{version}-{state_key(state)}.json"


def uv_message(stderr: str, limit: int = 600) -> str:
    """uv's error as one line: its tree of causes joined (the box-drawing marks stripped), warnings left out."""
    lines = [ln.strip(" ×╰─▶│├") for ln in stderr.splitlines() if ln.strip() and not ln.lstrip().startswith("warning")]
    text = " ".join(ln for ln in lines if ln)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def resolve_with_uv(project: str, referred: str) -> Resolver:
    """The real resolver: ``uv pip compile`` of ``project==version`` (see the module docstring)."""

    def resolve(version: str, workdir: Path) -> Answer:
        try:
            uv = uv_bin()
        except SkewmatrixError as exc:  # no uv: no answer, the caller falls back to the floor
            return {"error": str(exc)}
        workdir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".in", dir=workdir, delete=False) as fh:
            fh.write(f"{project}=={version}\n")
        try:
            ran = run_tool([uv, "pip", "compile", fh.name, "--python-version", PYTHON, "--python-platform",
                            PLATFORM, "--no-header", "--no-annotate", "--quiet"], timeout=TIMEOUT_S)
        finally:
            Path(fh.name).unlink(missing_ok=True)
        if ran.returncode == 0:
            got = recipe.compiled_versions(ran.stdout)
            zoo = got.get(canonicalize_name(referred))
            return {"resolved_by": "uv", "zoo": zoo, "with": {p: got.get(p) for p in SHOWN},
                    **({} if zoo else {"na": f"n/a: {project} {version} does not require {referred}"})}
        if ran.returncode == 1:  # uv: no resolution (a finding about the release, cacheable)
            return {"resolved_by": "uv", "zoo": None, "with": {}, "na": f"n/a: uv: {uv_message(ran.stderr)}"}
        why = "timed out" if ran.timed_out else f"exit {ran.returncode}"
        return {"error": f"uv pip compile {project}=={version} failed ({why}): {uv_message(ran.stderr)}"}

    return resolve


def _fresh(entry: Any, now: datetime, offline: bool) -> bool:
    if not isinstance(entry, dict) or entry.get("resolved_by") != "uv" or "resolved_at" not in entry:
        return False
    try:
        at = datetime.fromisoformat(entry["resolved_at"])
    except (TypeError, ValueError):
        return False
    return offline or now - at <= TTL  # offline: an old answer beats none


def floor_only(why: str) -> Answer:
    """The fallback: the caller fills ``zoo`` with the newest zoo above unsloth's floor
    (``metadata_caps.plain_pick``, from the release's metadata), TRL and transformers caps ignored."""
    return {"resolved_by": "floor-only", "zoo": None, "with": {},
            "reason": f"{why}; the newest zoo release the floor admits, TRL and transformers caps ignored"}


def resolve_all(versions: list[str], *, project: str, state: Mapping[str, str | None], cache: Path,
                resolver: Resolver | None, offline: bool = False,
                workers: int = WORKERS, log: Callable[[str], None] = print, now: datetime | None = None
                ) -> dict[str, Answer]:
    """The plain-install answer per release of ``versions``: a fresh cached one, else ``resolver``'s (None:
    ``--floor-only``), else the floor-only fallback with why (its ``zoo`` left to the caller: see
    :func:`floor_only`). Each answer carries ``cached``."""
    now = now or datetime.now(timezone.utc)
    out: dict[str, Answer] = {}
    todo: list[str] = []
    for v in versions:
        entry = read_json(cache_file(cache, project, v, state))
        if _fresh(entry, now, offline):
            out[v] = {**entry, "cached": True}
        elif offline or resolver is None:
            why = "--offline and no cached resolution" if offline else "resolution not asked (--floor-only)"
            out[v] = {**floor_only(why), "cached": False}
        else:
            todo.append(v)
    if todo:
        log(f"plain install: resolving {len(todo)} {project} release(s) with uv pip compile (Python {PYTHON}, "
            f"{workers} at once); {len(out)} from the cache")
    work = cache / FOLDER / "work"
    done = [0]

    def one(v: str) -> tuple[str, Answer]:
        assert resolver is not None
        got = resolver(v, work)
        done[0] += 1
        if "error" in got:
            answer = {**floor_only(got["error"]), "cached": False}
        else:
            answer = {**got, "resolved_at": now.isoformat(timespec="seconds"), "state": dict(state)}
            write_atomic(cache_file(cache, project, v, state), json.dumps(answer))
            answer = {**answer, "cached": False}
        why = "" if answer.get("zoo") else ": " + str(answer.get("na") or answer.get("reason"))[:120]
        log(f"plain install [{done[0]}/{len(todo)}] {project} {v} -> zoo {answer.get('zoo') or '-'} "
            f"({answer['resolved_by']}{why})")
        return v, answer

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        out.update(dict(pool.map(one, todo)))
    return {v: out[v] for v in versions}
