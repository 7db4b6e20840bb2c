"""The nanochat check on real trees from ``../shared/fixtures/nanochat.bundle``: static, runtime, suite, chat_sft.py.

Each ref is checked out from the bundle (a git source like any other: CI
cannot reach GitHub), gets an env made from its own ``pyproject.toml``
(dependencies + the ``cpu`` extra, ``uv --no-sources``: PyPI's torch 2.9.1),
and runs this check's raw steps the way a cell's raw process does (the
check is not in the registry yet, so the steps are called directly). Refs
with the same dependencies share an env.

Expectations, written from each diff before any run (the mechanism; which
step a fully masked micro-batch lands on is the data's):

* master 92d63d4: ``F.cross_entropy(..., reduction=loss_reduction)`` with no
  guard, a loop with no check -> model vulnerable (both detectors), loop
  unguarded; the NaN loss reaches ``backward()`` (n3, n4) and the log (n7);
  eager autograd gives zero gradients for ignored rows, so n6 passes and the
  weights stay finite; chat_sft.py logs ``loss: nan`` from the first step whose
  last micro-batch is fully masked, to the end (the EMA keeps it) ->
  missing, exposed.
* PR #619 1a3ad25: ``if valid_mask.any(): ... else: logits.new_tensor(0.0)``
  -> model fixed (0.0) but the fallback has no grad_fn: ``loss.backward()``
  raises in the loop (n3, n4, n6, n7), ``reduction='sum'`` loses its grad_fn
  and ``'none'`` returns a scalar (n5); chat_sft.py crashes with RuntimeError
  at ``loss.backward()`` on the first fully masked micro-batch, at every GA ->
  broken ("the NaN became a crash"), exposed.
* PR #623 0f21a91 (carries #619's commit, then reverts gpt.py): model as
  master; the loop computes the loss, keeps ``train_loss = loss.detach()``
  (NaN) before its check, skips ``backward()`` -> gradients fine (n3, n6
  pass), logged NaN (n7); a step whose every micro-batch is skipped leaves
  every ``p.grad`` None and nanochat's MuonAdamW ``torch.stack``s them:
  TypeError (n4); chat_sft.py at GA 1 crashes in ``optimizer.step()`` on the
  first fully masked step -> broken, exposed.
* PR #662 55eb345: model as master; the loop checks before the forward,
  logs 0.0 for a skipped micro-batch -> n3, n6, n7 pass; n4 fails like #623;
  chat_sft.py at GA 1 crashes in ``optimizer.step()`` -> broken, exposed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from matrix.tools import uv_bin
from probes.checks.nanochat_sft_masked_nan import verdict
from probes.checks.vocabulary import GuardState, Reach, ZooState

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "fixtures" / "nanochat.bundle"
REFS = {"master": "refs/heads/master", "pr-619": "refs/pull/619/head", "pr-623": "refs/pull/623/head",
        "pr-662": "refs/pull/662/head"}
# ref -> (model, loop, failing tests, guard, reach, what the GA 1 run shows)
EXPECTED: dict[str, tuple[str, str, set[str], GuardState, Reach, str]] = {
    "master": ("vulnerable", "unguarded", {"n3-all-masked-micro-batch", "n4-all-masked-step", "n7-logged-loss-finite"},
               GuardState.MISSING, Reach.EXPOSED, "nan-logged"),
    "pr-619": ("fixed", "unguarded", {"n3-all-masked-micro-batch", "n4-all-masked-step", "n5-other-reductions",
                                      "n6-masked-adds-nothing", "n7-logged-loss-finite"},
               GuardState.BROKEN, Reach.EXPOSED, "crash:RuntimeError"),
    "pr-623": ("vulnerable", "guarded", {"n4-all-masked-step", "n7-logged-loss-finite"},
               GuardState.BROKEN, Reach.EXPOSED, "crash:TypeError"),
    "pr-662": ("vulnerable", "guarded", {"n4-all-masked-step"}, GuardState.BROKEN, Reach.EXPOSED, "crash:TypeError"),
}
DRIVER = """
import json, sys, time
from pathlib import Path
from probes.checks import PhaseContext
from probes.checks.nanochat_sft_masked_nan import phases
check = {"static": phases.static(), "steps": []}
ctx = PhaseContext("cpu", False, "allow-cpu", Path.cwd(), shared={})
for st in phases.RAW_STEPS:
    t = time.perf_counter()
    try:
        res, status = {"ok": True, **st.fn(ctx)}, "ok"
    except Exception as exc:
        res, status = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, "error"
    check["steps"].append({"name": st.name, "process": "raw", "status": status, "result": res,
                           "reason": res.get("error"), "seconds": round(time.perf_counter() - t, 3)})
