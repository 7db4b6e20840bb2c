"""The GPU check's cells: per case and compile mode, the harness's cell step and the check's measurement.

For each case, all at once (16 cores, one GPU, tiny tensors): per compile
mode, the harness's own cell step (``matrix.cells.cell.record_and_probe``, as
``nox -s pinned --python`` does): ``python -m probes --device cuda --compile
on|off`` in a working directory of the cell's own; and once per case, the
check's measurement module for both compile modes in one process (one import
of unsloth), through the one env runner (``matrix.envs.envrun``). Each (case,
compile mode) becomes one cell JSON (``reports/cell.schema.json``) under
``OUT/cells/<id>/`` whose ``gpu`` key holds the measurement, declared as the
measurement's matrix file declares it.

Without a CUDA device (a dry run) the cells carry ``n/a: no CUDA device`` as
their reason instead of probe results; ``gpu.cpu_check`` then holds the same
measurement run on CPU (compile off), the dry run's evidence that the
measurement code works.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from matrix.cells.cell import CellRun, record_and_probe, write_json_atomic
from matrix.cells.installed import read_dist, torch_build
from matrix.envs import envrun
from matrix.gpu import GpuCheckError
from matrix.gpu.interpreter import Interpreter, Scratch, prepare
from matrix.settings import REPO_ROOT
from probes.checks import GpuCase, GpuMeasure

NO_CUDA = "n/a: no CUDA device"
# Distributions of the machine's own Python that a cell records next to the case's wheels.
BASE_DISTS = ("torch", "transformers", "peft", "accelerate", "triton", "tokenizers", "safetensors", "numpy",
              "huggingface-hub", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13")


class NoIndex:
    """``installed()`` without index lookups: the GPU machine has no network; wheels are named by file."""

    def files(self, project: str) -> list[Any]:
        return []


def declared_cell(m: GpuMeasure, cell_id: str) -> Any:
    """The cell as the measurement's matrix file declares it (device, compile mode, expected states)."""
    from matrix import spec

    matrix = spec.load(REPO_ROOT / m.matrix, check_index=False)
    try:
        return matrix.cell(cell_id)
    except spec.SpecError as exc:
        raise GpuCheckError(f"{m.matrix}: {exc}; declare every GPU cell there so reports can merge it") from exc


