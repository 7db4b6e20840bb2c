"""``python -m probes``: run every probe of one cell and write its probe JSON.

Runs inside the cell env, in the cell's own working directory (``import
unsloth`` writes ``unsloth_compiled_cache/`` into the cwd). Steps:

1. ``static``   -- in this process: AST of the installed forward, no import;
2. ``runtime``  -- subprocess, zoo only (never ``import unsloth``): raw kernel;
3. ``guard``    -- subprocess, after ``import unsloth``: forward identity and
                   the all-masked call through the public entry points;
4. ``behavior`` -- the behaviour suite (``probes.behavior``), when present.

Each subprocess writes its own JSON; a process that times out, dies from a
signal or exits non-zero is recorded with its exit status and log tail, and
the remaining steps still run. Output: one JSON file (``--out``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from probes import static
from probes.common import write_json

SCHEMA = "skewmatrix.probes/1"
LOG = "probes.log"


def _tail(path: Path, n: int = 40) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def run_step(name: str, module: str, args: list[str], env_extra: dict[str, str], drop_env: tuple[str, ...],
             timeout: float, workdir: Path) -> dict[str, Any]:
    """Run ``python -m module`` with a result file; judge it by exit code and file together."""
    out = workdir / f"{name}.json"
    out.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in drop_env}
    env.update(env_extra)
    log = workdir / LOG
    start = time.perf_counter()
    step: dict[str, Any] = {"name": name}
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"\n===== {name}: {sys.executable} -m {module} {' '.join(args)}\n")
        fh.flush()
        try:
            proc = subprocess.run([sys.executable, "-m", module, "--out", str(out), *args], stdout=fh,
                                  stderr=subprocess.STDOUT, env=env, cwd=workdir, timeout=timeout, check=False)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = None
    step["seconds"] = round(time.perf_counter() - start, 3)
    step["returncode"] = rc
    if rc is None:
        step.update(status="timeout", reason=f"{name} did not finish within {timeout:.0f} s")
    elif rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        step.update(status="crash", signal=sig, reason=f"{name} was killed by {sig}")
    result = None
    if out.is_file():
        try:
            result = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            step.update(status="crash", reason=f"{name} wrote an unreadable result: {exc}")
    if "status" not in step:
        if result is None:
            step.update(status="error", reason=f"{name} exited {rc} without a result")
        elif rc != 0 or not result.get("ok", True):
            step.update(status="error", reason=(result or {}).get("error", f"{name} exited {rc}").splitlines()[0])
        else:
            step["status"] = "ok"
    if step["status"] != "ok":
        step["log_tail"] = _tail(log)
    step["result"] = result
    return step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m probes", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="probe JSON to write")
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    ap.add_argument("--compile", choices=("on", "off", "auto"), default="auto")
    ap.add_argument("--cpu-mode", choices=("allow-cpu", "cpu-backend"), default="allow-cpu")
    ap.add_argument("--step-timeout", type=float, default=900.0, help="seconds per probe process")
    ap.add_argument("--no-behavior", action="store_true", help="skip the behaviour suite")
    args = ap.parse_args(argv)

    workdir = Path.cwd()
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    compile_on = args.compile == "on" or (args.compile == "auto" and device == "cuda")
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "python": platform.python_version(),
        "executable": sys.executable,
        "device": device,
        "compile": "on" if compile_on else "off",
        "cpu_mode": args.cpu_mode,
        "steps": [],
    }
    start = time.perf_counter()
    report["static"] = static.detect_installed().to_dict()
    report["static_s"] = round(time.perf_counter() - start, 3)

    raw_env = {"UNSLOTH_IS_PRESENT": "1", "UNSLOTH_ALLOW_CPU": "1"}
    if args.cpu_mode == "allow-cpu":
        unsloth_env, drop = {"UNSLOTH_ALLOW_CPU": "1"}, ("UNSLOTH_IS_PRESENT",)
    else:
        unsloth_env, drop = {}, ("UNSLOTH_IS_PRESENT", "UNSLOTH_ALLOW_CPU")
    steps = [
        ("runtime", "probes.runtime", ["--device", device], raw_env, ()),
        ("guard", "probes.guard", ["--device", device, "--compile", "on" if compile_on else "off"], unsloth_env, drop),
    ]
    if not args.no_behavior and importlib.util.find_spec("probes.behavior.__main__") is not None:
        steps.append(("behavior", "probes.behavior",
                      ["--device", device, "--compile", "on" if compile_on else "off", "--phase", "all"],
                      unsloth_env, drop))
    hung = None
    for name, module, extra, env_extra, drop_env in steps:
        if hung is not None:
            # A step that hung would hang again: keep the cell within its time budget.
            report["steps"].append({"name": name, "status": "skipped", "seconds": 0.0, "returncode": None,
                                    "reason": f"not run: {hung} timed out", "result": None})
            continue
        step = run_step(name, module, extra, env_extra, drop_env, args.step_timeout, workdir)
        report["steps"].append(step)
        if step["status"] == "timeout":
            hung = name
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
