"""The GPU device check (``matrix/gpu`` with the fused check's GPU capability), tested where there is no GPU: its
CPU dry run (with its CPU self-check) and its pure parts.

The integration tests build what the GPU machine would have -- a Python
holding torch, transformers, peft and accelerate and nothing of unsloth --
with uv, build the offline wheelhouse from the index, and run the real
runner against it: one case (our guard on zoo 2026.9.3, the case with the
most moving parts: the guard wheel is rebuilt from the wheelhouse's base
wheel) so the test stays near two minutes on two cores. Expected values come
from what a host without CUDA must give and from the arithmetic of one AdamW
step, not from a recorded run.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from matrix.gpu import GpuCheckError
from matrix.gpu import cells as gpu_cells
from matrix.gpu.interpreter import Interpreter
from matrix.gpu.wheelhouse import batches, pick_wheels
from probes.checks.fused_ce_masked_nan.gpu import CASES, COMPILE_MODES, DTYPES, MEASURE, summary_table

case = MEASURE.case
all_pins = MEASURE.all_pins
MATRIX_FILE = Path(__file__).resolve().parents[2] / MEASURE.matrix

REPO_ROOT = Path(__file__).resolve().parents[2]
CASE = "guard-zoo-2026.9.3"
# What the GPU image holds that unsloth needs (/work/.library/device/KINDS.md lists the image), at the
# versions the project's own envs resolved, so uv takes them from its cache.
IMAGE = ("torch==2.12.1", "torchvision==0.27.1", "triton==3.7.1", "transformers==5.17.0", "peft==0.21.2",
         "accelerate==1.16.0", "numpy", "pandas", "pyarrow", "einops", "sentencepiece", "protobuf", "psutil",
         "pillow", "regex", "requests", "pyyaml", "tqdm", "safetensors", "tokenizers", "huggingface_hub", "fsspec",
         "filelock", "jinja2", "rich", "typer", "xxhash", "aiohttp", "typing-extensions", "packaging", "wheel")


# ----------------------------------------------------------------- pure parts (no env, no network)


def test_every_case_has_both_cells_declared_in_the_merge_matrix() -> None:
    ids = {gpu_cells.declared_cell(MEASURE, c.cell_id(m)).id for c in CASES for m in COMPILE_MODES}
    assert len(ids) == 6
    for c in CASES:
        for m in COMPILE_MODES:
            declared = gpu_cells.declared_cell(MEASURE, c.cell_id(m))
            assert (declared.options.device, declared.options.compile) == ("cuda", m)


def test_merge_matrix_keeps_the_default_matrix_cpu_cells() -> None:
    from matrix import spec

    default = spec.load(spec.DEFAULT_MATRIX, check_index=False)
    merged = spec.load(MATRIX_FILE, check_index=False)
    cpu = {c.id: c for c in merged.cells if c.options.device == "cpu"}
    assert set(cpu) == {c.id for c in default.cells}
    for c in default.cells:
        assert cpu[c.id].unsloth.describe() == c.unsloth.describe()
        assert cpu[c.id].zoo.describe() == c.zoo.describe()


def test_pins_name_each_project_once_per_case_and_the_guard_case_brings_no_pypi_unsloth() -> None:
    for c in CASES:
        projects = [p for p, _ in c.pins()]
        assert len(projects) == len(set(projects)), c.name
    assert "unsloth" not in dict(case(CASE).pins())
    assert dict(case("zoo-2026.10.9").pins())["unsloth-zoo"] == "2026.10.9"


def test_download_batches_never_ask_pip_for_two_versions_of_one_project() -> None:
    pins = all_pins()
    split = batches(pins)
    assert sorted(p for b in split for p in b) == sorted(pins)
    for b in split:
        names = [p.replace("_", "-").lower() for p, _ in b]
        assert len(names) == len(set(names))
    assert len(split) == 2  # two zoo releases, two trl releases ...: exactly one clash per project


def test_pick_wheels_takes_the_wheel_this_interpreter_can_install() -> None:
    wheels = [{"file": f"wheels/multiprocess-0.70.16-py3{v}-none-any.whl", "project": "multiprocess",
               "version": "0.70.16", "tags": [f"py3{v}-none-any"]} for v in (11, 12)]
    other = [{"file": f"wheels/{p}-{v}.whl", "project": p, "version": v, "tags": ["py3-none-any"]}
             for p, v in case(CASE).pins() if p != "multiprocess"]
    doc = {"wheels": [*wheels, *other], "pythons": ["3.11", "3.12"]}
    got = pick_wheels(doc, Path("wh"), case(CASE), frozenset({"py312-none-any", "py3-none-any"}))
    assert [w["file"] for w in got if w["project"] == "multiprocess"] == [wheels[1]["file"]]
    with pytest.raises(GpuCheckError, match=r"multiprocess==0\.70\.16"):
        pick_wheels(doc, Path("wh"), case(CASE), frozenset({"py310-none-any", "py3-none-any"}))


def test_a_case_that_cannot_install_becomes_error_cells_naming_the_missing_wheels(tmp_path: Path) -> None:
    from reports.schema import validate_cell

    interp = Interpreter(Path("python3"), "3.12", frozenset({"py3-none-any"}), tmp_path / "site", True,
                                   "NVIDIA H200", "2.11.0")
    doc = {"wheels": [], "pythons": ["3.12"], "total_bytes": 0}
    messages: list[str] = []
    cells = gpu_cells.run_case(MEASURE, case("zoo-2026.10.9"), interp, doc, tmp_path / "wh", tmp_path / "out",
                               tmp_path / "scratch", False, 10, 10.0, messages.append)
    assert [c["cell_id"] for c in cells] == [case("zoo-2026.10.9").cell_id(m) for m in COMPILE_MODES]
    for cell in cells:
        validate_cell(cell)
        assert cell["error"]["kind"] == "build"
        assert "unsloth-zoo==2026.10.9" in cell["error"]["message"]
        assert cell["gpu"]["reason"].startswith("not installed:")
        assert json.loads((tmp_path / "out" / "cells" / cell["cell_id"] / "cell.json").read_text()) == cell
    # The table still has a row per dtype for the case, with the reason.
    assert summary_table(cells).count("not installed:") == len(COMPILE_MODES) * len(DTYPES)


def _entry(dtype: str, batch: str, loss: float, grad_finite: bool, weight_finite: bool, moved: bool,
           skipped: bool | None = None) -> dict[str, Any]:
    return {"dtype": dtype, "batch": batch, "route": "public", "optimizer": "adamw", "status": "ok",
            "loss": {"value": loss, "finite": math.isfinite(loss)},
            "grads": {"weight": {"finite": grad_finite}},
            "weights_after_step": {"weight": {"finite": weight_finite, "changed": moved}},
            "scaler": None if skipped is None else {"skipped_step": skipped}}


def test_summary_table_says_what_went_non_finite_per_dtype() -> None:
    cell = {"gpu": {"case": "zoo-2026.9.3", "compile": "on", "reason": None, "mode": {"entries": [
        _entry("fp32", "all_masked", float("nan"), True, True, False),
        _entry("fp32", "dense", 3.0, True, True, True),  # a dense step moves weights: not the masked column
        _entry("bf16", "all_masked", float("nan"), False, False, True),
        _entry("fp16+scaler", "all_masked_n0", 0.0, True, True, False, skipped=True),
    ]}}}
    rows = summary_table([cell]).splitlines()[2:]
    assert rows == [
        "| zoo-2026.9.3 | on | fp32 | **non-finite** | finite | finite | - |",
        "| zoo-2026.9.3 | on | bf16 | **non-finite** | **non-finite** | **non-finite**, moved | - |",
        "| zoo-2026.9.3 | on | fp16+scaler | finite | finite | finite | skipped |",
    ]


# ----------------------------------------------------------------- the dry run (real envs, real wheels)


def _uv() -> str:
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(uv).exists():
        pytest.fail("uv is needed to build the stand-in for the GPU image's Python (pip install uv)")
    return uv


@pytest.fixture(scope="module")
def image_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python 3.11 env with only what the GPU image has of unsloth's stack (no unsloth, zoo, trl, datasets)."""
    env = tmp_path_factory.mktemp("gpu-image") / "env"
    subprocess.run([_uv(), "venv", "--quiet", "--python", "3.11", str(env)], check=True)
    subprocess.run([_uv(), "pip", "install", "--quiet", "--python", str(env / "bin" / "python"), *IMAGE], check=True,
                   timeout=1200)
    return env / "bin" / "python"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu-wheelhouse")
    env = {**os.environ, "PATH": f"{Path(_uv()).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run([sys.executable, "-m", "matrix", "gpu-wheelhouse", "--out", str(out), "--python", "3.11"],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def dry_run(image_python: Path, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu-dry-run")
    env = {**os.environ, "PATH": f"{Path(_uv()).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run([sys.executable, "-m", "matrix", "gpu-check", "--wheelhouse", str(wheelhouse), "--out",
                          str(out), "--python", str(image_python), "--cases", CASE],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    return out


