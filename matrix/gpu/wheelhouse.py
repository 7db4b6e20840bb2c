"""The offline wheelhouse of the GPU check: built here, where the package index is reachable; read there.

The GPU machine has no network; its Python has torch, transformers, peft and
accelerate but not unsloth, unsloth_zoo, trl or the few packages
``import unsloth`` needs beyond them (the check's ``gpu.py`` says which and
why the large optional ones stay out). ``build`` downloads exactly the
pinned wheels of every case with ``pip download --no-deps --only-binary``
for each interpreter the measurement serves (3.12: the GPU image; 3.11: the
CPU dry run), builds the guard backport wheel the measurement names with the
harness's own backport builder (``matrix/sources/backport_build.py``: base wheel +
``matrix/backports/<backport>``) to record the digest of its RECORD (the
runner rebuilds it there from the base wheel, since both wheels would not
fit), and writes ``wheelhouse.json``: every file with its project, version,
tags, size and sha256, so the runner installs by exact file and a wrong or
missing wheel is named before anything runs (``load_wheelhouse``,
``pick_wheels``).

    skewmatrix gpu-wheelhouse [--check ID] [--out build/gpu-wheelhouse] [--python 3.11 --python 3.12]

The default output folder is git-ignored (``build/``); name it in the device
tool's ``carry``. The whole tree that travels must stay under 64 MiB, so the
build refuses to finish above ``--max-mib`` (default 48).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name, parse_wheel_filename

from matrix.errors import command_parser, parse
from matrix.gpu import GpuCheckError, chosen
from matrix.settings import REPO_ROOT
from probes.checks import GpuCase, GpuMeasure

DEFAULT_OUT = REPO_ROOT / "build" / "gpu-wheelhouse"
MANIFEST = "wheelhouse.json"
SCHEMA = "skewmatrix.gpu-wheelhouse/1"
# Wheel platform tags pip may pick for the GPU image (x86-64 glibc); pure wheels match any of them.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")


class WheelhouseError(GpuCheckError):
    """The wheelhouse could not be built or does not hold what the cases need."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip_command() -> list[str]:
    """``python -m pip`` when this interpreter has pip; else pip run by uv (fetched from the same index)."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=False)
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip"]
    uv = shutil.which("uv")
    if uv is None:
        raise WheelhouseError(f"{sys.executable} has no pip and no `uv` is on PATH: install either to download wheels")
    return [uv, "tool", "run", "--from", "pip", "pip"]


def download(pins: list[tuple[str, str]], python: str, dest: Path) -> None:
    major, minor = python.split(".")
    argv = [*pip_command(), "download", "--quiet", "--no-deps", "--only-binary=:all:", "--python-version", python,
            "--implementation", "cp", "--abi", f"cp{major}{minor}", "--abi", "abi3", "--abi", "none",
            *(a for p in PLATFORMS for a in ("--platform", p)), "--dest", str(dest),
            *(f"{project}=={version}" for project, version in pins)]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise WheelhouseError(f"pip download for Python {python} failed (exit {res.returncode}):\n"
                              f"{(res.stderr or res.stdout).strip()[-3000:]}")


def batches(pins: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Split pins so no project appears twice in one ``pip download`` (pip refuses two versions of one project)."""
    out: list[list[tuple[str, str]]] = []
    for pin in pins:
        target = next((b for b in out if all(canonicalize_name(p) != canonicalize_name(pin[0]) for p, _ in b)), None)
        if target is None:
            out.append(target := [])
        target.append(pin)
    return out


def record_digest(wheel: Path) -> str:
    """sha256 of a wheel's RECORD: the same for two builds of the same content, whatever zlib compressed them."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        return hashlib.sha256(zf.read(name)).hexdigest()


def guard_build(m: GpuMeasure) -> str:
    """The build name of the measurement's guard case (``u<version>-<backport>``)."""
    return next((c.unsloth_build for c in m.cases if c.guard), f"u{m.unsloth_version}-{m.guard_backport}")


def build_guard(base_wheel: Path, dest: Path, backport: str, build_name: str) -> Path:
    """A guard backport on the unsloth base wheel, built by the harness's backport builder.

    The runner calls this on the GPU machine too: the guard wheel is as large
    as its base (unsloth ships its Studio front end), so the wheelhouse
    carries the base wheel and the backport folder, not both wheels.
    """
    from matrix.sources.backport_build import build_backport, load_manifest

    manifest = load_manifest(REPO_ROOT / "matrix" / "backports" / backport)
    with tempfile.TemporaryDirectory(prefix="gpu-guard-") as tmp:
        wheel = build_backport(manifest, base_wheel, sha256_file(base_wheel), Path(tmp), build_name)
        dest.mkdir(parents=True, exist_ok=True)
        target = dest / wheel.name
        shutil.copyfile(wheel, target)
    return target


