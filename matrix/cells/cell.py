"""Run one cell: materialise its builds, install them, probe, write cell JSON.

``run_cell`` never raises for a finding: a build that cannot be made, a pair
that will not install, a probe that crashes or hangs all become a cell JSON
with ``error`` set (kind, message, log tail). It raises only when the harness
itself is broken (cannot write its output). The cell JSON is written
atomically (temp file + rename) and is the canonical artifact every report
renders from; its schema is ``reports/cell.schema.json``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import platform
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from matrix import settings
from matrix.cells import install, rawkey
from matrix.cells.install import disk_problem
from matrix.cells.installed import changes, installed, snapshot, torch_build
from matrix.cells.progress import ticking
from matrix.envs import envrun
from matrix.envs.envrun import PROBES_DIR, probes_path
from matrix.errors import SkewmatrixError
from matrix.sources import Materialized
from matrix.spec import Build, Cell, CellOptions, Matrix, axes, stacks, trees
from probes import checks, handoff
from reports.model import CELL_SCHEMA


class CellBusyError(SkewmatrixError):
    """Another process holds the cell's lock."""


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def log_tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def build_entry(b: Build) -> dict[str, Any]:
    entry = {"name": b.name, "package": b.package, "source": b.source.KIND, "describe": b.describe(),
             "version": b.source.version_hint()}
    if b.guard_module:
        entry["guard_module"] = b.guard_module
    return entry


class CellRun:
    """Accumulates one cell's record while its steps run."""

    def __init__(self, cell_id: str, builds: dict[str, dict[str, Any]], options: CellOptions, matrix_label: str,
                 out_dir: Path, expect: dict[str, str] | None = None, stack: str | None = None,
                 requested: dict[str, str | None] | None = None) -> None:
        self.dir = out_dir / "cells" / cell_id
        self.options = options
        self.started = time.perf_counter()
        self.record: dict[str, Any] = {
            "schema": CELL_SCHEMA,
            "cell_id": cell_id,
            "matrix": matrix_label,
            "started": now(),
            "host": {"platform": platform.platform(), "machine": platform.machine()},
            "builds": builds,
            "options": dict(options.__dict__),
            "steps": [],
            "admissible": None,
            "installed": [],
            "torch": None,
            "probes": None,
            "checks": None,
            "error": None,
            "expect": dict(expect or {}),  # the matrix file's expected states, {check id: guard state}
            # the trainer stack: its [[stack]] name, the versions asked for, the versions installed (record step)
            "stack": stacks.record(stack, requested),
        }
        self.before_finish: list[Callable[[], None]] = []

    @classmethod
    def for_cell(cls, cell: Cell, matrix: Matrix, out_dir: Path) -> CellRun:
        builds = {b.role: build_entry(b) for b in cell.builds}
        return cls(cell.id, builds, cell.options, str(matrix.path), out_dir, expect=cell.expect_map,
                   stack=cell.stack.name if cell.stack else None, requested=stacks.requested(cell.options))

    def step(self, name: str, seconds: float, ok: bool, **extra: Any) -> None:
        self.record["steps"].append({"name": name, "seconds": round(seconds, 3), "ok": ok, **extra})

    def fail(self, kind: str, message: str, tail: str = "") -> None:
        self.record["error"] = {"kind": kind, "message": message.strip(), "log_tail": tail}

    def finish(self) -> dict[str, Any]:
        while self.before_finish:  # what the cell asked beside its steps (matrix.cells.install)
            self.before_finish.pop(0)()
        self.record["finished"] = now()
        self.record["seconds"] = round(time.perf_counter() - self.started, 3)
        write_json_atomic(self.dir / "cell.json", self.record)
        return self.record


def error_cell(cell: Cell, matrix: Matrix, out_dir: Path, kind: str, message: str) -> dict[str, Any]:
    """Record a cell that failed before it could be built (bad spec entry, index unreachable)."""
    run = CellRun.for_cell(cell, matrix, out_dir)
    run.fail(kind, message)
    return run.finish()


