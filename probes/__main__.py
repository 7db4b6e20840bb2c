"""``python -m probes``: run every probe of one cell and write its probe JSON.

Runs inside the cell env, in the cell's own working directory (``import
unsloth`` writes ``unsloth_compiled_cache/`` into the cwd). In order:

1. ``static`` -- in this process: AST of the installed forward, no import;
2. the ``raw`` phase (``probes.phases``) -- a process that never imports
   unsloth: the runtime detector and behaviour test 1;
3. the ``unsloth`` phase -- a process that imports unsloth first: the guard
   probe, then behaviour tests 2-13 and the extra probes (by default it runs
   alongside the raw phase and waits for its findings before the tests).

The probe JSON reports three steps, ``runtime``, ``guard`` and ``behavior``
(each with status ``ok``/``error``/``crash``/``timeout``/``skipped``, its
seconds, the process that ran it, and its result); after a phase that hung,
the next one is skipped to keep the cell within its time budget.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Any

from probes import static
from probes.common import write_json
from probes.phases import run_both_forked, run_both_spawned

SCHEMA = "skewmatrix.probes/1"
LOG = "probes.log"


def _tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _split(phase: dict[str, Any], parts: list[tuple[str, str, str]], log: Path) -> list[dict[str, Any]]:
    """Turn one phase process into the steps it ran: (step name, result key, seconds key)."""
    steps = []
    result = phase.get("result") or {}
    for name, key, seconds_key in parts:
        step: dict[str, Any] = {"name": name, "process": phase["name"], "returncode": phase["returncode"]}
        part = result.get(key) if phase["status"] == "ok" else None
        step["seconds"] = result.get(seconds_key, phase["seconds"]) if part is not None else phase["seconds"]
        if phase["status"] != "ok":
            step.update(status=phase["status"], reason=phase["reason"], result=None, log_tail=_tail(log))
            if "signal" in phase:
                step["signal"] = phase["signal"]
        elif part is None or part.get("ok") is False:
            reason = str((part or {}).get("error") or f"{name} left no result").splitlines()[0]
            step.update(status="error", reason=reason, result=part, log_tail=_tail(log))
        else:
            step.update(status="ok", result=part)
        steps.append(step)
    return steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m probes", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="probe JSON to write")
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    ap.add_argument("--compile", choices=("on", "off", "auto"), default="auto")
    ap.add_argument("--cpu-mode", choices=("allow-cpu", "cpu-backend"), default="allow-cpu")
    ap.add_argument("--step-timeout", type=float, default=900.0, help="seconds per probe process")
    ap.add_argument("--isolation", choices=("fork", "spawn"), default="fork",
                    help="fork: import torch once and fork each phase (default); spawn: fresh interpreters")
    args = ap.parse_args(argv)

    workdir = Path.cwd()
    log = workdir / LOG
    report: dict[str, Any] = {"schema": SCHEMA, "python": platform.python_version(), "executable": sys.executable,
                              "cpu_mode": args.cpu_mode, "isolation": args.isolation, "steps": []}
    start = time.perf_counter()
    report["static"] = static.detect_installed().to_dict()
    report["static_s"] = round(time.perf_counter() - start, 3)

    start = time.perf_counter()
    if args.isolation == "fork" or args.device == "auto":
        import torch  # shared by both forked phases: the largest import they have in common

        report["torch_import_s"] = round(time.perf_counter() - start, 3)
        cuda = torch.cuda.is_available()
    else:
        cuda = False
    device = ("cuda" if cuda else "cpu") if args.device == "auto" else args.device
    compile_on = args.compile == "on" or (args.compile == "auto" and device == "cuda")
    report.update(device=device, compile="on" if compile_on else "off")
    runner = run_both_forked if args.isolation == "fork" else run_both_spawned
    raw, uns = runner(device, compile_on, args.cpu_mode, workdir, log, args.step_timeout)
    report["steps"] += _split(raw, [("runtime", "runtime", "runtime_s")], log)
    if uns is None:
        for name in ("guard", "behavior"):
            report["steps"].append({"name": name, "process": "unsloth", "status": "skipped", "seconds": 0.0,
                                    "returncode": None, "reason": "not run: the raw phase timed out",
                                    "result": None})
    else:
        report["steps"] += _split(uns, [("guard", "guard", "guard_s"), ("behavior", "behavior", "behavior_s")], log)
    report["phases_s"] = round(time.perf_counter() - start, 3)
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
