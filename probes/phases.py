"""The probe processes of a cell, and how they are started. Knows no check by name.

* ``raw``: never imports unsloth. Zoo alone (``UNSLOTH_IS_PRESENT=1
  UNSLOTH_ALLOW_CPU=1``): every registered check's ``RAW_STEPS``
  (runtime detectors, and whatever the check hands on in ``ctx.shared``).
* ``unsloth``: ``import unsloth`` once, in the cell's CPU mode, then every
  check's ``UNSLOTH_STEPS`` in order (a step's ``early`` work starts right
  after the import, beside the steps before it); a step marked ``needs_raw`` first waits
  for the raw process's findings (``raw.json``). In ``cpu-backend`` mode this
  process already is zoo's CPU backend, so each check's ``CPU_BACKEND_STEPS``
  run here too, after its unsloth steps.
* ``cpu-backend``: only in ``allow-cpu`` mode, on a ``cpu`` device, for a zoo
  that has a CPU backend (``unsloth_zoo/cpu``, found without importing zoo),
  and when some check defines ``CPU_BACKEND_STEPS``: ``import unsloth`` with
  neither ``UNSLOTH_ALLOW_CPU`` nor ``UNSLOTH_IS_PRESENT`` (so unsloth selects
  zoo's CPU backend), then those steps. See ``probes/checks/__init__.py``.

Isolation (``--isolation``):

* ``fork`` (default): the parent imports torch once, then forks every phase
  at once. No child pays torch's import, the largest shared cost of a
  cell, and unsloth's imports overlap zoo's; the unsloth phase waits for the
  raw phase's findings only before its behaviour tests. No child
  inherits zoo or unsloth, and the environment each needs is set in the
  child before anything reads it.
* ``spawn``: a fresh interpreter per phase, one after the other (``python
  -m probes.phases``). Slower; kept to check that forking changes no verdict.

A child reports through its JSON file and its exit status, both judged by the
parent: a timeout kills it (``timeout``), a signal is a ``crash`` with the
signal's name, a missing or unreadable file is an ``error``. After a raw
phase that timed out, the other phases are killed (fork) or not started.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes import checks, handoff, rawcache
from probes.common import error_text, exception_chain, reap, write_json

RAW_ENV = {"UNSLOTH_IS_PRESENT": "1", "UNSLOTH_ALLOW_CPU": "1"}
RAW_DONE = "raw.done"  # written by the parent once the raw phase has ended, however it ended
CPU_BACKEND = "cpu-backend"  # the third process's name
TRAIN_OFF = "n/a: training runs are turned off for this matrix ([options] train = false)"
CPU_BACKEND_IMPORT_KEY = "import_unsloth_cpu_backend_s"


def phase_env(phase: str, cpu_mode: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(variables to set, variables to drop) for a phase."""
    if phase == "raw":
        return dict(RAW_ENV), ()
    if phase == "unsloth" and cpu_mode == "allow-cpu":
        return {"UNSLOTH_ALLOW_CPU": "1"}, ("UNSLOTH_IS_PRESENT",)
    return {}, ("UNSLOTH_IS_PRESENT", "UNSLOTH_ALLOW_CPU")


def cpu_backend_unavailable(device: str) -> str | None:
    """Why zoo's CPU backend cannot be probed here (an ``n/a: ...`` line), or None when it can.

    Reads the installed files only: zoo is not imported (its import is under test elsewhere).
    """
    if device != "cpu":
        return f"n/a: the CPU backend is selected only on a host with no accelerator; device is {device}"
    try:
        spec = importlib.util.find_spec("unsloth_zoo")
    except (ImportError, ValueError) as exc:
        return f"n/a: unsloth_zoo cannot be located ({type(exc).__name__}: {exc})"
    if spec is None:
        return "n/a: unsloth_zoo is not installed"
    if not any(Path(p, "cpu", "__init__.py").is_file() for p in spec.submodule_search_locations or ()):
        return "n/a: this zoo has no CPU backend (no unsloth_zoo/cpu)"
    return None


def cpu_backend_steps(module: Any) -> tuple[Any, ...]:
    """A check's ``CPU_BACKEND_STEPS`` (none when its phases module defines none)."""
    return tuple(getattr(module, "CPU_BACKEND_STEPS", ()))


