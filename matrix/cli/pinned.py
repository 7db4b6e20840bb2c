"""Check what a maintainer has: an existing interpreter, or exactly the pins of a file.

``--python PATH``: probe that interpreter in place. Nothing is installed into
it; the probes run from a PYTHONPATH entry that exposes only ``probes``, in
a working directory of their own.

``-r FILE``: build a fresh env with exactly the pins of a requirements or
lock file (``uv pip install -r``; a file with ``--hash`` options is installed
with ``--require-hashes``), then probe it.

Either way: a one-cell report, a plain-words recommendation, and the gate
exit code (``reports.gate``).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrix import errors
from matrix.cells.cell import CellRun, record_and_probe
from matrix.cells.installed import installed
from matrix.envs import envrun, recipe
from matrix.envs.envrun import ensure_env
from matrix.errors import SkewmatrixError
from matrix.spec import CellOptions


class PinnedError(SkewmatrixError):
    """The interpreter or requirements file given to `pinned` cannot be used."""


def interpreter_prefix(python: Path) -> tuple[Path, str]:
    if not python.exists():
        raise PinnedError(f"--python {python}: no such file")
    res = envrun.run_python(python, "import sys, json; print(json.dumps([sys.prefix, '%d.%d' % "
                            "sys.version_info[:2]]))", timeout=60)
    if not res.ok:
        raise PinnedError(f"--python {python}: could not run it (exit {res.returncode}): {res.tail(5)}")
    prefix, version = json.loads(res.stdout.strip().splitlines()[-1])
    return Path(prefix), version


def needs_hashes(req: Path) -> bool:
    text = req.read_text(encoding="utf-8", errors="replace")
    return "--hash" in text or "--require-hashes" in text


def install_pins(req: Path, env_dir: Path, python_version: str, log: Callable[[str], Any]) -> tuple[bool, str]:
    if not req.is_file():
        raise PinnedError(f"-r {req}: no such file")
    shutil.rmtree(env_dir, ignore_errors=True)
    python = ensure_env(env_dir, python_version)
    how = recipe.Recipe(python=python_version, requirements=("-r", str(req)), require_hashes=needs_hashes(req))
    if how.require_hashes:
        log(f"{req}: hashes present, installing with --require-hashes")
    res = recipe.apply(how, python, env_dir, timeout=3600)
    return res.ok, (res.stderr.strip()[-3000:] if not res.ok else "")


def pinned_builds(env_dir: Path, label: str) -> dict[str, dict[str, Any]]:
    found = {d["name"].lower().replace("_", "-"): d for d in installed(env_dir, index=_NoIndex())}
    builds = {}
    for role, pkg in (("unsloth", "unsloth"), ("zoo", "unsloth-zoo")):
        d = found.get(pkg)
        version = d["version"] if d else None
        builds[role] = {"name": f"{role}-{version or 'absent'}", "package": pkg, "source": "pinned",
                        "describe": f"installed {version or '(not installed)'} in {label}", "version": version}
    return builds


class _NoIndex:
    """installed() without index lookups: pinned builds are identified by their installed tree."""

    def files(self, project: str) -> list:
        return []


def run_pinned(python: Path | None, requirements: Path | None, out: Path, *, options: CellOptions,
               log: Callable[[str], Any] = print) -> dict[str, Any]:
    if (python is None) == (requirements is None):
        raise PinnedError("pinned: give exactly one of --python PATH or -r FILE")
    if python is not None:
        env_dir, version = interpreter_prefix(python)
        label = str(python)
    else:
        assert requirements is not None
        env_dir = out / "pinned-env"
        label = str(requirements)
        ok, message = install_pins(requirements, env_dir, options.python, log)
        python = env_dir / "bin" / "python"
        version = options.python
        if not ok:
            run = CellRun("pinned__requirements", pinned_builds(env_dir, label), options, f"pinned: {label}", out)
            run.fail("build", f"uv pip install -r {requirements} failed:\n{message}")
            return run.finish()
    builds = pinned_builds(env_dir, label)
    cell_id = f"pinned-{builds['unsloth']['version'] or 'none'}__{builds['zoo']['version'] or 'none'}"
    opts = CellOptions(**{**options.__dict__, "python": version})
    run = CellRun(cell_id, builds, opts, f"pinned: {label}", out)
    if builds["zoo"]["version"] is None or builds["unsloth"]["version"] is None:
        missing = [b["package"] for b in builds.values() if b["version"] is None]
        run.fail("probe", f"{label}: {', '.join(missing)} not installed in {env_dir}")
        return run.finish()
    from matrix.scan.history import structural_line

    log(structural_line(env_dir))  # the structural verdict first, before any hazard
    log(f"probing {label} in place (installing nothing)")
    return record_and_probe(run, env_dir, python, log)


def run(args: argparse.Namespace, out: Path, *, strict: bool = False, log: Callable[[str], Any] = print) -> int:
    """Probe what the parsed arguments name (``matrix.cli.arguments.add_pinned_arguments``); exit 0/1/2
    (``matrix.errors``)."""
    from matrix.cells.collect import fixed_since_zoo
    from reports.gate import evaluate, recommendation
    from reports.model import build_report
    from reports.render import RENDERERS, write_all

    options = CellOptions(device=args.device, cpu_mode=args.cpu_mode)
    cell = run_pinned(args.python, args.requirements, out, options=options, log=log)
    report = build_report([cell], matrix=cell["matrix"], strict=strict)
    out.mkdir(parents=True, exist_ok=True)
    write_all(report, out)
    log(RENDERERS["terminal"].render(report))
    log(recommendation(report["cells"][0], report["checks"], *fixed_since_zoo(out)))
    code = errors.gate_code(evaluate(report))
    log(f"pinned: exit {code} ({errors.gate_words(code)})")
    return code