def describe(path: Path, root: Path) -> dict[str, Any]:
    name, version, _build, tags = parse_wheel_filename(path.name)
    return {"file": path.relative_to(root).as_posix(), "project": str(name), "version": str(version),
            "tags": sorted(str(t) for t in tags), "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def build(out: Path, m: GpuMeasure, check: str, pythons: tuple[str, ...] = (), max_mib: float = 48.0
          ) -> dict[str, Any]:
    """Download every pin of the measurement's cases, check the guard builds, write the manifest."""
    pythons = pythons or m.pythons
    pins = m.all_pins()
    wheels = out / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for python in pythons:
        for batch in batches(pins):
            download(batch, python, wheels)
    files = sorted(wheels.glob("*.whl"))
    wanted = {(canonicalize_name(p), v) for p, v in pins}
    have = {(canonicalize_name(parse_wheel_filename(f.name)[0]), str(parse_wheel_filename(f.name)[1])) for f in files}
    missing = sorted(wanted - have)
    if missing:
        raise WheelhouseError(f"{wheels}: no wheel for {', '.join(f'{p}=={v}' for p, v in missing)}")
    base = next(f for f in files if canonicalize_name(parse_wheel_filename(f.name)[0]) == "unsloth"
                and str(parse_wheel_filename(f.name)[1]) == m.unsloth_version)
    guard_entry = None
    if m.guard_backport is not None:
        with tempfile.TemporaryDirectory(prefix="gpu-guard-check-") as tmp:
            guard = build_guard(base, Path(tmp), m.guard_backport, guard_build(m))
            guard_entry = {"backport": m.guard_backport, "base_file": base.relative_to(out).as_posix(),
                           "base_sha256": sha256_file(base), "record_sha256": record_digest(guard),
                           "built_bytes": guard.stat().st_size}
    entries = [describe(f, out) for f in files]
    total = sum(e["bytes"] for e in entries)
    doc = {"schema": SCHEMA, "check": check, "pythons": list(pythons), "wheels": entries, "guard": guard_entry,
           "total_bytes": total, "pins": [f"{p}=={v}" for p, v in pins]}
    (out / MANIFEST).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if total > max_mib * 2**20:
        raise WheelhouseError(f"{out}: {total / 2**20:.1f} MiB of wheels, over the {max_mib:g} MiB budget "
                              "(the device tree may carry 64 MiB in all)")
    return doc


def table(doc: dict[str, Any]) -> str:
    rows = doc["wheels"]
    width = max(len(r["file"]) for r in rows)
    lines = [f"{r['file']:<{width}}  {r['bytes'] / 2**20:7.2f} MiB" for r in rows]
    lines.append(f"{'total':<{width}}  {doc['total_bytes'] / 2**20:7.2f} MiB")
    guard = doc["guard"]
    if guard:
        lines.append(f"guard backport {guard['backport']}: rebuilt from {guard['base_file']} where it runs "
                     f"({guard['built_bytes'] / 2**20:.2f} MiB, RECORD sha256 {guard['record_sha256'][:12]})")
    return "\n".join(lines)


def load_wheelhouse(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.is_file():
        raise WheelhouseError(f"{path}: no wheelhouse manifest; build it where the index is reachable with "
                         "`skewmatrix gpu-wheelhouse --out {root}`")
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("schema") != SCHEMA:
        raise WheelhouseError(f"{path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}; rebuild the wheelhouse")
    bad = []
    for w in doc["wheels"]:
        f = root / w["file"]
        if not f.is_file():
            bad.append(f"{w['file']}: missing")
        elif sha256_file(f) != w["sha256"]:
            bad.append(f"{w['file']}: sha256 differs from the manifest")
    if bad:
        raise WheelhouseError(f"{root}: the wheelhouse does not match {MANIFEST}:\n  " + "\n  ".join(bad))
    return doc


def pick_wheels(doc: dict[str, Any], root: Path, c: GpuCase, tags: frozenset[str]) -> list[dict[str, Any]]:
    """The wheel of each pin of ``c`` that this interpreter can install (the first by the manifest's order)."""
    chosen, missing = [], []
    for project, version in c.pins():
        name = project.replace("_", "-").lower()
        hits = [w for w in doc["wheels"] if w["project"].replace("_", "-").lower() == name
                and w["version"] == version and tags.intersection(w["tags"])]
        if hits:
            chosen.append(hits[0])
        else:
            missing.append(f"{project}=={version}")
    if missing:
        raise WheelhouseError(f"{root}: no wheel for this interpreter for {', '.join(missing)} (case {c.name}); "
                         f"the wheelhouse serves Python {', '.join(doc.get('pythons', []))}")
    return chosen


def main(argv: list[str]) -> int:
    """``skewmatrix gpu-wheelhouse``: build the wheelhouse (a failure raises; ``matrix.cli.guarded`` maps it)."""
    ap = command_parser("gpu-wheelhouse", prog="skewmatrix gpu-wheelhouse", description=__doc__.splitlines()[0])
    ap.add_argument("--check", default="", metavar="ID", help="the check whose GPU measurement it serves")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"wheelhouse folder (default {DEFAULT_OUT})")
    ap.add_argument("--python", action="append", help="interpreter to serve (repeatable; default all)")
    ap.add_argument("--max-mib", type=float, default=48.0, help="refuse a wheelhouse larger than this")
    args = parse(ap, argv)
    if isinstance(args, int):
        return args
    check, m = chosen(args.check)
    bad = sorted(set(args.python or ()) - set(m.pythons))
    if bad:
        raise WheelhouseError(f"--python {', '.join(bad)}: the measurement serves {', '.join(m.pythons)}")
    doc = build(args.out, m, check, tuple(args.python or m.pythons), args.max_mib)
    print(table(doc))
    print(f"wrote {args.out / MANIFEST}")
    return 0
