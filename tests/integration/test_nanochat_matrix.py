"""The nanochat check through the real matrix: every ref of ``../shared/fixtures/nanochat.bundle`` and our backport.

A matrix file like ``matrix/nanochat.toml`` (``url`` pointing at the bundle,
as CI cannot reach GitHub), run with ``nox -s matrix``: each build is fetched
from the bundle (the backport is master plus ``matrix/backports/nanochat-
mean-floor``), its env is the tree's own ``pyproject.toml`` dependencies and
``cpu`` extra with torch 2.9.1 (nanochat's pin), and the probes run the
check's raw steps, ending in the tree's own ``scripts/chat_sft.py`` at GA 1
and GA 4. CI builds six of the eight builds below (``SAMPLE``: every state
and every kind of evidence); ``pytest --all-cells`` builds all eight. The
torch 2.14.1 column of the shipped file is the check README's run
(``SKEWMATRIX_MATRIX=matrix/nanochat.toml nox -s matrix``), not repeated here.

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
* fix (ours, master + nanochat-mean-floor): ``loss_sum / (targets != -1)
  .sum().clamp(min=1)`` for 'mean' only -> both detectors fixed, the loop
  unguarded (it needs nothing), every test passes, both runs log finite
  losses (0.0 at a fully masked GA 1 step) -> not-needed.
* early-return (master + ``tests/backports/nanochat-early-return``, a right
  fix in a contributor's shape, not ours): ``if loss_reduction == 'mean' and
  not (targets != -1).any(): return logits.sum() * 0.0`` before the loss ->
  the static reading follows the early return (fixed), the runtime detector
  gets 0.0 with a grad_fn, the loop is untouched, every test passes (sum and
  none never reach the new branch; the zero loss back-propagates zero
  gradients, so a GA 1 step of one masked micro-batch leaves every
  ``p.grad`` a zero tensor and the optimizer steps), both runs finite ->
  not-needed.
* loop-skip (master + ``tests/backports/nanochat-loop-skip``, a right fix in
  the loop): ``if (y != -1).any():`` around forward and backward,
  ``train_loss = None`` before the loop, a zero ``.grad`` for every parameter
  that has none before the step, the EMA updated only when there is a loss ->
  model vulnerable, loop guarded; the printed loss (the EMA) stays finite
  (n7), the masked step steps with zero gradients (n4), every test passes,
  the runs skip the masked micro-batches and log finite losses -> activates.
* mean-all (master + ``tests/backports/nanochat-mean-all-positions``, a
  wrong fix): ``if loss_reduction == 'mean': sum / targets.numel()`` -> the
  static reading takes the 'mean' arm (fixed, "all positions"), the runtime
  detector gets 0.0; on a partly masked batch the loss is the mean times the
  valid fraction, so n1 fails and nothing else does; the runs are finite ->
  broken, latent.
* two wrong loop fixes run through the suite only, in master's cell env
  (``WRONG_LOOPS``): one logs NaN for a skipped micro-batch (n7: the printed
  EMA is NaN), one frees gradients only when a step has a loss of its own
  (n4: the masked step steps with the previous step's gradients) -> broken.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from matrix.spec.tables import nox_safe
from probes.checks.nanochat_sft_masked_nan import verdict
from tests.integration.harness import ROOT, explain, run_nox

pytestmark = pytest.mark.integration
CHECK = "nanochat-sft-masked-nan"
BUNDLE = ROOT.parent / "shared" / "fixtures" / "nanochat.bundle"
REFS = {"master": "refs/heads/master", "pr-619": "refs/pull/619/head", "pr-623": "refs/pull/623/head",
        "pr-662": "refs/pull/662/head"}
# build -> (model, loop, failing tests, guard, reach, what the GA 1 run shows)
EXPECTED: dict[str, tuple[str, str, set[str], str, str | None, str]] = {
    "master": ("vulnerable", "unguarded", {"n3-all-masked-micro-batch", "n4-all-masked-step", "n7-logged-loss-finite"},
               "missing", "exposed", "nan-logged"),
    "pr-619": ("fixed", "unguarded", {"n3-all-masked-micro-batch", "n4-all-masked-step", "n5-other-reductions",
                                      "n6-masked-adds-nothing", "n7-logged-loss-finite"},
               "broken", "exposed", "crash:RuntimeError"),
    "pr-623": ("vulnerable", "guarded", {"n4-all-masked-step", "n7-logged-loss-finite"},
               "broken", "exposed", "crash:TypeError"),
    "pr-662": ("vulnerable", "guarded", {"n4-all-masked-step"}, "broken", "exposed", "crash:TypeError"),
    "fix": ("fixed", "unguarded", set(), "not-needed", None, "clean"),
    "early-return": ("fixed", "unguarded", set(), "not-needed", None, "clean"),
    "loop-skip": ("vulnerable", "guarded", set(), "activates", None, "clean"),
    "mean-all": ("fixed", "unguarded", {"n1-partial-reference"}, "broken", "latent", "clean"),
}
# backports of master: ours (matrix/backports), a right fix in another shape, a right fix in the loop and a
# wrong fix in the model (tests/backports)
BACKPORTS = {"fix": "nanochat-mean-floor", "early-return": "nanochat-early-return", "loop-skip": "nanochat-loop-skip",
             "mean-all": "nanochat-mean-all-positions"}
# wrong loop fixes judged by the suite alone, in master's cell env (no cell, no chat_sft.py run): the failing
# test and the words its reason must carry
WRONG_LOOPS = {"nanochat-loop-skip-nan-log": ("n7-logged-loss-finite", "printed loss"),
               "nanochat-loop-skip-stale-grads": ("n4-all-masked-step", "the previous step's gradient")}
STACK = "torch-2.9.1"
# CI builds a sample that still reaches every state and every kind of evidence the module asserts: pr-662 (broken
# and exposed by a TypeError in the optimizer, as pr-623) and early-return (not-needed with a clean run, as fix)
# repeat a state already reached and cost about four minutes each on two cores. `pytest --all-cells` builds all.
SAMPLE = ("master", "pr-619", "pr-623", "fix", "loop-skip", "mean-all")
# the commits the bundle's refs resolve to (git bundle list-heads on the bundle); our backport is master's
SHAS = {"master": "92d63d4e8bb4", "pr-619": "1a3ad25e1a93", "pr-623": "0f21a913a861", "pr-662": "55eb3455156d",
        "fix": "92d63d4e8bb4", "early-return": "92d63d4e8bb4", "loop-skip": "92d63d4e8bb4",
        "mean-all": "92d63d4e8bb4"}


def chosen(config: pytest.Config) -> list[str]:
    """The builds this run builds: every one with ``--all-cells``, else the sample."""
    return list(EXPECTED) if config.getoption("--all-cells") else list(SAMPLE)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "name" in metafunc.fixturenames:
        metafunc.parametrize("name", chosen(metafunc.config))


def matrix_text(names: list[str]) -> str:
    """The matrix of ``names`` (master is always built: the backports and the suite-only tests need it)."""
    names = ["master", *(n for n in names if n != "master")]
    builds = "".join(f'[[build]]\nname = "{n}"\npackage = "nanochat"\nsource = "git"\nurl = "nanochat.bundle"\n'
                     f'ref = "{r}"\n\n' for n, r in REFS.items() if n in names)
    builds += "".join(f'[[build]]\nname = "{n}"\npackage = "nanochat"\nsource = "backport"\nbase = "master"\n'
                      f'backport = "{b}"\n\n' for n, b in BACKPORTS.items() if n in names)
    stack = f'[[stack]]\nname = "{STACK}"\ntorch = "==2.9.1"\n\n'
    expect = "".join(f'[[expect]]\nnanochat = "{n}"\nstate = "{e[3]}"\n\n' for n, e in EXPECTED.items()
                     if n in names)
    return f"schema = 1\n\n[options]\ndevice = \"cpu\"\n\n{builds}{stack}{expect}"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("nanochat")
    (tmp / "nanochat.bundle").symlink_to(BUNDLE)
    names = chosen(request.config)
    for name in ("early-return", "loop-skip", "mean-all"):
        if name in names:
            shutil.copytree(ROOT / "tests" / "backports" / BACKPORTS[name], tmp / BACKPORTS[name])
    matrix = tmp / "nanochat.toml"
    matrix.write_text(matrix_text(names), encoding="utf-8")
    out = tmp / "out"
    proc = run_nox(tmp / "nox", "-s", "matrix", out=out, matrix=matrix)
    report_path = out / "report.json"
    assert report_path.is_file(), explain(proc)
    report = json.loads(report_path.read_text())
    return {"proc": proc, "report": report, "cells": {c["cell_id"]: c for c in report["cells"]}, "tmp": tmp,
            "names": names,
            "text": (out / "report.md").read_text(encoding="utf-8") if (out / "report.md").is_file() else ""}


def test_every_build_is_as_expected_so_the_run_exits_0(ran: dict[str, Any]) -> None:
    assert ran["proc"].returncode == 0, explain(ran["proc"])
    assert sorted(ran["cells"]) == sorted(f"{n}__{STACK}" for n in ran["names"])
    assert ran["report"]["grid"]["axes"] == ["nanochat", "stack"]
    assert [c["id"] for c in ran["report"]["checks"]] == [CHECK]  # no unsloth check judged these cells


def test_each_build_reaches_the_state_its_diff_predicts(name: str, ran: dict[str, Any]) -> None:
    model, loop, failing, guard, reach, ga1 = EXPECTED[name]
    cell = ran["cells"][f"{name}__{STACK}"]
    assert cell["error"] is None, cell["error"]
    assert cell["stack"]["resolved"]["torch"] == "2.9.1"
    build = cell["builds"]["nanochat"]
    assert build["details"]["commit"].startswith(SHAS[name]), build["details"]
    check = cell["checks"][CHECK]
    steps = {s["name"]: s for s in check["steps"]}
    assert all(s["status"] == "ok" for s in steps.values()), steps
    assert check["static"]["verdict"] == model, check["static"]["reason"]
    assert check["static"]["loop"]["verdict"] == loop, check["static"]["loop"]["reason"]
    assert steps["runtime"]["result"]["verdict"] == model, steps["runtime"]["result"]["reason"]
    tests = steps["behavior"]["result"]["tests"]
    assert {t["id"] for t in tests if t["outcome"] == "fail"} == failing, [(t["id"], t["reason"]) for t in tests]
    runs = {r["name"]: r for r in steps["train"]["result"]["runs"]}
    assert set(runs) == {"ga1", "ga4"} and runs["ga1"]["masked_micro_batches"], runs
    first = runs["ga1"]
    if ga1.startswith("crash:"):
        assert first["outcome"] == "crash" and first["crash"]["type"] == ga1.split(":")[1], first["symptom"]
    else:
        assert first["outcome"] == ga1, first["symptom"]
        assert first["final_nonfinite_params"] == 0 and first["checkpoint"]["nonfinite_params"] == 0
    v = cell["verdicts"][CHECK]
    assert (v["zoo"], v["guard"], v["reach"]) == (model, guard, reach), (v["guard_reason"], v.get("reach_reason"))


def test_the_report_shows_a_maintainer_what_each_pr_does(ran: dict[str, Any]) -> None:
    text = ran["text"]
    assert "nanochat \\ stack" in text  # the grid's corner names its axes
    for name in ran["names"]:
        assert f"{name} (git nanochat.bundle@" in text or f"{name} (backport {BACKPORTS.get(name)}" in text, name


def test_a_wrong_mean_is_broken_by_the_partial_batch_test_not_an_error(ran: dict[str, Any]) -> None:
    # sum over the valid targets / every position on the 'mean' arm: finite on an all -1 batch (both detectors
    # say fixed, the static one reading that arm, not the else arm's reduction=loss_reduction call), but not
    # the mean over the valid targets on a partly masked batch
    cell = ran["cells"][f"mean-all__{STACK}"]
    check = cell["checks"][CHECK]
    assert "all positions" in check["static"]["reason"], check["static"]["reason"]
    v = cell["verdicts"][CHECK]
    assert v["guard"] == "broken" and "n1-partial-reference" in v["guard_reason"], v["guard_reason"]


def test_a_loop_fix_is_judged_on_what_the_loop_prints(ran: dict[str, Any]) -> None:
    # the loop skips a fully masked micro-batch before the forward (train_loss stays None on a step with no
    # loss): what the script prints is the EMA, which it leaves alone, and the real runs log finite losses
    check = ran["cells"][f"loop-skip__{STACK}"]["checks"][CHECK]
    steps = {s["name"]: s for s in check["steps"]}
    n7 = next(t for t in steps["behavior"]["result"]["tests"] if t["id"] == "n7-logged-loss-finite")
    assert n7["outcome"] == "pass", n7["reason"]
    assert all(c["printed"]["finite"] for c in n7["details"]["cases"].values()), n7["details"]
    for run in steps["train"]["result"]["runs"]:
        masked = [m for s in run["steps"] for m in s["micro_batches"] if m["labels_left"] == 0]
        assert masked or run["name"] != "ga1", run  # the GA 1 run has fully masked steps (the data's)
        assert not any(m["loss_computed"] for m in masked), run["name"]  # skipped before the forward
        assert all(isinstance(s["logged_loss"], float) for s in run["steps"]), run["loss_lines"]


def _patched_master(tmp: Path, backport: str) -> Path:
    tree = tmp / f"tree-{backport}"
    if not tree.is_dir():
        subprocess.run(["git", "clone", "-q", "--branch", "master", str(BUNDLE), str(tree)], check=True)
        patch = next((ROOT / "tests" / "backports" / backport / "patches").glob("*.diff"))
        subprocess.run(["git", "-C", str(tree), "apply", str(patch)], check=True)
    return tree


SUITE_ONLY = """
import json, sys
from pathlib import Path
from probes.checks.nanochat_sft_masked_nan import static, suite
root = Path(sys.argv[1])
print(json.dumps({"static": static.analyze_tree(root), "behavior": suite.run(root)}, default=str))
"""


@pytest.mark.parametrize("backport", list(WRONG_LOOPS))
def test_a_wrong_loop_fix_is_still_broken(backport: str, ran: dict[str, Any]) -> None:
    # the suite on a real tree (master + the wrong fix) in master's cell env; no chat_sft.py run (a third and
    # fourth cell would cost ~5 min each): the verdict then judges by the suite alone
    failing, words = WRONG_LOOPS[backport]
    tree = _patched_master(ran["tmp"], backport)
    python = ran["tmp"] / "nox" / f"cell-{nox_safe(f'master__{STACK}')}" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(python), "-c", SUITE_ONLY, str(tree)], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(ROOT)}, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["static"]["verdict"] == "vulnerable" and got["static"]["loop"]["verdict"] == "guarded"
    tests = {t["id"]: t for t in got["behavior"]["tests"]}
    assert tests[failing]["outcome"] == "fail" and words in tests[failing]["reason"], tests[failing]
    check = {"static": got["static"], "steps": [
        {"name": "runtime", "status": "ok", "result": {"verdict": "vulnerable", "reason": "master's model"}},
        {"name": "behavior", "status": "ok", "result": got["behavior"]}]}
    v = verdict.classify(check, {})
    assert v.guard.value == "broken" and failing in v.guard_reason, v.guard_reason