def probes_digest() -> str:
    """Digest of the probe code: a result produced by other probes is not reused."""
    h = hashlib.sha256()
    for f in sorted(PROBES_DIR.rglob("*.py")):
        h.update(f.relative_to(PROBES_DIR).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def cell_digest(cell: Cell, made: dict[str, Materialized]) -> str:
    """Identity of a cell run: both builds' content, the options, the probe code, the install recipe's digest
    (``matrix.envs.recipe``: a change to how envs are built makes stored results stale)."""
    ident = {
        "schema": CELL_SCHEMA,
        "builds": {role: {"pin": m.pin if m.digest is None else None, "digest": m.digest}
                   for role, m in sorted(made.items())},
        # transformers/trl left to the resolver are left out, so results from before those options stay reusable
        "options": {k: v for k, v in sorted(cell.options.__dict__.items())
                    if v or k not in stacks.TRAINER_PACKAGES},
        "guard_module": guard_module_of(cell),
        "probes": probes_digest(),
        "recipe": trees.recipe_of(cell, made).digest(),
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def guard_module_of(cell: Cell) -> str | None:
    """The guard protocol module a build of the cell names (only unsloth builds may), else None."""
    return next((b.guard_module for b in cell.builds if b.guard_module), None)


def restack(old: dict[str, Any], run: CellRun, path: Path) -> dict[str, Any]:
    """A reused result names the cell's current stack (a renamed stack has the same digest) and what its env
    resolved; a result from before the trainer-stack axis gains its ``stack`` entry. Rewritten when it changes."""
    entry = {**run.record["stack"], "resolved": stacks.resolved(old.get("installed") or [])}
    if old.get("stack") != entry:
        old["stack"] = entry
        write_json_atomic(path, old)
    return old


def reusable(path: Path, digest: str) -> dict[str, Any] | None:
    """The stored result at ``path`` if it was produced by the same cell digest and completed."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if old.get("cell_digest") != digest or old.get("error") is not None:
        return None
    if (old.get("install_check") or {}).get("redo"):  # its env was not what the index installs (interrupted redo)
        return None
    return old


@contextlib.contextmanager
def cell_lock(cdir: Path) -> Iterator[None]:
    """Refuse a second process working on the same cell directory at the same time."""
    cdir.mkdir(parents=True, exist_ok=True)
    path = cdir / ".lock"
    with path.open("a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise CellBusyError(f"{cdir}: another skewmatrix run (pid {holder}) is working on this cell; "
                                "wait for it or use another SKEWMATRIX_OUT") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh, fcntl.LOCK_UN)


def _int_setting(name: str) -> int | None:
    """A whole-number setting handed to the probes, or None when unset; a bad value is the user's error."""
    raw = settings.value(name)
    try:
        return int(raw) if raw else None
    except ValueError as exc:
        raise SkewmatrixError(f"{name}={raw!r}: not a whole number") from exc


def run_cell(cell: Cell, matrix: Matrix, out_dir: Path, env_dir: Path, *, create_env: bool = True,
             force: bool = False, progress: Any = print, index_problem: str | None = None,
             raw_cache: Path | None = None) -> dict[str, Any]:
    """Build, install and probe ``cell`` in ``env_dir``; write and return its cell JSON.

    An unchanged cell (same cell digest, completed result on disk) is not
    rebuilt: its stored result is returned, unless ``force``. ``raw_cache``: the run's directory of raw
    findings shared by digest (``matrix.cells.rawkey``); None runs the raw phase in every cell.
    """
    cdir = out_dir / "cells" / cell.id
    with cell_lock(cdir):
        return _run_cell(cell, matrix, out_dir, env_dir, create_env=create_env, force=force, progress=progress,
                         index_problem=index_problem, raw_cache=raw_cache)


def _run_cell(cell: Cell, matrix: Matrix, out_dir: Path, env_dir: Path, *, create_env: bool, force: bool,
              progress: Any, index_problem: str | None, raw_cache: Path | None,
              from_cache: bool = True) -> dict[str, Any]:
    run = CellRun.for_cell(cell, matrix, out_dir)
    cdir = run.dir
    opts = cell.options
    say = lambda msg: progress(f"[{cell.id}] {msg}")  # noqa: E731

    # 1. materialise both builds
    t = time.perf_counter()
    made: dict[str, Materialized] = {}
    build_dir = cdir / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True)
    subject = axes.subject_of(cell.roles)
    for b in cell.builds:
        role = b.role
        try:
            if subject is not None and subject.is_tree:
                made[role] = b.source.materialize_tree(build_dir / role)
                trees.tree_problem(made[role], subject)
            else:
                made[role] = b.source.materialize(build_dir / role)
        except (SkewmatrixError, OSError) as exc:  # OSError: e.g. no index while downloading a base wheel
            detail = str(exc) if isinstance(exc, SkewmatrixError) else f"{type(exc).__name__}: {exc}"
            run.step("materialize", time.perf_counter() - t, False)
            run.fail("build", f"build {b.name!r} ({b.describe()}): {detail}")
            return run.finish()
        run.record["builds"][role]["digest"] = made[role].digest
        run.record["builds"][role]["details"] = made[role].details
    run.step("materialize", time.perf_counter() - t, True)
    digest = cell_digest(cell, made)
    run.record["cell_digest"] = digest
    if not force:
        old = reusable(cdir / "cell.json", digest)
        if old is not None:
            say("unchanged since the last run (same cell digest): reusing its result (`-- --force` redoes it)")
            return restack(old, run, cdir / "cell.json")
    say(f"builds ready: {cell.describe()}")
    problem = disk_problem(env_dir.parent)
    if problem:
        run.fail("disk", problem)
        return run.finish()

    # 2-3. install (with overrides, so refused skews still install) while the index is asked whether a plain
    # install admits the pair and, for an install from uv's cache, what it would install (matrix.cells.install)
    how = trees.recipe_of(cell, made)
    run.record["recipe"] = how.as_record()
    python = env_dir / "bin" / "python"
    cached = install.prepare(env_dir, opts.python, create_env, how, from_cache)
    with install.asking(how, build_dir, stacks.requirement_lines(opts), python, cached) as asked:
        run.before_finish.append(lambda: asked.read(run.record, run.step))
        res, install_s = install.install(how, env_dir, opts.python, build_dir, opts.timeout, say, asked, cached,
                                         cdir / "install.log")
        run.step("install", install_s, res.ok, returncode=res.returncode, from_cache=asked.from_cache)
        if not res.ok:
            message = f"uv pip install failed (exit {res.returncode}):\n{res.stderr.strip()[-3000:]}"
            if index_problem:  # say first what the user must fix
                run.fail("index", f"the package index is unreachable: {index_problem}\n{message}", res.tail())
            else:
                run.fail("build", message, res.tail())
            return run.finish()
        say(f"installed in {install_s:.1f} s" + (" (from uv's cache)" if asked.from_cache else ""))
        record = record_and_probe(run, env_dir, python, say, raw_cache=raw_cache,
                                  trees={role: m.tree for role, m in made.items() if m.tree is not None})
    if not record.get("install_check", {}).get("redo"):
        return record
    # the index disagrees with uv's cache (or did not answer): the cell again, from the index, in a fresh env
    say(f"redoing the cell from the index in a fresh env: {record['install_check']['message']}")
    install.fresh_env(env_dir, opts.python)
    again = _run_cell(cell, matrix, out_dir, env_dir, create_env=create_env, force=True, progress=progress,
                      index_problem=index_problem, raw_cache=raw_cache, from_cache=False)
    again.setdefault("install_check", {})["before_redo"] = record["install_check"]
    write_json_atomic(cdir / "cell.json", again)
    return again


def record_and_probe(run: CellRun, env_dir: Path, python: Path, say: Any,
                     trees: dict[str, Path] | None = None, extra_env: dict[str, str] | None = None,
                     raw_cache: Path | None = None) -> dict[str, Any]:
    """Steps 4 and 5 of a cell, shared with pinned environments: record what is
    installed in ``env_dir`` (installing nothing), then run the probes with ``python``: the checks whose
    subject has the cell's axes, each source tree's path (``trees``, by axis) in its subject's variable."""
    opts = run.options
    cdir = run.dir
    # 4. record the resolved set
    t = time.perf_counter()
    run.record["installed"] = installed(env_dir)
    run.record["torch"] = torch_build(run.record["installed"])
    run.record["stack"]["resolved"] = stacks.resolved(run.record["installed"])
    for entry in run.record["builds"].values():
        got = next((d for d in run.record["installed"]
                    if d["name"].lower().replace("_", "-") == entry["package"]), None)
        entry["installed_version"] = got["version"] if got else None
        if entry.get("digest") is None and got:
            entry["digest"] = got.get("wheel_sha256") or got.get("tree_sha256")
    deep = {canonicalize_name(b["package"]) for b in run.record["builds"].values()}
    before = snapshot(env_dir, deep)  # what the probes must leave as they found it (issue #30)
    run.step("record", time.perf_counter() - t, True)
    # 5. probes, in a working directory of this cell's own
    t = time.perf_counter()
    work = cdir / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # Everything the probes need is on their command line (probes/handoff.py); their env is the clean one.
    roles = list(run.record["builds"])
    subject = axes.subject_of(roles)
    argv = [str(python), "-m", "probes", "--out", str(work / "probes.json"), "--device", opts.device,
            "--compile", opts.compile, "--cpu-mode", opts.cpu_mode, "--step-timeout", str(opts.timeout)]
    given = handoff.Handoff(
        # the build that names its guard protocol module; [options] train = false: the training steps say so
        guard_module=next((b.get("guard_module") for b in run.record["builds"].values() if b.get("guard_module")),
                          None),
        train=bool(getattr(opts, "train", True)),
        # a subject has one tree: the probes parse NAME=PATH into one mapping, so the last one named stands
        trees={subject.tree: str(list(trees.values())[-1])} if subject and subject.is_tree and trees else {},
        examples=_int_setting(settings.EXAMPLES_ENV), seed=_int_setting(settings.SEED_ENV))
    argv += handoff.argv(given)
    # the env's own bin first, as in an activated venv (nox does so): a `pip` a library starts is the env's
    path = os.pathsep.join([str(python.parent), *filter(None, [os.environ.get("PATH")])])
    env = envrun.clean_env(probes_path(cdir), PATH=path, **(extra_env or {}))
    for name in checks.for_axes(roles):
        argv += ["--check", checks.info(name).id]
    if raw_cache is not None:  # cells of this run whose raw phase reads the same inputs share its findings
        unimported = {b["package"] for role, b in run.record["builds"].items() if role == "unsloth"}
        key = rawkey.raw_key(run.record["installed"], unimported=unimported, interpreter=python,
                             probes=probes_digest(), options=argv[5:], env=env)
        argv += handoff.argv(handoff.Handoff(raw_cache=f"{raw_cache / key}.json", cell=run.record["cell_id"]))
    say("probing (an `import unsloth` takes ~20 s on CPU)" if "unsloth" in roles else "probing")
    log = work / "probes.stdout.log"
    with ticking(say, "probing"):
        rc = envrun.run(argv, cwd=work, env=env, timeout=opts.timeout * 3 + 60, log=log).returncode
    ok = rc == 0 and (work / "probes.json").is_file()
    run.step("probes", time.perf_counter() - t, ok, returncode=rc)
    # 6. the pair under test stayed put: a probe process that changed the env probed something else than the cell
    moved = changes(before, snapshot(env_dir, deep))
    run.record["stay_put"] = {"checked": len(before["dists"]), "changes": moved}
    if moved:
        run.fail("probe", "the env changed while the probes ran (an install at import?): " + "; ".join(moved),
                 log_tail(log))
        return run.finish()
    if not ok:
        kind = "timeout" if rc is None else ("crash" if rc < 0 else "probe")
        what = "timed out" if rc is None else (f"was killed by signal {-rc}" if rc < 0 else f"exited {rc}")
        run.fail(kind, f"python -m probes {what}", log_tail(log) or log_tail(work / "probes.log"))
        return run.finish()
    probes = json.loads((work / "probes.json").read_text(encoding="utf-8"))
    found = probes.pop("checks", {})
    # In registry order (the probe JSON's keys are sorted), so the first failing step named is the first run.
    order = {cid: i for i, cid in enumerate(checks.ids())}
    run.record["checks"] = dict(sorted(found.items(), key=lambda kv: order.get(kv[0], len(order))))
    run.record["probes"] = probes
    steps = [(cid, s) for cid, section in run.record["checks"].items() for s in section.get("steps", [])]
    for cid, s in steps:
        run.step(f"probe:{cid}:{s['name']}", s.get("seconds", 0.0), s.get("status") == "ok")
    # A probe process that hung or died is the cell's error, with its signal and log tail.
    for cid, s in steps:
        if s.get("status") in ("timeout", "crash"):
            run.fail(s["status"], f"probe {cid}/{s['name']}: {s.get('reason')}", s.get("log_tail", ""))
            break
    say(f"probed in {time.perf_counter() - t:.1f} s")
    return run.finish()
