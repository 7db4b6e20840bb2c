"""The training probe (``probes/checks/fused_ce_masked_nan/train.py``) on real builds from PyPI.

One env per zoo release (unsloth 2026.10.9 with zoo overridden, the skew a lockfile makes), each
probed in a fresh process after ``import unsloth``, as a cell does. Expectations come from the
mechanism, not from a recorded run:

* zoo 2026.9.3 divides the summed loss by ``n_items`` when given; zoo's trainer patch hands it the
  count of shifted labels over the optimizer step, 0 on a fully masked step, so that step's loss is
  0 / 0 = NaN. The Trainer then resets its loss accumulator with ``tr_loss -= tr_loss``, and
  NaN - NaN is NaN: every later logged loss is NaN although each later raw loss is finite.
* zoo 2026.10.9 guards the zero divisor: the masked steps log 0.0 and the run stays clean.
* our guard installed on zoo 2026.9.3 short-circuits an empty batch with ``n_items`` None or 0: clean.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from matrix.envs.tools import uv_bin
from probes.checks.fused_ce_masked_nan import train
from tests.integration.harness import ROOT, UNSLOTH

pytestmark = pytest.mark.integration
GUARD = ROOT / "matrix" / "backports" / "unsloth-guard" / "files" / "fused_ce_guard.py"
ENV = {"UNSLOTH_ALLOW_CPU": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
       "UNSLOTH_DISABLE_STATISTICS": "1", "PYTHONPATH": str(ROOT)}
# One ``import unsloth`` per env: the unguarded run first, then (when given) the guard installed
# and the same run again, each written to its own file.
DRIVER = """
import json, sys
import unsloth
from probes.checks.fused_ce_masked_nan import train
with open(sys.argv[1], "w") as fh:
    json.dump(train.run("cpu", False), fh)
if len(sys.argv) > 3:
    import importlib.util
    spec = importlib.util.spec_from_file_location("unsloth.fused_ce_guard", sys.argv[3])
    guard = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = guard
    spec.loader.exec_module(guard)
    assert guard.install(), "the guard did not install on this zoo"
    with open(sys.argv[2], "w") as fh:
        json.dump(train.run("cpu", False), fh)
"""


def build_env(root: Path, zoo: str) -> Path:
    env = root / "venv"
    subprocess.run([uv_bin(), "venv", "-q", "-p", "3.11", str(env)], check=True)
    (root / "ov.txt").write_text(f"unsloth_zoo=={zoo}\n")
    subprocess.run([uv_bin(), "pip", "install", "-q", "--python", str(env / "bin" / "python"),
                    f"unsloth=={UNSLOTH}", f"unsloth_zoo=={zoo}", "--overrides", str(root / "ov.txt")], check=True)
    return env / "bin" / "python"


def probe(python: Path, work: Path, guard: Path | None = None) -> list[dict]:
    """``train.run`` in a fresh process of the env, in a scratch cwd (unsloth writes its cache there).

    The results: unguarded, then guarded when ``guard`` is given.
    """
    work.mkdir()
    outs = [work / "train.json", work / "train-guarded.json"]
    argv = [str(python), "-c", DRIVER, *map(str, outs)] + ([str(guard)] if guard else [])
    proc = subprocess.run(argv, cwd=work, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    results = [json.loads(out.read_text()) for out in outs[:2 if guard else 1]]
    for result in results:
        assert result["ok"], result.get("error") or result["reason"]
    return results


@pytest.fixture(scope="module")
def old_zoo(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """zoo 2026.9.3: the run without a guard, then with ours installed."""
    root = tmp_path_factory.mktemp("zoo-2026.9.3")
    return probe(build_env(root, "2026.9.3"), root / "run", guard=GUARD)


@pytest.fixture(scope="module")
def new_zoo(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("zoo-2026.10.9")
    return probe(build_env(root, "2026.10.9"), root / "run")[0]


def masked_steps(spec: train.RunSpec) -> list[int]:
    ga = spec.gradient_accumulation_steps
    return [k + 1 for k in range(spec.max_steps) if all(i in spec.masked for i in range(k * ga, (k + 1) * ga))]


def finite(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def check_route(result: dict) -> None:
    """Every micro-batch went through zoo's fused Function with the count the trainer computed."""
    assert result["route"] == train.ROUTE
    for run, spec in zip(result["runs"], train.RUNS, strict=True):
        assert run["name"] == spec.name
        assert [s["step"] for s in run["steps"]] == list(range(1, spec.max_steps + 1))
        assert run["masked_steps"] == masked_steps(spec)
        assert run["model_accepts_loss_kwargs"] is True
        for s in run["steps"]:
            assert s["kernels"] == {"UnslothFusedLossBackward": spec.gradient_accumulation_steps}, s
            # zoo's sampler counts the shifted labels of the whole step; a masked step counts 0.
            assert s["num_items_in_batch"] == f"tensor({s['labels_left']})", s


