"""The GPU machine's Python as the check finds it, and each case's wheels installed next to it.

``inspect_python`` asks the interpreter for its version, wheel tags, site
directory, torch and CUDA device (torch must import: the check runs on a
Python that already has it). ``prepare`` installs one case's wheels with
``pip install --no-deps --no-index --target`` into a scratch folder (an
offline ``matrix.envs.recipe.Recipe``; the guard case's unsloth wheel
rebuilt here from the wheelhouse's base wheel by the harness's backport
builder) and writes a two-line interpreter wrapper
that puts that folder on ``PYTHONPATH`` in front of the machine's own
site-packages; nothing is installed into the machine's Python.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.envs import envrun
from matrix.envs.recipe import Recipe, apply
from matrix.gpu import GpuCheckError
from matrix.gpu.wheelhouse import build_guard, guard_build, pick_wheels, record_digest, sha256_file
from probes.checks import GpuCase, GpuMeasure


@dataclass(frozen=True)
class Interpreter:
    """The machine's Python as the runner found it."""

    python: Path
    version: str  # "3.12"
    tags: frozenset[str]
    purelib: Path
    cuda: bool
    device_name: str | None
    torch: str | None


INSPECT = r"""
import json, sys, sysconfig
from packaging.tags import sys_tags
info = {"version": "%d.%d" % sys.version_info[:2], "tags": [str(t) for t in sys_tags()],
        "purelib": sysconfig.get_paths()["purelib"], "cuda": False, "device_name": None, "torch": None}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = bool(torch.cuda.is_available())
    info["device_name"] = torch.cuda.get_device_name(0) if info["cuda"] else None
except Exception as exc:
    info["torch_error"] = repr(exc)
print(json.dumps(info))
"""


def inspect_python(python: Path) -> Interpreter:
    res = envrun.run_python(python, INSPECT, timeout=300)
    if not res.ok:
        raise GpuCheckError(f"--python {python}: could not inspect it (exit {res.returncode}): "
                         f"{res.stderr.strip()[-800:]}")
    info = json.loads(res.stdout.strip().splitlines()[-1])
    if info["torch"] is None:
        raise GpuCheckError(f"--python {python}: torch does not import there ({info.get('torch_error')}); "
                         "the check runs on a Python that already has torch")
    return Interpreter(python, info["version"], frozenset(info["tags"]), Path(info["purelib"]), info["cuda"],
                       info["device_name"], info["torch"])


def installer(python: Path) -> list[str]:
    """``python -m pip install`` where that Python has pip (the GPU image), else uv's pip (a uv-made env)."""
    probe = envrun.run_python(python, "import pip", timeout=120)
    if probe.ok:
        return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    uv = shutil.which("uv")
    if uv is None:
        raise GpuCheckError(f"{python} has no pip and no `uv` is on PATH: nothing can install the wheels")
    return [uv, "pip", "install", "--quiet", "--python", str(python)]


@dataclass(frozen=True)
class Scratch:
    """A case's installed wheels: ``root/lib/pythonX.Y/site-packages`` and the wrapper ``root/bin/python``."""

    root: Path
    site: Path
    python: Path
    wheels: tuple[dict[str, Any], ...]
    unsloth_digest: str
    guard: dict[str, Any] | None  # the rebuilt guard wheel's digests (guard case only)


def prepare(m: GpuMeasure, c: GpuCase, interp: Interpreter, doc: dict[str, Any], wheelhouse: Path,
            scratch_root: Path) -> Scratch:
    """Install ``c``'s wheels into ``scratch_root/<case>`` and write its interpreter wrapper."""
    root = scratch_root / c.name
    shutil.rmtree(root, ignore_errors=True)
    site = root / "lib" / f"python{interp.version}" / "site-packages"
    site.mkdir(parents=True)
    chosen = pick_wheels(doc, wheelhouse, c, interp.tags)
    files = [wheelhouse / w["file"] for w in chosen]
    guard_info: dict[str, Any] | None = None
    unsloth_digest = next((w["sha256"] for w in chosen if w["project"] == "unsloth"), "")
    if c.guard:
        guard = doc["guard"]
        wheel = build_guard(wheelhouse / guard["base_file"], root / "guard-wheel", guard["backport"], guard_build(m))
        # Built from the backport folder of the tree that runs: a guard edited after the wheelhouse was built
        # is still the guard under test, and the cell says so (same_as_wheelhouse false) instead of refusing.
        built = record_digest(wheel)
        guard_info = {"backport": guard["backport"], "record_sha256": built,
                      "wheelhouse_record_sha256": guard["record_sha256"],
                      "same_as_wheelhouse": built == guard["record_sha256"]}
        files.insert(0, wheel)
        unsloth_digest = sha256_file(wheel)
    how = Recipe(python=interp.version, requirements=tuple(map(str, files)), offline=True, no_deps=True)
    res = apply(how, interp.python, root, 600, installer=installer(interp.python), target=site,
                env=envrun.clean_env(None))
    if not res.ok:
        raise GpuCheckError(f"case {c.name}: installing its wheels failed (exit {res.returncode}):\n"
                         f"{(res.stderr or res.stdout).strip()[-2000:]}")
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    # The case's interpreter: the machine's Python with the case's wheels first on the path; children
    # started through sys.executable inherit PYTHONPATH, so every probe process sees the same packages.
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{interp.python}" "$@"\n',
                      encoding="utf-8")
    python.chmod(0o755)
    return Scratch(root, site, python, tuple(chosen), unsloth_digest, guard_info)
