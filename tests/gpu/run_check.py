"""The GPU device check: every case of ``tests/gpu/cases.py`` on an existing CUDA Python, installing nothing into it.

For each case (zoo 2026.9.3, zoo 2026.10.9, our guard on zoo 2026.9.3) the
runner installs the case's wheels from the offline wheelhouse
(``tests/gpu/build_wheelhouse.py``) with ``pip install --no-deps --no-index
--target`` into a scratch folder, and makes a two-line interpreter wrapper
that puts that folder on ``PYTHONPATH`` in front of the machine's own
site-packages (torch, transformers, peft, accelerate come from there). The
guard case's unsloth wheel is rebuilt here from the wheelhouse's base wheel
with the harness's backport builder and compared with the digest the
wheelhouse recorded (a difference is recorded, not refused: the guard
under test is the one in the tree that runs). Then, all cases at once (16
cores, one GPU, tiny tensors):

* per compile mode, the harness's own cell step (``matrix.cell.record_and_probe``,
  as ``nox -s pinned --python`` does): ``python -m probes --device cuda
  --compile on|off`` in a working directory of the cell's own;
* per case, ``tests/gpu/measure.py`` for both compile modes: loss, each
  gradient, weights after an optimizer step, GradScaler, per dtype.

Each (case, compile mode) becomes one cell JSON (``reports/cell.schema.json``)
under ``OUT/cells/<id>/`` whose ``gpu`` key holds the measurement, so
``SKEWMATRIX_MATRIX=tests/gpu/matrix.toml nox -s report -- CPU_DIR OUT``
renders the GPU rows next to the CPU ones. ``OUT/gpu-summary.md`` is the
table for ``reports/gpu/README.md``.

Without a CUDA device (or with ``--dry-run``) it is a dry run: the wheels
are installed and ``import unsloth`` runs in each case (that proves the
wheelhouse complete for this interpreter), every measurement is
``n/a: no CUDA device``, and the cells carry that as their reason instead of
probe results; ``gpu.cpu_check`` then holds the same measurement run on CPU
(compile off), the dry run's evidence that the measurement code works. Exit
0 when every cell was written, 2 when the check itself could not run
(wheelhouse missing or wrong, no interpreter).

    python3 -m tests.gpu.run_check --wheelhouse build/gpu-wheelhouse --out out-gpu
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from matrix import envrun
from matrix.cell import CellRun, record_and_probe, write_json_atomic
from matrix.installed import read_dist, torch_build
from tests.gpu.build_wheelhouse import MANIFEST, SCHEMA, build_guard, record_digest, sha256_file
from tests.gpu.cases import CASES, COMPILE_MODES, DTYPES, Case, case

REPO_ROOT = Path(__file__).resolve().parents[2]
MEASURE = Path(__file__).resolve().parent / "measure.py"
MATRIX_FILE = Path(__file__).resolve().parent / "matrix.toml"
MATRIX_LABEL = "tests/gpu/matrix.toml"
NO_CUDA = "n/a: no CUDA device"
# Distributions of the machine's own Python that a cell records next to the case's wheels.
BASE_DISTS = ("torch", "transformers", "peft", "accelerate", "triton", "tokenizers", "safetensors", "numpy",
              "huggingface-hub", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13")


class NoIndex:
    """``installed()`` without index lookups: the GPU machine has no network; wheels are named by file."""

    def files(self, project: str) -> list[Any]:
        return []


class CheckError(Exception):
    """The check cannot run at all (as opposed to a cell that records a failure)."""


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
    res = subprocess.run([str(python), "-c", INSPECT], capture_output=True, text=True, timeout=300, check=False)
    if res.returncode != 0:
        raise CheckError(f"--python {python}: could not inspect it (exit {res.returncode}): "
                         f"{res.stderr.strip()[-800:]}")
    info = json.loads(res.stdout.strip().splitlines()[-1])
    if info["torch"] is None:
        raise CheckError(f"--python {python}: torch does not import there ({info.get('torch_error')}); "
                         "the check runs on a Python that already has torch")
    return Interpreter(python, info["version"], frozenset(info["tags"]), Path(info["purelib"]), info["cuda"],
                       info["device_name"], info["torch"])


def load_wheelhouse(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.is_file():
        raise CheckError(f"{path}: no wheelhouse manifest; build it where the index is reachable with "
                         "`python -m tests.gpu.build_wheelhouse --out {root}`")
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("schema") != SCHEMA:
        raise CheckError(f"{path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}; rebuild the wheelhouse")
    bad = []
    for w in doc["wheels"]:
        f = root / w["file"]
        if not f.is_file():
            bad.append(f"{w['file']}: missing")
        elif sha256_file(f) != w["sha256"]:
            bad.append(f"{w['file']}: sha256 differs from the manifest")
    if bad:
        raise CheckError(f"{root}: the wheelhouse does not match {MANIFEST}:\n  " + "\n  ".join(bad))
    return doc


def pick_wheels(doc: dict[str, Any], root: Path, c: Case, tags: frozenset[str]) -> list[dict[str, Any]]:
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
        raise CheckError(f"{root}: no wheel for this interpreter for {', '.join(missing)} (case {c.name}); "
                         f"the wheelhouse serves Python {', '.join(doc.get('pythons', []))}")
    return chosen


def installer(python: Path) -> list[str]:
    """``python -m pip install`` where that Python has pip (the GPU image), else uv's pip (a uv-made env)."""
    probe = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, check=False)
    if probe.returncode == 0:
        return [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    uv = shutil.which("uv")
    if uv is None:
        raise CheckError(f"{python} has no pip and no `uv` is on PATH: nothing can install the wheels")
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


def prepare(c: Case, interp: Interpreter, doc: dict[str, Any], wheelhouse: Path, scratch_root: Path) -> Scratch:
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
        wheel = build_guard(wheelhouse / guard["base_file"], root / "guard-wheel")
        # Built from the backport folder of the tree that runs: a guard edited after the wheelhouse was built
        # is still the guard under test, and the cell says so (same_as_wheelhouse false) instead of refusing.
        built = record_digest(wheel)
        guard_info = {"backport": guard["backport"], "record_sha256": built,
                      "wheelhouse_record_sha256": guard["record_sha256"],
                      "same_as_wheelhouse": built == guard["record_sha256"]}
        files.insert(0, wheel)
        unsloth_digest = sha256_file(wheel)
    argv = [*installer(interp.python), "--no-deps", "--no-index", "--target", str(site), *map(str, files)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if res.returncode != 0:
        raise CheckError(f"case {c.name}: installing its wheels failed (exit {res.returncode}):\n"
                         f"{(res.stderr or res.stdout).strip()[-2000:]}")
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    # The case's interpreter: the machine's Python with the case's wheels first on the path; children
    # started through sys.executable inherit PYTHONPATH, so every probe process sees the same packages.
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{interp.python}" "$@"\n',
                      encoding="utf-8")
    python.chmod(0o755)
    return Scratch(root, site, python, tuple(chosen), unsloth_digest, guard_info)


def declared_cell(cell_id: str) -> Any:
    """The cell as tests/gpu/matrix.toml declares it (device, compile mode, expected states)."""
    from matrix import spec

    matrix = spec.load(MATRIX_FILE, check_index=False)
    try:
        return matrix.cell(cell_id)
    except spec.SpecError as exc:
        raise CheckError(f"{MATRIX_LABEL}: {exc}; declare every GPU cell there so reports can merge it") from exc


def builds(c: Case, mode: str, s: Scratch | None) -> dict[str, dict[str, Any]]:
    zoo = next((w for w in (s.wheels if s else ()) if w["project"].replace("_", "-").lower() == "unsloth-zoo"), {})
    if c.guard:
        u = {"source": "backport", "describe": "backport unsloth-guard on pypi 2026.10.9 (rebuilt from the offline "
                                                 "GPU wheelhouse's base wheel)"}
    else:
        u = {"source": "pypi", "describe": "pypi 2026.10.9 (wheel from the offline GPU wheelhouse)"}
    return {
        "unsloth": {"name": c.unsloth_row(mode), "package": "unsloth", "version": "2026.10.9",
                    "digest": s.unsloth_digest if s else None, **u},
        "zoo": {"name": c.zoo_build, "package": "unsloth-zoo", "source": "pypi", "version": c.zoo_version,
                "describe": f"pypi {c.zoo_version} (wheel from the offline GPU wheelhouse)",
                "digest": zoo.get("sha256")},
    }


def base_dists(interp: Interpreter) -> list[dict[str, Any]]:
    """The machine's own distributions a cell depends on (torch above all), read from its dist-info."""
    found = []
    for d in sorted(interp.purelib.glob("*.dist-info")):
        name = d.name.split("-", 1)[0].replace("_", "-").lower()
        if name in BASE_DISTS and (d / "METADATA").is_file():
            found.append({**read_dist(d), "location": "interpreter"})
    return found


def run_measure(c: Case, s: Scratch, out: Path, dry: bool, timeout: float) -> dict[str, Any]:
    """tests/gpu/measure.py for both compile modes in one process (one import of unsloth)."""
    work = out / "gpu-work" / c.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # Dry: import unsloth on a host without a GPU (DESIGN.md section 7).
    env = envrun.clean_env(envrun.probes_path(work), **({"UNSLOTH_ALLOW_CPU": "1"} if dry else {}))
    result = work / "measure.json"
    argv = [str(s.python), str(MEASURE), "--out", str(result), "--device", "cuda", "--compile",
            ",".join(COMPILE_MODES), *(["--cpu-check"] if dry else [])]
    start = time.perf_counter()
    rc = envrun.run(argv, cwd=work, env=env, timeout=timeout, log=work / "measure.log").returncode
    doc = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else None
    status = "ok" if rc == 0 and doc is not None else ("timeout" if rc is None else "error")
    tail = "\n".join((work / "measure.log").read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
    return {"status": status, "returncode": rc, "seconds": round(time.perf_counter() - start, 3),
            "result": doc, "log_tail": tail if status != "ok" else ""}


def gpu_section(c: Case, mode: str, measured: dict[str, Any], interp: Interpreter, dry: bool,
                doc: dict[str, Any], s: Scratch) -> dict[str, Any]:
    result = measured.get("result") or {}
    return {
        "schema": "skewmatrix.gpu-cell/1",
        "case": c.name,
        "compile": mode,
        "dry_run": dry,
        "reason": NO_CUDA if dry else None,
        "interpreter": {"python": str(interp.python), "version": interp.version, "torch": interp.torch,
                        "cuda": interp.cuda, "device_name": interp.device_name},
        "wheelhouse": {"total_bytes": doc["total_bytes"], "pins": [f"{p}=={v}" for p, v in c.pins()],
                       "guard_wheel": s.guard},
        "measure": {k: v for k, v in measured.items() if k != "result"},
        "import_unsloth": result.get("import_unsloth"),
        "guard_module": result.get("guard_module"),
        "versions": result.get("versions"),
        "settings": result.get("settings"),
        "mode": (result.get("modes") or {}).get(mode),
        # Dry run only: the measurement run on CPU (compile off) to show the code works; not a GPU result.
        "cpu_check": result.get("cpu_check"),
    }


def finish_cell(run: CellRun, c: Case, mode: str, s: Scratch, interp: Interpreter, measured: dict[str, Any],
                dry: bool, doc: dict[str, Any]) -> dict[str, Any]:
    record = run.record
    base = base_dists(interp)
    names = {d["name"].lower() for d in record["installed"]}
    record["installed"] = record["installed"] + [d for d in base if d["name"].lower() not in names]
    record["torch"] = torch_build(record["installed"])
    record["gpu"] = gpu_section(c, mode, measured, interp, dry, doc, s)
    write_json_atomic(run.dir / "cell.json", record)
    return record


def run_case(c: Case, interp: Interpreter, doc: dict[str, Any], wheelhouse: Path, out: Path, scratch_root: Path,
             dry: bool, probe_timeout: int, measure_timeout: float, log: Any) -> list[dict[str, Any]]:
    from matrix.installed import installed

    say = lambda msg: log(f"[{c.name}] {msg}")  # noqa: E731

    def new_runs(s: Scratch | None) -> dict[str, CellRun]:
        runs = {}
        for m in COMPILE_MODES:
            declared = declared_cell(c.cell_id(m))
            opts = replace(declared.options, python=interp.version, timeout=probe_timeout)
            runs[m] = CellRun(c.cell_id(m), builds(c, m, s), opts, MATRIX_LABEL, out)
            # The matrix file's expected states travel with the cell, as for a cell that `nox -s matrix` ran.
            runs[m].record["expect"] = declared.expect_map
        return runs

    start = time.perf_counter()
    try:
        s = prepare(c, interp, doc, wheelhouse, scratch_root)
    except CheckError as exc:  # this case's cells say why; the other cases still run
        say(f"not installed: {exc}")
        cells = []
        for m, run in new_runs(None).items():
            run.fail("build", str(exc))
            record = run.finish()
            record["gpu"] = {"schema": "skewmatrix.gpu-cell/1", "case": c.name, "compile": m, "dry_run": dry,
                             "reason": f"not installed: {str(exc).splitlines()[0]}", "mode": None}
            write_json_atomic(run.dir / "cell.json", record)
            cells.append(record)
        return cells
    say(f"wheels installed in {time.perf_counter() - start:.1f} s ({s.site})")
    runs = new_runs(s)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1 + len(COMPILE_MODES)) as pool:
        measure = pool.submit(run_measure, c, s, out, dry, measure_timeout)
        probes = {}
        for m, run in runs.items():
            run.dir.mkdir(parents=True, exist_ok=True)
            if dry:
                run.record["installed"] = installed(s.root, index=NoIndex())  # type: ignore[arg-type]
                run.step("record", 0.0, True)
                run.fail("probe", f"{NO_CUDA}: the probes were not run with --device cuda on this host "
                                  "(dry run: wheels installed, import unsloth checked)")
                probes[m] = None
            else:
                probes[m] = pool.submit(record_and_probe, run, s.root, s.python, say)
        measured = measure.result()
        for f in probes.values():
            if f is not None:
                f.result()
    say(f"measured ({measured['status']}) in {measured['seconds']:.1f} s")
    cells = []
    for m, run in runs.items():
        if dry:
            run.finish()
        if measured["status"] != "ok" and not dry and run.record["error"] is None:
            run.record["steps"].append({"name": "gpu-measure", "seconds": measured["seconds"], "ok": False})
        cells.append(finish_cell(run, c, m, s, interp, measured, dry, doc))
    return cells


def mark(flag: bool | None) -> str:
    return "n/a" if flag is None else ("**non-finite**" if flag else "finite")


def summary_table(cells: list[dict[str, Any]]) -> str:
    """The Markdown table for reports/gpu/README.md: what went non-finite, per case, compile mode and dtype."""
    lines = ["| case | compile | dtype | loss (all-masked) | gradients | weights after AdamW | GradScaler |",
             "|---|---|---|---|---|---|---|"]
    for cell in cells:
        gpu = cell["gpu"]
        mode = gpu.get("mode") or {}
        for dtype in DTYPES:
            rows = [e for e in mode.get("entries", []) if e["dtype"] == dtype]
            ok = [e for e in rows if e.get("status") == "ok"]
            if not ok:
                reasons = sorted({e.get("reason") or e.get("status", "?") for e in rows}) or [gpu.get("reason") or "?"]
                lines.append(f"| {gpu['case']} | {gpu['compile']} | {dtype} | {reasons[0]} | - | - | - |")
                continue
            masked = [e for e in ok if e["batch"].startswith("all_masked")]
            adamw = [e for e in masked if e["optimizer"] == "adamw"]
            loss_bad = any(not e["loss"]["finite"] for e in masked)
            grads_bad = any(not g.get("finite", True) for e in masked for g in e["grads"].values())
            w_bad = any(not w["finite"] for e in adamw for w in e["weights_after_step"].values())
            moved = any(w["changed"] for e in adamw for w in e["weights_after_step"].values())
            scaled = [e for e in masked if e.get("scaler")]
            scaler = ("skipped" if any(e["scaler"]["skipped_step"] for e in scaled) else "stepped") if scaled else "-"
            errors = len(rows) - len(ok) - sum(1 for e in rows if e.get("status") == "n/a")
            note = f" ({errors} error)" if errors else ""
            lines.append(f"| {gpu['case']} | {gpu['compile']} | {dtype} | {mark(loss_bad)}{note} | {mark(grads_bad)} | "
                         f"{mark(w_bad)}{', moved' if moved else ''} | {scaler} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, log: Any = print) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.gpu.run_check", description=__doc__.splitlines()[0])
    ap.add_argument("--wheelhouse", type=Path, default=REPO_ROOT / "build" / "gpu-wheelhouse")
    ap.add_argument("--out", type=Path, required=True, help="output folder (cells/<id>/cell.json, gpu-summary.md)")
    ap.add_argument("--python", type=Path, default=Path(sys.executable),
                    help="the CUDA Python to run in (default: this one); nothing is installed into it")
    ap.add_argument("--scratch", type=Path, default=None, help="where the cases' wheels go (default OUT/scratch)")
    ap.add_argument("--cases", default=",".join(c.name for c in CASES), help="comma-separated case names")
    ap.add_argument("--dry-run", action="store_true", help="no GPU work even where CUDA is available")
    ap.add_argument("--probe-timeout", type=int, default=200, help="seconds per probe process (raw, unsloth)")
    ap.add_argument("--measure-timeout", type=float, default=300.0, help="seconds for a case's measurement")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    # Up to nine processes compile at once on the GPU machine's 16 cores: keep inductor's worker pools from
    # multiplying past them (a parallelism knob; it changes no kernel). Every child inherits it.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
    try:
        chosen = [case(n.strip()) for n in args.cases.split(",") if n.strip()]
        interp = inspect_python(args.python)
        doc = load_wheelhouse(args.wheelhouse)
        dry = args.dry_run or not interp.cuda
        log(f"gpu check: Python {interp.version} at {interp.python}, torch {interp.torch}, "
            f"{interp.device_name or 'no CUDA device'}{' -- DRY RUN' if dry else ''}; "
            f"{len(chosen)} case(s) x compile {'/'.join(COMPILE_MODES)}")
        args.out.mkdir(parents=True, exist_ok=True)
        scratch = args.scratch or args.out / "scratch"
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(chosen)) as pool:
            futures = [pool.submit(run_case, c, interp, doc, args.wheelhouse, args.out, scratch, dry,
                                   args.probe_timeout, args.measure_timeout, log) for c in chosen]
            cells = [cell for f in futures for cell in f.result()]
    except (CheckError, KeyError) as exc:
        log(f"gpu check: {exc}")
        return 2
    table = summary_table(cells)
    meta = {"host": platform.node(), "device_name": interp.device_name, "python": interp.version,
            "torch": interp.torch, "dry_run": dry, "seconds": round(time.perf_counter() - started, 1),
            "cells": [c["cell_id"] for c in cells]}
    (args.out / "gpu-summary.md").write_text(
        f"GPU check on {interp.device_name or 'a host without CUDA (dry run)'}, torch {interp.torch}, "
        f"Python {interp.version}; {meta['seconds']} s.\n\n{table}", encoding="utf-8")
    write_json_atomic(args.out / "gpu-run.json", meta)
    log(table)
    for c in cells:
        err = c.get("error")
        log(f"{c['cell_id']}: {'error: ' + err['message'].splitlines()[0] if err else 'probed'}")
    log(f"gpu check: {len(cells)} cell(s) in {args.out / 'cells'} ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