Path(sys.argv[1]).write_text(json.dumps(check, default=str))
"""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not BUNDLE.is_file():
        pytest.skip(f"no bundle at {BUNDLE}")
    base = tmp_path_factory.mktemp("nanochat")
    clone = base / "clone"
    git("clone", "-q", str(BUNDLE), str(clone))
    git("-C", str(clone), "fetch", "-q", str(BUNDLE), "refs/pull/*:refs/pull/*")
    out = {}
    for name, ref in REFS.items():
        git("-C", str(clone), "worktree", "add", "-q", "--detach", str(base / name), ref)
        out[name] = base / name
    return out


def deps_key(tree: Path) -> str:
    project = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = sorted(project.get("dependencies", [])) + sorted(project.get("optional-dependencies", {}).get("cpu", []))
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def envs(trees: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One env per distinct dependency set: the tree's dependencies and its cpu extra (runs/runcpu.sh's
    ``uv sync --extra cpu``), without [tool.uv.sources] (its torch indexes are out of reach)."""
    uv, made, out = uv_bin(), {}, {}
    for name, tree in trees.items():
        key = deps_key(tree)
        if key not in made:
            env = tmp_path_factory.mktemp(f"env-{key}")
            subprocess.run([uv, "venv", "-q", "--python", "3.11", str(env)], check=True)
            subprocess.run([uv, "pip", "install", "-q", "--python", str(env / "bin" / "python"), "--no-sources",
                            "-r", str(tree / "pyproject.toml"), "--extra", "cpu"], check=True, timeout=1800)
            made[key] = env
        out[name] = made[key]
    return out


def probe(tree: Path, env: Path, out: Path) -> dict[str, Any]:
    run_env = {**os.environ, "SKEWMATRIX_SOURCE_NANOCHAT": str(tree), "PYTHONPATH": str(ROOT),
               "OMP_NUM_THREADS": "1"}
    subprocess.run([str(env / "bin" / "python"), "-c", DRIVER, str(out)], cwd=out.parent, env=run_env, check=True,
                   timeout=1800)
    return json.loads(out.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", list(REFS))
def test_each_ref_reaches_the_state_its_diff_predicts(name: str, trees: dict[str, Path], envs: dict[str, Path],
                                                     tmp_path: Path) -> None:
    model, loop, failing, guard, reach, ga1 = EXPECTED[name]
    check = probe(trees[name], envs[name], tmp_path / "check.json")
    steps = {s["name"]: s for s in check["steps"]}
    assert all(s["status"] == "ok" for s in steps.values()), steps
    assert check["static"]["verdict"] == model, check["static"]["reason"]
    assert check["static"]["loop"]["verdict"] == loop, check["static"]["loop"]["reason"]
    assert steps["runtime"]["result"]["verdict"] == model, steps["runtime"]["result"]["reason"]
    tests = steps["behavior"]["result"]["tests"]
    assert {t["id"] for t in tests if t["outcome"] == "fail"} == failing, [(t["id"], t["reason"]) for t in tests]
    train = steps["train"]["result"]
    runs = {r["name"]: r for r in train["runs"]}
    assert set(runs) == {"ga1", "ga4"} and runs["ga1"]["masked_micro_batches"], runs
    first = runs["ga1"]
    if ga1.startswith("crash:"):
        assert first["outcome"] == "crash" and first["crash"]["type"] == ga1.split(":")[1], first["symptom"]
    else:
        assert first["outcome"] == ga1, first["symptom"]
        assert first["final_nonfinite_params"] == 0 and first["checkpoint"]["nonfinite_params"] == 0
    v = verdict.classify(check, {})
    assert v.zoo is ZooState(model)
    assert (v.guard, v.reach) == (guard, reach), (v.guard_reason, v.reach_reason)