def test_old_zoo_logs_nan_from_the_first_masked_step_to_the_end(old_zoo: list[dict]) -> None:
    result = old_zoo[0]
    check_route(result)
    assert result["outcome"] == "nan-logged"  # not nan-weights: on CPU the masked step's gradients are zero
    for run, spec in zip(result["runs"], train.RUNS, strict=True):
        first = masked_steps(spec)[0]
        assert run["outcome"] == "nan-logged", run["symptom"]
        assert run["first_nan_step"] == first
        assert run["nan_until_end"] is True
        steps = {s["step"]: s for s in run["steps"]}
        assert all(finite(steps[k]["logged_loss"]) for k in range(1, first))
        assert steps[first]["num_items_in_batch"] == "tensor(0)"
        assert all(v == "nan" for v in steps[first]["raw_loss"])
        # The accumulator, not the kernel, keeps it NaN: the next step's own losses are finite.
        assert all(finite(v) for v in steps[first + 1]["raw_loss"])
        assert steps[first + 1]["logged_loss"] == "nan"
        assert all(s["nonfinite_params"] == 0 for s in run["steps"])
    assert result["first_nan_step"] == masked_steps(train.RUNS[0])[0]
    assert result["reason"].startswith(f"ga1: logged loss NaN from step {result['first_nan_step']} to the end "
                                       "(num_items_in_batch=tensor(0) reached the loss")


def test_new_zoo_trains_clean(new_zoo: dict) -> None:
    result = new_zoo
    check_route(result)
    assert result["outcome"] == "clean", result["reason"]
    assert result["first_nan_step"] is None
    for run in result["runs"]:
        for s in run["steps"]:
            assert finite(s["logged_loss"]) and finite(s["grad_norm"]), s
            if s["labels_left"] == 0:
                assert s["logged_loss"] == 0.0 and s["raw_loss"] == [0.0] * len(s["raw_loss"])


def test_guard_on_old_zoo_trains_clean(old_zoo: list[dict]) -> None:
    result = old_zoo[1]
    check_route(result)
    assert result["outcome"] == "clean", result["reason"]
    masked = [s for run in result["runs"] for s in run["steps"] if s["labels_left"] == 0]
    assert masked and all(s["logged_loss"] == 0.0 for s in masked)
    assert all(s["num_items_in_batch"] == "tensor(0)" for s in masked)  # the trainer's 0 reached the guard


def test_evaluation_nan_on_the_old_zoo_is_its_kernels_and_the_guard_or_the_fix_keeps_it_finite(
        old_zoo: list[dict], new_zoo: dict) -> None:
    # trainer.evaluate() after the GA 1 run, batch 1, the middle eval batch with no label left. Whatever count
    # this stack's prediction step hands the model (None before transformers 4.57, the label count after), zoo
    # 2026.9.3's fused entry divides the empty batch's zero sum by zero: its own NaN, not the stack's.
    ev = old_zoo[0]["evaluation"]
    assert (ev["outcome"], ev["source"], ev["eval_loss"], ev["kernel_calls"]) == ("nan-logged", "kernel", "nan", 3)
    first, masked, last = ev["batches"]
    assert masked["labels_left"] == 0 and [c["raw_loss"] for c in masked["kernel_calls"]] == ["nan"]
    assert finite(first["loss"]) and finite(last["loss"]) and first["labels_left"] > 0
    assert ev["symptom"].startswith("eval_loss NaN: the check's kernel answered NaN on eval batch 2")
    for result in (old_zoo[1], new_zoo):  # our guard on zoo 2026.9.3; zoo 2026.10.9's own fix
        ev = result["evaluation"]
        assert (ev["outcome"], ev["source"], ev["kernel_calls"]) == ("clean", None, 3), ev["symptom"]
        assert finite(ev["eval_loss"]) and ev["batches"][1]["loss"] == 0.0
