"""``python -m probes``: run every registered check's phases in one cell and write its probe JSON.

Runs inside the cell env, in the cell's own working directory (``import
unsloth`` writes ``unsloth_compiled_cache/`` into the cwd). In order:

1. each check's ``static()`` -- in this process, once the phase processes below are started (forked, they
   run meanwhile): reads installed source, imports nothing under test (a costly reading is shared by the
   cells of the run that read the same bytes: ``probes.memo``);
2. the ``raw`` process (``probes.phases``) -- never imports unsloth: each check's raw steps;
3. the ``unsloth`` process -- ``import unsloth`` once, then each check's unsloth steps (by default it runs
   alongside the raw process and waits for its findings only where a step needs them);
4. each check's CPU-backend steps -- after ``import unsloth`` in zoo's CPU-backend mode: in the unsloth
   process when ``--cpu-mode cpu-backend``; else in a third process, ``cpu-backend``, forked alongside the
   others on a ``cpu`` device whose zoo has a CPU backend (elsewhere each such step is ``skipped``, with why).

The probe JSON holds ``checks: {id: {"static": ..., "steps": [...]}}``; each step has a status
``ok``/``error``/``crash``/``timeout``/``skipped``, its seconds, the process that ran it, and its result.
After a process that hung, the next one is skipped to keep the cell within its time budget.
``--phases raw`` runs only the static and raw steps (the scan's runtime confirmation).
Timings: ``phases_s`` (from ``import torch``, ``torch_import_s``, to the last phase process's end; the
static detectors' ``static_s`` falls inside it when ``static_in_phases``), ``process_s`` (each process's wall
seconds; forked, they overlap), ``import_unsloth_s``, ``waited_for_raw_s``, and each step's ``seconds``.
``raw_reuse``: whether the raw findings were stored by another cell of the run with the same inputs
(``probes.rawcache``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

from probes import checks, handoff
from probes.common import error_text, write_json
from probes.phases import (
    CPU_BACKEND,
    CPU_BACKEND_IMPORT_KEY,
    cpu_backend_steps,
    cpu_backend_unavailable,
    run_all_forked,
    run_all_spawned,
)

SCHEMA = "skewmatrix.probes/2"
LOG = "probes.log"


def _tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _steps(phase: dict[str, Any] | None, check_id: str, names: list[str], log: Path,
           skipped_reason: str, process: str = "unsloth") -> list[dict[str, Any]]:
    """Turn one phase process into this check's steps, judged by the process's status and the step's result.

    ``phase`` None: the process did not run; each step is ``skipped`` with ``skipped_reason``.
    """
    out = []
    for name in names:
        if phase is None:
            out.append({"name": name, "process": process, "status": "skipped", "seconds": 0.0,
                        "returncode": None, "reason": skipped_reason, "result": None})
            continue
        st: dict[str, Any] = {"name": name, "process": phase["name"], "returncode": phase["returncode"]}
        part = None
        if phase["status"] == "ok":
            part = (((phase.get("result") or {}).get("checks") or {}).get(check_id) or {}).get("steps", {}).get(name)
        if phase["status"] != "ok":
            st.update(status=phase["status"], reason=phase["reason"], result=None, seconds=phase["seconds"],
                      log_tail=_tail(log))
            if "signal" in phase:
                st["signal"] = phase["signal"]
        elif part is not None and part.get("skipped"):
            st.update(status="skipped", reason=str(part["skipped"]), result=None, seconds=0.0)
        elif part is None or part.get("ok") is False:
            reason = str((part or {}).get("error") or f"{name} left no result").splitlines()[0]
            st.update(status="error", reason=reason, result=part, seconds=(part or {}).get("seconds", 0.0),
                      log_tail=_tail(log))
        else:
            st.update(status="ok", result=part, seconds=part.get("seconds", 0.0))
        if part is not None and part.get("reused_from") is not None:  # another cell's raw findings
            st["reused_from"] = part["reused_from"]
        out.append(st)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m probes", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="probe JSON to write")
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    ap.add_argument("--compile", choices=("on", "off", "auto"), default="auto")
    ap.add_argument("--cpu-mode", choices=("allow-cpu", "cpu-backend"), default="allow-cpu")
    ap.add_argument("--step-timeout", type=float, default=900.0, help="seconds per probe process")
    ap.add_argument("--isolation", choices=("fork", "spawn"), default="fork",
                    help="fork: import torch once and fork each phase (default); spawn: fresh interpreters")
    ap.add_argument("--check", action="append", default=None, metavar="ID",
                    help="run only this check (repeatable; default: every registered check)")
    ap.add_argument("--phases", choices=("all", "raw"), default="all",
                    help="raw: only the static and raw steps (no import unsloth)")
    handoff.add_arguments(ap)
    args = ap.parse_args(argv)
    handoff.use(handoff.from_args(args))
    known = checks.ids()
    for c in args.check or ():
        if c not in known:
            ap.error(f"--check {c!r}: not a registered check; valid: {', '.join(known)}")
    selected = tuple(args.check) if args.check else None
    names = [n for n in checks.REGISTRY if selected is None or checks.info(n).id in selected]

    workdir = Path.cwd()
    log = workdir / LOG
    report: dict[str, Any] = {"schema": SCHEMA, "python": platform.python_version(), "executable": sys.executable,
                              "cpu_mode": args.cpu_mode, "isolation": args.isolation, "phases": args.phases,
                              "checks": {}}

    def run_static() -> None:
        """Each check's static detector, in this process, while the phase processes run (they never see
        what it read: forked before it, or spawned)."""
        begun = time.perf_counter()
        for name in names:
            info = checks.info(name)
            try:
                static = checks.phases_module(name).static()
            except Exception as exc:  # a detector that breaks is an unknown verdict with the reason
                static = {"verdict": "unknown",
                          "reason": f"static detector failed: {error_text(exc).splitlines()[0]}"}
            report["checks"][info.id] = {"static": static, "steps": []}
        report["static_s"] = round(time.perf_counter() - begun, 3)

    start = time.perf_counter()
    if args.isolation == "fork" or args.device == "auto":
        import torch  # shared by every forked phase: the largest import they have in common

        report["torch_import_s"] = round(time.perf_counter() - start, 3)
        cuda = torch.cuda.is_available()
    else:
        cuda = False
    device = ("cuda" if cuda else "cpu") if args.device == "auto" else args.device
    compile_on = args.compile == "on" or (args.compile == "auto" and device == "cuda")
    report.update(device=device, compile="on" if compile_on else "off", static_in_phases=True)
    runner = run_all_forked if args.isolation == "fork" else run_all_spawned
    modules = {name: checks.phases_module(name) for name in names}
    # Where each check's CPU-backend steps run: the unsloth process already is the backend in
    # cpu-backend mode; in allow-cpu mode a third process, where the backend can be selected at all.
    unavailable = cpu_backend_unavailable(device)
    backend_process = "unsloth" if args.cpu_mode == "cpu-backend" else CPU_BACKEND
    third = (args.phases == "all" and backend_process == CPU_BACKEND and unavailable is None
             and any(cpu_backend_steps(m) for m in modules.values()))
    not_run = unavailable or ("not run: --phases raw" if args.phases == "raw" else None)
    report["cpu_backend"] = {"process": None if not_run else backend_process, "reason": not_run}
    # Checks whose every step is raw (a subject that is not unsloth) need no `import unsloth` at all.
    raw_only = args.phases == "raw" or not any(m.UNSLOTH_STEPS or cpu_backend_steps(m) for m in modules.values())
    phases = runner(device, compile_on, args.cpu_mode, workdir, log, args.step_timeout, selected,
                    raw_only, cpu_backend=third, meanwhile=run_static)
    raw, uns, cpu = phases["raw"], phases.get("unsloth"), phases.get(CPU_BACKEND)
    # Each process's wall seconds (forked, they overlap) and whether the raw findings were another cell's.
    report["process_s"] = {name: (phase.get("result") or {}).get("ran_s", phase["seconds"])
                           for name, phase in phases.items() if phase is not None}
    report["raw_reuse"] = (raw.get("result") or {}).get("reuse") if raw is not None else None
    for phase, keys in ((uns, ("import_unsloth_s", "waited_for_raw_s")), (cpu, (CPU_BACKEND_IMPORT_KEY,))):
        for key in keys:
            if phase is not None and isinstance(phase.get("result"), dict) and key in phase["result"]:
                report[key] = phase["result"][key]
    skipped = "not run: --phases raw" if args.phases == "raw" else "not run: the raw phase timed out"
    for name in names:
        info = checks.info(name)
        module = modules[name]
        steps = _steps(raw, info.id, [s.name for s in module.RAW_STEPS], log, skipped)
        if args.phases == "all":
            steps += _steps(uns, info.id, [s.name for s in module.UNSLOTH_STEPS], log, skipped)
            backend_names = [s.name for s in cpu_backend_steps(module)]
            if backend_names:
                host = uns if backend_process == "unsloth" else cpu
                why = unavailable or skipped
                steps += _steps(None if unavailable else host, info.id, backend_names, log, why, backend_process)
        report["checks"][info.id]["steps"] = steps
    report["phases_s"] = round(time.perf_counter() - start, 3)
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