@pytest.mark.integration
def test_wheelhouse_holds_every_pin_and_stays_within_the_device_budget(wheelhouse: Path) -> None:
    doc = json.loads((wheelhouse / "wheelhouse.json").read_text())
    have = {(w["project"].replace("_", "-").lower(), w["version"]) for w in doc["wheels"]}
    assert {(p.replace("_", "-").lower(), v) for p, v in all_pins()} <= have
    assert doc["total_bytes"] < 48 * 2**20
    assert doc["guard"]["backport"] == "unsloth-guard" and len(doc["guard"]["record_sha256"]) == 64


@pytest.mark.integration
def test_dry_run_writes_well_formed_cells_that_say_no_cuda(dry_run: Path) -> None:
    from reports.schema import validate_cell

    c = case(CASE)
    cells = {p.parent.name: json.loads(p.read_text()) for p in (dry_run / "cells").glob("*/cell.json")}
    assert set(cells) == {c.cell_id(m) for m in COMPILE_MODES}
    for mode in COMPILE_MODES:
        cell = cells[c.cell_id(mode)]
        validate_cell(cell)
        assert cell["options"]["device"] == "cuda" and cell["options"]["compile"] == mode
        assert cell["error"]["message"].startswith(gpu_cells.NO_CUDA)
        assert cell["probes"] is None
        gpu = cell["gpu"]
        assert gpu["dry_run"] is True and gpu["compile"] == mode
        # import unsloth ran in the case's interpreter, and our rebuilt guard wheel wired itself in.
        assert gpu["import_unsloth"]["ok"] is True
        assert gpu["guard_module"]["is_installed"] is True
        assert gpu["versions"]["unsloth_zoo"] == "2026.9.3" and gpu["versions"]["trl"] == "0.24.0"
        assert gpu["wheelhouse"]["guard_wheel"]["same_as_wheelhouse"] is True  # same backport folder, same RECORD
        entries = gpu["mode"]["entries"]
        assert len(entries) == len(DTYPES) * 3 * 2 * 2  # dtypes x batches x routes x optimizers
        assert {e["reason"] for e in entries} == {gpu_cells.NO_CUDA}
        installed = {d["name"].replace("_", "-").lower(): d for d in cell["installed"]}
        assert installed["unsloth"]["direct_url"].endswith(".whl")  # the rebuilt guard wheel, by file
        assert installed["unsloth"]["backport"]["backport"] == "unsloth-guard"
        assert installed["unsloth-zoo"]["version"] == "2026.9.3"
        assert installed["torch"]["location"] == "interpreter" and cell["torch"]["version"] == "2.12.1"
    summary = (dry_run / "gpu-summary.md").read_text()
    assert summary.count(gpu_cells.NO_CUDA) == len(COMPILE_MODES) * len(DTYPES)


