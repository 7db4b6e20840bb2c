"""Runtime confirmation of the scan (``--confirm``): build a few releases for real and run the kernel.

Which releases: both sides of every boundary of the zoo timeline (the last
vulnerable and the first fixed release, for each change), plus the releases
the static detector left ``unknown`` (newest first, at most ``max_unknown``).
Each is installed into a fresh env with uv (``unsloth_zoo==V``, and unsloth
with that zoo forced by an override, because zoo refuses to import when
unsloth cannot be found; nothing imports unsloth), the runtime detector its
scan target names (``module:function``, called with ``"cpu"``) runs there in a
process of its own (through ``matrix.envs.envrun``: ``probes`` on PYTHONPATH,
offline, ``UNSLOTH_IS_PRESENT=1 UNSLOTH_ALLOW_CPU=1``, in a scratch
directory), and the env is deleted.

Per release the scan records ``confirmed_by``: ``runtime`` when the runtime
verdict agrees with the static one (or decides a static ``unknown``),
``static-only`` otherwise. A runtime verdict that contradicts a static
``vulnerable``/``fixed``/``absent`` makes the release ``inconsistent``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.envs import envrun
from matrix.scan.policy import boundaries, considered
from probes.phases import RAW_ENV  # zoo without unsloth and without a GPU, as a cell's raw process

PYTHON = "3.11"
INSTALL_TIMEOUT_S = 1200
RUN_TIMEOUT_S = 600


def runtime_code(runtime: str) -> str:
    """The one-liner that runs a ``module:function`` runtime detector and prints its JSON."""
    module, _, function = runtime.partition(":")
    return f"import json; from {module} import {function}; print(json.dumps({function}('cpu')))"

RUNTIME_VERDICTS = ("vulnerable", "fixed", "absent")


@dataclass(frozen=True)
class RuntimeVerdict:
    """What the runtime detector said about one release (``verdict`` ``error`` when it could not run)."""

    version: str
    verdict: str  # vulnerable | fixed | absent | error
    reason: str
    seconds: float
    torch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "seconds": round(self.seconds, 1),
                "torch": self.torch}


def pick(zoo: list[dict[str, Any]], include_yanked: bool, max_unknown: int) -> list[tuple[str, str]]:
    """``(version, why)`` of the releases to confirm, ascending."""
    picks = dict.fromkeys(boundaries(zoo, include_yanked), "boundary")
    unknown = [z["version"] for z in considered(zoo, include_yanked) if z["verdict"] == "unknown"]
    for v in list(reversed(unknown))[:max(0, max_unknown)]:
        picks.setdefault(v, "static verdict unknown")
    order = {z["version"]: i for i, z in enumerate(considered(zoo, include_yanked))}
    return sorted(picks.items(), key=lambda kv: order[kv[0]])


def run_runtime(version: str, workdir: Path, *, runtime: str, python: str = PYTHON) -> RuntimeVerdict:
    """Install zoo ``version`` into a fresh env under ``workdir``, run the runtime detector ``runtime``
    (``module:function``), delete the env."""
    t0 = time.monotonic()
    try:
        with envrun.throwaway(workdir, f"confirm-{version}-", python, ["unsloth", f"unsloth_zoo=={version}"],
                              [f"unsloth_zoo=={version}"], INSTALL_TIMEOUT_S) as env:
            ran = envrun.run([str(env.python), "-c", runtime_code(runtime)], cwd=env.scratch, timeout=RUN_TIMEOUT_S,
                             env=envrun.clean_env(envrun.probes_path(env.root), **RAW_ENV))
    except envrun.ThrowawayError as exc:
        return RuntimeVerdict(version, "error", str(exc), time.monotonic() - t0)
    if ran.returncode is None:
        return RuntimeVerdict(version, "error", f"the runtime detector timed out after {RUN_TIMEOUT_S} s",
                              time.monotonic() - t0)
    lines = ran.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if ran.returncode == 0 and lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict) or out.get("verdict") not in RUNTIME_VERDICTS:
        return RuntimeVerdict(version, "error", f"the runtime detector failed (exit {ran.returncode}): "
                              f"{ran.tail(5)}", time.monotonic() - t0)
    return RuntimeVerdict(version, out["verdict"], str(out.get("reason", "")), time.monotonic() - t0,
                          out.get("torch_version"))


def merge(row: dict[str, Any], rt: RuntimeVerdict) -> dict[str, Any]:
    """The release row after confirmation (see the module docstring)."""
    static = row["verdict"]
    out = {**row, "runtime": rt.to_dict(), "static_verdict": static}
    if rt.verdict == "error":
        return {**out, "confirmed_by": "static-only"}
    if static == "unknown":
        return {**out, "verdict": rt.verdict, "confirmed_by": "runtime",
                "reason": f"static: {row['reason']}; runtime: {rt.reason}"}
    if static == rt.verdict:
        return {**out, "confirmed_by": "runtime"}
    return {**out, "verdict": "inconsistent", "confirmed_by": "runtime",
            "reason": f"INCONSISTENT: static says {static} ({row['reason']}); runtime says {rt.verdict} ({rt.reason})"}


def confirm(zoo: list[dict[str, Any]], *, include_yanked: bool, max_unknown: int, workdir: Path,
            log: Callable[[str], None], runner: Callable[[str, Path], RuntimeVerdict] = run_runtime
            ) -> list[dict[str, Any]]:
    """``zoo`` rows with the picked releases confirmed; ``runner`` is the runtime check (tests may pass theirs)."""
    picked = pick(zoo, include_yanked, max_unknown)
    if not picked:
        log("confirm: nothing to confirm (no boundary and no unknown release)")
        return zoo
    workdir.mkdir(parents=True, exist_ok=True)
    by_version = {z["version"]: z for z in zoo}
    for k, (version, why) in enumerate(picked, 1):
        rt = runner(version, workdir)
        by_version[version] = merge(by_version[version], rt)
        log(f"confirm [{k}/{len(picked)}] unsloth_zoo {version} ({why}): static {by_version[version]['static_verdict']}"
            f", runtime {rt.verdict} -> {by_version[version]['verdict']} ({rt.seconds:.1f} s)")
    return [by_version[z["version"]] for z in zoo]