def builds(m: GpuMeasure, c: GpuCase, mode: str, s: Scratch | None) -> dict[str, dict[str, Any]]:
    zoo = next((w for w in (s.wheels if s else ()) if w["project"].replace("_", "-").lower() == "unsloth-zoo"), {})
    if c.guard:
        u = {"source": "backport", "describe": f"backport {m.guard_backport} on pypi {c.unsloth_version} (rebuilt "
                                                 "from the offline GPU wheelhouse's base wheel)"}
    else:
        u = {"source": "pypi", "describe": f"pypi {c.unsloth_version} (wheel from the offline GPU wheelhouse)"}
    return {
        "unsloth": {"name": c.unsloth_row(mode), "package": "unsloth", "version": c.unsloth_version,
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

# Up to nine processes compile at once on the GPU machine's 16 cores: keep inductor's worker pools from
# multiplying past them (a parallelism knob; it changes no kernel). Set in each child's env, not in ours.
GPU_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "2"}


def run_measure(m: GpuMeasure, c: GpuCase, s: Scratch, out: Path, dry: bool, timeout: float) -> dict[str, Any]:
    """The measurement module for every compile mode in one process (one import of unsloth)."""
    work = out / "gpu-work" / c.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # Dry: import unsloth on a host without a GPU (docs/design.md#measured-facts).
    env = envrun.clean_env(envrun.probes_path(work), **GPU_ENV, **({"UNSLOTH_ALLOW_CPU": "1"} if dry else {}))
    result = work / "measure.json"
    argv = [str(s.python), "-m", m.module, "--out", str(result), "--device", "cuda", "--compile",
            ",".join(m.compile_modes), *(["--cpu-check"] if dry else [])]
    start = time.perf_counter()
    rc = envrun.run(argv, cwd=work, env=env, timeout=timeout, log=work / "measure.log").returncode
    doc = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else None
    status = "ok" if rc == 0 and doc is not None else ("timeout" if rc is None else "error")
    tail = "\n".join((work / "measure.log").read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
    return {"status": status, "returncode": rc, "seconds": round(time.perf_counter() - start, 3),
            "result": doc, "log_tail": tail if status != "ok" else ""}


def gpu_section(c: GpuCase, mode: str, measured: dict[str, Any], interp: Interpreter, dry: bool,
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


def finish_cell(run: CellRun, c: GpuCase, mode: str, s: Scratch, interp: Interpreter, measured: dict[str, Any],
                dry: bool, doc: dict[str, Any]) -> dict[str, Any]:
    record = run.record
    base = base_dists(interp)
    names = {d["name"].lower() for d in record["installed"]}
    record["installed"] = record["installed"] + [d for d in base if d["name"].lower() not in names]
    record["torch"] = torch_build(record["installed"])
    record["gpu"] = gpu_section(c, mode, measured, interp, dry, doc, s)
    write_json_atomic(run.dir / "cell.json", record)
    return record


def run_case(m: GpuMeasure, c: GpuCase, interp: Interpreter, doc: dict[str, Any], wheelhouse: Path, out: Path,
             scratch_root: Path, dry: bool, probe_timeout: int, measure_timeout: float,
             log: Any) -> list[dict[str, Any]]:
    """One case's cells (one per compile mode), written under ``out``; a case that cannot install is error
    cells saying why, and the other cases still run."""
    from matrix.cells.installed import installed

    say = lambda msg: log(f"[{c.name}] {msg}")  # noqa: E731

    def new_runs(s: Scratch | None) -> dict[str, CellRun]:
        runs = {}
        for mode in m.compile_modes:
            declared = declared_cell(m, c.cell_id(mode))
            opts = replace(declared.options, python=interp.version, timeout=probe_timeout)
            runs[mode] = CellRun(c.cell_id(mode), builds(m, c, mode, s), opts, m.matrix, out)
            # The matrix file's expected states travel with the cell, as for a cell that `nox -s matrix` ran.
            runs[mode].record["expect"] = declared.expect_map
        return runs

    start = time.perf_counter()
    try:
        s = prepare(m, c, interp, doc, wheelhouse, scratch_root)
    except GpuCheckError as exc:  # this case's cells say why; the other cases still run
        say(f"not installed: {exc}")
        cells = []
        for mode, run in new_runs(None).items():
            run.fail("build", str(exc))
            record = run.finish()
            record["gpu"] = {"schema": "skewmatrix.gpu-cell/1", "case": c.name, "compile": mode, "dry_run": dry,
                             "reason": f"not installed: {str(exc).splitlines()[0]}", "mode": None}
            write_json_atomic(run.dir / "cell.json", record)
            cells.append(record)
        return cells
    say(f"wheels installed in {time.perf_counter() - start:.1f} s ({s.site})")
    runs = new_runs(s)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1 + len(m.compile_modes)) as pool:
        measure = pool.submit(run_measure, m, c, s, out, dry, measure_timeout)
        probes = {}
        for mode, run in runs.items():
            run.dir.mkdir(parents=True, exist_ok=True)
            if dry:
                run.record["installed"] = installed(s.root, index=NoIndex())  # type: ignore[arg-type]
                run.step("record", 0.0, True)
                run.fail("probe", f"{NO_CUDA}: the probes were not run with --device cuda on this host "
                                  "(dry run: wheels installed, import unsloth checked)")
                probes[mode] = None
            else:
                probes[mode] = pool.submit(record_and_probe, run, s.root, s.python, say, extra_env=GPU_ENV)
        measured = measure.result()
        for f in probes.values():
            if f is not None:
                f.result()
    say(f"measured ({measured['status']}) in {measured['seconds']:.1f} s")
    cells = []
    for mode, run in runs.items():
        if dry:
            run.finish()
        if measured["status"] != "ok" and not dry and run.record["error"] is None:
            run.record["steps"].append({"name": "gpu-measure", "seconds": measured["seconds"], "ok": False})
        cells.append(finish_cell(run, c, mode, s, interp, measured, dry, doc))
    return cells