@pytest.mark.integration
def test_dry_run_cells_merge_into_the_report(dry_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matrix.cells import pipeline, runs

    monkeypatch.setenv("SKEWMATRIX_MATRIX", str(MATRIX_FILE))
    monkeypatch.setenv("SKEWMATRIX_OUT", str(tmp_path / "out"))
    rep = pipeline.report(runs.from_environ(out=tmp_path / "out"), [dry_run], log=lambda _msg: None)
    by_id = {c["cell_id"]: c for c in rep["cells"]}
    for mode in COMPILE_MODES:
        cell = by_id[case(CASE).cell_id(mode)]
        assert cell["gpu"]["case"] == CASE
        assert cell["error"]["message"].startswith(gpu_cells.NO_CUDA)
    assert case(CASE).unsloth_row("on") in rep["grid"]["unsloth"]
    assert (tmp_path / "out" / "report.json").is_file()


@pytest.mark.integration
def test_dry_run_cpu_check_separates_loss_gradients_and_weights(dry_run: Path) -> None:
    """gpu_measure.py itself, run on CPU by the dry run (``gpu.cpu_check``): the guard answers the all-masked
    batch."""
    cell = json.loads((dry_run / "cells" / case(CASE).cell_id("off") / "cell.json").read_text())
    check = cell["gpu"]["cpu_check"]
    assert check["device"] == "cpu"
    entries = check["entries"]
    ok = [e for e in entries if e["status"] == "ok"]
    assert {e["dtype"] for e in ok} == set(DTYPES)
    assert {e["batch"] for e in ok} == {"all_masked", "all_masked_n0", "dense"}
    for e in ok:
        if e["batch"].startswith("all_masked"):
            # Guarded: loss exactly 0.0, gradients present and zero, and with no weight decay a zero
            # gradient leaves AdamW's weights where they were (update = lr * 0 / (0 + eps)).
            assert e["loss"]["value"] == 0.0, e
            assert all(g["present"] and g["finite"] and g["all_zero"] for g in e["grads"].values()), e
            assert not any(w["changed"] for w in e["weights_after_step"].values()), e
        else:
            assert e["loss"]["finite"] and e["loss"]["value"] > 0
            assert all(w["changed"] and w["finite"] for w in e["weights_after_step"].values()), e
        if e["dtype"] == "fp16+scaler":
            assert e["scaler"]["skipped_step"] is False  # every gradient is finite: the scaler steps
        else:
            assert e["scaler"] is None
    defaults = [e for e in entries if e["optimizer"] == "default"]
    assert defaults and all(e["status"] == "n/a" and "bitsandbytes" in e["reason"] for e in defaults)