def _run_steps(steps: Any, ctx: checks.PhaseContext, before_step: Callable[[Any], None] | None = None,
               ) -> dict[str, Any]:
    """Run a check's steps in order; time each; an exception is that step's error, never the process's."""
    out: dict[str, Any] = {}
    for st in steps:
        if before_step is not None:
            before_step(st)
        start = time.perf_counter()
        if st.training and not handoff.given().train:  # --no-train: the matrix's [options] train = false
            out[st.name] = {"ok": True, "skipped": TRAIN_OFF, "seconds": 0.0}
            continue
        try:
            result = {"ok": True, **st.fn(ctx)}
        except Exception as exc:  # the step's own failure is a finding, kept in its result
            result = {"ok": False, "error": error_text(exc)}
        result["seconds"] = round(time.perf_counter() - start, 3)
        out[st.name] = result
    return out


def _check_names(selected: tuple[str, ...] | None) -> list[str]:
    return [n for n in checks.REGISTRY if selected is None or checks.info(n).id in selected]


def run_raw(device: str, torch_compile: bool, cpu_mode: str, workdir: Path,
            selected: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Every check's raw steps, in a process that never imports unsloth; or, when the harness handed a raw
    cache (``--raw-cache``), the findings another cell of the run stored for the same inputs
    (``probes.rawcache``)."""
    def compute() -> dict[str, Any]:
        out: dict[str, Any] = {"checks": {}}
        for name in _check_names(selected):
            info = checks.info(name)
            ctx = checks.PhaseContext(device, torch_compile, cpu_mode, workdir, shared={})
            try:
                steps = _run_steps(checks.phases_module(name).RAW_STEPS, ctx)
            except Exception as exc:  # the check's phases module itself did not import
                steps, ctx.shared = {}, {"error": error_text(exc)}
            out["checks"][info.id] = {"steps": steps, "shared": ctx.shared}
        return out

    given = handoff.given()
    return rawcache.run_or_reuse(given.raw_cache, given.cell, compute, rawcache.places(workdir))


def _read_raw(workdir: Path) -> dict[str, Any]:
    while not (workdir / RAW_DONE).exists():
        time.sleep(0.05)
    raw_file = workdir / "raw.json"
    try:
        data = json.loads(raw_file.read_text(encoding="utf-8")) if raw_file.is_file() else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def _import_and_run(attrs: Callable[[Any], tuple[Any, ...]], import_key: str, device: str, torch_compile: bool,
                    cpu_mode: str, workdir: Path, selected: tuple[str, ...] | None) -> dict[str, Any]:
    """``import unsloth`` once (timed under ``import_key``), then each check's steps that ``attrs`` picks.

    A check with no step here is left out; a step marked ``needs_raw`` waits for the raw findings.
    """
    out: dict[str, Any] = {"checks": {}}
    start = time.perf_counter()
    import_error = None
    imported: dict[str, Any] = {"imported": True, "chain": []}
    try:
        import unsloth  # noqa: F401 -- the import under test: it may install guards and patch trainers
    except Exception as exc:
        import_error = f"import unsloth failed: {type(exc).__name__}: {exc}"
        imported = {"imported": False, "chain": exception_chain(exc)}
    out[import_key] = round(time.perf_counter() - start, 3)
    raw: dict[str, Any] | None = None
    planned = [(checks.info(name).id, steps,
                checks.PhaseContext(device, torch_compile, cpu_mode, workdir, shared={}, imported=imported))
               for name in _check_names(selected) if (steps := attrs(checks.phases_module(name)))]
    try:
        if import_error is None:  # each step's early work, beside the steps before it (checks.Step.early)
            out.update(checks.start_early(planned, handoff.given().train))
        for check_id, steps, ctx in planned:
            if import_error is not None:  # only the steps that read the import's outcome can run
                failed = {s.name: {"ok": False, "error": import_error, "seconds": 0.0}
                          for s in steps if not s.reads_import}
                readers = tuple(s for s in steps if s.reads_import)
                out["checks"][check_id] = {"steps": {**failed, **(_run_steps(readers, ctx) if readers else {})}}
                continue

            def load_raw(st: Any, ctx: checks.PhaseContext = ctx, check_id: str = check_id) -> None:
                nonlocal raw
                if st.needs_raw and ctx.raw is None:
                    if raw is None:
                        waited = time.perf_counter()
                        raw = _read_raw(workdir)
                        out["waited_for_raw_s"] = round(time.perf_counter() - waited, 3)
                    ctx.raw = ((raw.get("checks") or {}).get(check_id) or {}).get("shared") or {}

            out["checks"][check_id] = {"steps": _run_steps(steps, ctx, load_raw)}
    finally:
        reap()  # a child started early whose step never collected it
    return out


def run_unsloth(device: str, torch_compile: bool, cpu_mode: str, workdir: Path,
                selected: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``import unsloth`` once, then every check's unsloth steps (and, in ``cpu-backend`` mode where
    the backend applies, its CPU-backend steps after them)."""
    backend = cpu_mode == "cpu-backend" and cpu_backend_unavailable(device) is None

    def attrs(module: Any) -> tuple[Any, ...]:
        return tuple(module.UNSLOTH_STEPS) + (cpu_backend_steps(module) if backend else ())

    return _import_and_run(attrs, "import_unsloth_s", device, torch_compile, cpu_mode, workdir, selected)


def run_cpu_backend(device: str, torch_compile: bool, cpu_mode: str, workdir: Path,
                    selected: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``import unsloth`` in zoo's CPU-backend mode, then every check's CPU-backend steps."""
    return _import_and_run(cpu_backend_steps, CPU_BACKEND_IMPORT_KEY, device, torch_compile, cpu_mode, workdir,
                           selected)


PHASES: dict[str, Callable[..., dict[str, Any]]] = {"raw": run_raw, "unsloth": run_unsloth,
                                                     CPU_BACKEND: run_cpu_backend}


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _finish(name: str, status_code: int | None, out: Path, started: float, timeout: float) -> dict[str, Any]:
    """Judge a finished (or killed) phase by its exit status and its result file together."""
    step: dict[str, Any] = {"name": name, "seconds": round(time.perf_counter() - started, 3), "returncode": status_code}
    result = None
    if status_code is None:
        step.update(status="timeout", reason=f"{name} did not finish within {timeout:.0f} s")
    elif status_code < 0:
        sig = _signal_name(-status_code)
        step.update(status="crash", signal=sig, reason=f"{name} was killed by {sig}")
    if out.is_file():
        try:
            result = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            step.setdefault("status", "crash")
            step.setdefault("reason", f"{name} wrote an unreadable result: {exc}")
    if "status" not in step:
        if result is None:
            step.update(status="error", reason=f"{name} exited {status_code} without a result")
        elif status_code != 0 or result.get("ok") is False:
            first = str(result.get("error") or f"{name} exited {status_code}").splitlines()[0]
            step.update(status="error", reason=first)
        else:
            step["status"] = "ok"
    step["result"] = result
    return step


def start_forked(name: str, device: str, torch_compile: bool, cpu_mode: str, workdir: Path, log: Path,
                 selected: tuple[str, ...] | None = None) -> int:
    """Fork a child that runs phase ``name``; return its pid."""
    out = workdir / f"{name}.json"
    out.unlink(missing_ok=True)
    set_env, drop = phase_env(name, cpu_mode)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n===== {name} (forked from pid {os.getpid()})\n")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code, begun = 1, time.perf_counter()  # child from here on: never returns
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        for key in drop:
            os.environ.pop(key, None)
        os.environ.update(set_env)
        try:
            data = {**PHASES[name](device, torch_compile, cpu_mode, workdir, selected), "ok": True}
            data["ran_s"] = round(time.perf_counter() - begun, 3)  # its own seconds (the parent may wait later)
            code = 0
        except BaseException as exc:  # the phase's own failure is a finding, kept in its JSON
            data = {"ok": False, "error": error_text(exc)}
            print(error_text(exc), file=sys.stderr)
        write_json(out, data)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def wait_forked(name: str, pid: int, workdir: Path, started: float, timeout: float) -> dict[str, Any]:
    """Wait for a forked phase; kill it at its deadline."""
    deadline = started + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return _finish(name, os.waitstatus_to_exitcode(status), workdir / f"{name}.json", started, timeout)
        if time.perf_counter() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return _finish(name, None, workdir / f"{name}.json", started, timeout)
        time.sleep(0.05)


def run_all_forked(device: str, torch_compile: bool, cpu_mode: str, workdir: Path, log: Path,
                   timeout: float, selected: tuple[str, ...] | None = None, raw_only: bool = False,
                   cpu_backend: bool = False, meanwhile: Callable[[], None] | None = None,
                   ) -> dict[str, dict[str, Any] | None]:
    """Every phase at once: unsloth's imports overlap zoo's raw import; the behaviour tests in the
    unsloth phase then wait for the raw phase's findings (``raw.done``). ``meanwhile`` runs in this
    process once they are started (the static detectors). Phase name -> its outcome (None: killed or
    not run because the raw phase timed out)."""
    (workdir / RAW_DONE).unlink(missing_ok=True)
    started = time.perf_counter()
    raw_pid = start_forked("raw", device, torch_compile, cpu_mode, workdir, log, selected)
    later = [] if raw_only else ["unsloth", *([CPU_BACKEND] if cpu_backend else [])]
    pids = {name: start_forked(name, device, torch_compile, cpu_mode, workdir, log, selected) for name in later}
    if meanwhile is not None:
        meanwhile()
    if raw_only:
        return {"raw": wait_forked("raw", raw_pid, workdir, started, timeout)}
    out: dict[str, dict[str, Any] | None] = {"raw": wait_forked("raw", raw_pid, workdir, started, timeout)}
    raw = out["raw"]
    assert raw is not None
    (workdir / RAW_DONE).write_text(raw["status"] + "\n", encoding="utf-8")
    for name in later:
        if raw["status"] == "timeout":  # what hung once would hang again: keep the cell in its budget
            os.kill(pids[name], signal.SIGKILL)
            os.waitpid(pids[name], 0)
            out[name] = None
        else:
            out[name] = wait_forked(name, pids[name], workdir, started, timeout)
    return out


def run_all_spawned(device: str, torch_compile: bool, cpu_mode: str, workdir: Path, log: Path,
                    timeout: float, selected: tuple[str, ...] | None = None, raw_only: bool = False,
                    cpu_backend: bool = False, meanwhile: Callable[[], None] | None = None,
                    ) -> dict[str, dict[str, Any] | None]:
    """The phases one after the other, each in a fresh interpreter (``meanwhile`` first, in this one)."""
    if meanwhile is not None:
        meanwhile()
    (workdir / RAW_DONE).unlink(missing_ok=True)
    raw = run_spawned("raw", device, torch_compile, cpu_mode, workdir, log, timeout, selected)
    out: dict[str, dict[str, Any] | None] = {"raw": raw}
    if raw_only:
        return out
    (workdir / RAW_DONE).write_text(raw["status"] + "\n", encoding="utf-8")
    for name in ["unsloth", *([CPU_BACKEND] if cpu_backend else [])]:
        timed_out = raw["status"] == "timeout"
        out[name] = None if timed_out else run_spawned(name, device, torch_compile, cpu_mode, workdir, log,
                                                       timeout, selected)
    return out


def run_spawned(name: str, device: str, torch_compile: bool, cpu_mode: str, workdir: Path, log: Path,
                timeout: float, selected: tuple[str, ...] | None = None) -> dict[str, Any]:
    out = workdir / f"{name}.json"
    out.unlink(missing_ok=True)
    set_env, drop = phase_env(name, cpu_mode)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(set_env)
    argv = [sys.executable, "-m", "probes.phases", name, "--out", str(out), "--device", device,
            "--compile", "on" if torch_compile else "off", "--cpu-mode", cpu_mode,
            *(f"--check={c}" for c in selected or ()), *handoff.argv(handoff.given())]
    started = time.perf_counter()
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n===== {name}: {' '.join(argv[1:])}\n")
        fh.flush()
        try:
            code: int | None = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=workdir,
                                              timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            code = None
    return _finish(name, code, out, started, timeout)


def main(argv: list[str] | None = None) -> int:
    """``python -m probes.phases raw|unsloth|cpu-backend --out FILE``: one phase in this interpreter (spawn)."""
    ap = argparse.ArgumentParser(prog="python -m probes.phases")
    ap.add_argument("phase", choices=sorted(PHASES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compile", choices=("on", "off"), default="off")
    ap.add_argument("--cpu-mode", choices=("allow-cpu", "cpu-backend"), default="allow-cpu")
    ap.add_argument("--check", action="append", default=None, help="only this check id (repeatable)")
    handoff.add_arguments(ap)
    args = ap.parse_args(argv)
    handoff.use(handoff.from_args(args))
    try:
        selected = tuple(args.check) if args.check else None
        data = {**PHASES[args.phase](args.device, args.compile == "on", args.cpu_mode, Path.cwd(), selected),
                "ok": True}
        code = 0
    except Exception as exc:
        data = {"ok": False, "error": error_text(exc)}
        print(error_text(exc), file=sys.stderr)
        code = 1
    write_json(args.out, data)
    return code


if __name__ == "__main__":
    sys.exit(main())
