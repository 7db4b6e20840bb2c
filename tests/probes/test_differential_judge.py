"""The differential suite's judging without torch: a fake kernel stands for zoo (raw process) and for the
guarded kernel (unsloth process); shrinking, the import-time side-effect rules, the step wiring, the
result schema, and the guard diffs of tests/mutants/ (each applies to the shipped guard)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from probes.checks.fused_ce_masked_nan import differential as D
from probes.checks.fused_ce_masked_nan import phases
from probes.checks.fused_ce_masked_nan.differential import judge, state
from probes.checks.fused_ce_masked_nan.differential import spec as S
from tests.integration.harness import ROOT

CHECK = ROOT / "probes" / "checks" / "fused_ce_masked_nan"
MUTANTS = ROOT / "tests" / "mutants"
GUARD = ROOT / "matrix" / "backports" / "unsloth-guard" / "files" / "fused_ce_guard.py"
META = "Tensor|float32|()|cpu|1"


def zoo(spec: dict[str, Any]) -> dict[str, Any]:
    """A vulnerable zoo, modelled: NaN on every empty batch with no count, a loss that depends on the input."""
    if spec["labels"] in ("all_masked", "first_only") and spec["n_items"] == "none" and spec["mask"] == "none":
        return {"ez": 1, "m": META, "l": "nan", "f": 0, "z": 0, "g": {"hidden": "nan|0|0"}}
    value = 1.0 + int(S.key(spec)[:4], 16) / 65536
    return {"m": META, "l": value.hex(), "f": 1, "z": 0, "g": {"hidden": S.key(spec)[:6] + "|1|0"}}


def raw_for(examples: list[dict[str, Any]]) -> dict[str, Any]:
    answers = {}
    for e in examples:
        for s in [e, *S.lattice(e, has_compute_gradients=False)]:
            answers[S.key(s)] = zoo(s)
    return {"seed": 1, "examples": [S.compact(e) for e in examples], "answers": answers, "cuda": False,
            "has_compute_gradients": False, "globals_changed_by_calls": [], "env": {}, "globals": {},
            "kernel_env_keys": []}


def fake(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    return SimpleNamespace(answer=answer)


def guarded(spec: dict[str, Any]) -> dict[str, Any]:
    """A guard that answers 0 on the empty batches, except with ignore_index 0 (it reads -100 there)."""
    ans = zoo(spec)
    if ans.get("ez") and spec["ignore_index"] != 0:
        return {"m": META, "l": (0.0).hex(), "f": 1, "z": 1, "g": {"hidden": "zero|1|1"}}
    return ans


EXAMPLES = [
    {**S.DEFAULTS, "shape": 3, "seed": 11, "labels": "all_masked", "ignore_index": 0, "dtype": "bfloat16",
     "route": "public", "overwrite": True},
    {**S.DEFAULTS, "shape": 2, "seed": 12, "labels": "first_only", "scaling": 4.0},
    {**S.DEFAULTS, "shape": 1, "seed": 13, "labels": "sparse", "bias": "trainable"},
]


def test_zoo_against_itself_passes_every_property_but_the_empty_answer() -> None:
    j = judge.Judge(raw_for(EXAMPLES), fake(zoo))
    results = {pid: j.property(pid) for pid in D.PROPERTY_IDS}
    assert {p for p, t in results.items() if t["outcome"] == "fail"} == {"d5-defined-empty-answer"}
    reason = results["d5-defined-empty-answer"]["reason"]
    assert reason.startswith('property "defined-empty-answer": bsz=1 qlen=2 hidden=4 vocab=8 dtype=float32')
    assert "labels=all_masked" in reason and "seed=0" in reason and "(2 of 2 examples fail)" in reason


def test_a_failure_shrinks_to_the_smallest_input_zoo_answered() -> None:
    j = judge.Judge(raw_for(EXAMPLES), fake(guarded))
    t = j.property("d5-defined-empty-answer")
    assert t["outcome"] == "fail" and t["details"]["failed"] == 1
    # the example had six non-default keywords on a 3x4 batch; the shrink keeps only the one that matters
    assert "bsz=1 qlen=2 hidden=4 vocab=8 dtype=float32 route=function labels=all_masked" in t["reason"]
    assert "ignore_index=0 seed=0: zoo loss nan (bits nan); guarded nan" in t["reason"]
    assert "overwrite" not in t["reason"] and "bfloat16" not in t["reason"]
    assert j.property("d1-same-answer")["outcome"] == "pass"


def test_an_empty_region_is_not_applicable_on_a_fixed_zoo() -> None:
    def fixed(spec: dict[str, Any]) -> dict[str, Any]:
        ans = zoo(spec)
        return {**ans, "l": (0.0).hex(), "f": 1, "z": 1} if ans.get("ez") else ans

    raw = raw_for(EXAMPLES)
    raw["answers"] = {k: ({**a, "l": (0.0).hex(), "f": 1, "z": 1} if a.get("ez") else a)
                      for k, a in raw["answers"].items()}
    t = judge.Judge(raw, fake(fixed)).property("d5-defined-empty-answer")
    assert t["outcome"] == "n/a" and "finite on every empty input" in t["reason"]


def step_ctx(raw: dict[str, Any] | None) -> Any:
    return SimpleNamespace(raw=raw, shared={}, device="cpu", torch_compile=False, cpu_mode="allow-cpu")


def test_no_oracle_fails_every_property_and_an_absent_kernel_makes_them_not_applicable() -> None:
    doc = judge.differential_step(step_ctx({}))
    assert [t["id"] for t in doc["tests"]] == list(D.PROPERTY_IDS)
    assert {t["outcome"] for t in doc["tests"]} == {"fail"}
    doc = judge.differential_step(step_ctx({D.SHARED_KEY: {"absent": "no module"}}))
    assert {t["outcome"] for t in doc["tests"]} == {"n/a"} and "no module" in doc["tests"][0]["reason"]


def test_import_time_env_judges_only_kernel_read_or_guard_named_keys() -> None:
    raw = {"env": {"HOME": "/root"}, "kernel_env_keys": ["UNSLOTH_CE_LOSS_N_CHUNKS"]}
    base = {"env": {"HOME": "/root", "USE_TF": "0", "UNSLOTH_CE_LOSS_N_CHUNKS": "1"}, "globals": {}}
    why, details = judge._import_env(raw, base)
    assert why == ("after import unsloth UNSLOTH_CE_LOSS_N_CHUNKS='1' (raw process: unset; zoo's kernel reads it)")
    assert details["import_diff_unjudged"] == ["USE_TF"]
    assert judge._import_env(raw, {**base, "env": {"HOME": "/root", "USE_TF": "0"}})[0] is None


def test_import_time_globals_any_difference_counts() -> None:
    raw = {"globals": {"cross_entropy_loss:_FUSED_CE_COMPILE_SUPPORTED": "None"}}
    why, _ = judge._import_globals(raw, {"globals": {"cross_entropy_loss:_FUSED_CE_COMPILE_SUPPORTED": "False"}})
    assert why == "after import unsloth cross_entropy_loss:_FUSED_CE_COMPILE_SUPPORTED: None -> False"
    assert judge._import_globals(raw, {"globals": dict(raw["globals"])})[0] is None


# ---------------------------------------------------------------- state descriptions


def test_descriptions_agree_whatever_the_order_or_the_address() -> None:
    assert state.describe({"b": 1, "a": 2}) == state.describe({"a": 2, "b": 1})
    assert state.describe(frozenset({"x", "y"})) == "frozenset{'x', 'y'}"
    assert "0x" not in state.describe({"f": judge.baseline_step})
    assert state.describe(judge.baseline_step).startswith(
        "function probes.checks.fused_ce_masked_nan.differential.judge.baseline_step judge.py:")
    assert state.describe(staticmethod(judge.baseline_step)).startswith("staticmethod(function ")
    assert state.describe(object()) == "<builtins.object>"


def test_environment_reads_are_found_in_source(tmp_path: Path) -> None:
    src = ('import os\nA = os.environ.get("A", None)\nB = os.getenv("B")\nC = os.environ["C"]\n'
           'D = "D" in os.environ\nos.environ["E"] = "1"\n')
    assert state._env_reads(ast.parse(src)) == {"A", "B", "C", "D"}
    f = tmp_path / "g.py"
    f.write_text('import os\nos.environ["MY_FLAG"] = "1"\nx = "lower"\nY = "OK"\n')
    assert state.named_keys([str(f)]) == {"MY_FLAG"}
    assert state.diff({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == {"b": ("2", "3"), "c": (None, "4")}


# ---------------------------------------------------------------- wiring, schema, imports


def test_the_steps_are_wired_around_the_other_unsloth_steps() -> None:
    assert [s.name for s in phases.RAW_STEPS] == ["runtime", "differential-oracle"]
    names = [s.name for s in phases.UNSLOTH_STEPS]
    assert names[0] == "differential-baseline" and names[-1] == "differential"
    assert phases.UNSLOTH_STEPS[-1].needs_raw and not phases.UNSLOTH_STEPS[0].needs_raw


def test_the_result_matches_the_check_schema() -> None:
    fragment = json.loads((CHECK / "schema.json").read_text(encoding="utf-8"))
    j = judge.Judge(raw_for(EXAMPLES), fake(guarded))
    doc = judge._document(j.raw, [j.property(p) for p in D.PROPERTY_IDS], variants=3, region_examples=2)
    jsonschema.Draft202012Validator(fragment["differential"]).validate(json.loads(json.dumps(doc)))
    jsonschema.Draft202012Validator(fragment["differential-baseline"]).validate({"env_keys": 3, "globals": 9})
    jsonschema.Draft202012Validator(fragment["differential-oracle"]).validate(
        {"seed": 1, "examples": 48, "answers": 700, "region_examples": 20, "zoo_raised": 9})


def test_judging_imports_no_torch() -> None:
    mods = ", ".join(f"probes.checks.fused_ce_masked_nan.differential.{m}"
                     for m in ("spec", "state", "properties", "judge", "oracle"))
    code = f"import sys, {mods}; assert 'torch' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- the guard diffs

GUARD_DIFFS = sorted(p.name for pattern in ("diff_*.diff", "correct_*.diff") for p in MUTANTS.glob(pattern))


@pytest.mark.skipif(shutil.which("git") is None, reason="git applies backport patches")
@pytest.mark.parametrize("name", GUARD_DIFFS)
def test_each_guard_diff_applies_to_the_shipped_guard(tmp_path: Path, name: str) -> None:
    (tmp_path / "unsloth").mkdir()
    target = tmp_path / "unsloth" / "fused_ce_guard.py"
    shutil.copy2(GUARD, target)
    proc = subprocess.run(["git", "apply", "-p1", str(MUTANTS / name)], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    tree = ast.parse(target.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    marker = f"CORRECT {name[8:-5]}" if name.startswith("correct") else f"MUTANT {name[5:-5]}:"
    assert doc.startswith(marker), doc[:80]
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"install", "uninstall", "is_installed", "zoo_needs_guard", "install_at_import"} <= defined


def test_the_empty_regions_reason_says_which_reference_the_guard_gave() -> None:
    # a fixed zoo's answer on the empty batches: 0, with a gradient (a NaN in a masked row) unlike the zero
    fixed = {"m": META, "l": (0.0).hex(), "f": 1, "z": 1, "g": {"hidden": "fx|0|0"}}
    raw = raw_for(EXAMPLES)
    raw["answers"] = {k: ({**a, "fx": fixed} if a.get("ez") else a) for k, a in raw["answers"].items()}

    def delegating(spec: dict[str, Any]) -> dict[str, Any]:
        return dict(fixed) if zoo(spec).get("ez") else zoo(spec)

    t = judge.Judge(raw, fake(delegating)).property("d5-defined-empty-answer")
    assert t["outcome"] == "pass", t["reason"]
    assert t["reason"] == "ok (2 examples; the guarded answer in the empty region matched the fixed zoo's answer 2)"
    assert t["details"]["references"] == {"fixed-zoo": 2}
    zero = {"m": META, "l": (0.0).hex(), "f": 1, "z": 1, "g": {"hidden": "zero|1|1"}}
    t = judge.Judge(raw, fake(lambda s: dict(zero) if zoo(s).get("ez") else zoo(s))).property(
        "d5-defined-empty-answer")
    assert t["reason"] == "ok (2 examples; the guarded answer in the empty region matched the defined zero 2)"


def test_an_excused_exception_is_named_with_why_in_the_passing_reason() -> None:
    shape_zero = {**S.DEFAULTS, "labels": "all_masked", "n_items": "t1", "count": "zero"}
    raw = raw_for([shape_zero])
    raw["answers"][S.key(shape_zero)] = {"ez": 1, "e": "RuntimeError: expected a scalar", "ca": "count-shape"}
    zero = {"m": META, "l": (0.0).hex(), "f": 1, "z": 1, "g": {"hidden": "zero|1|1"}}
    t = judge.Judge(raw, fake(lambda s: dict(zero) if s["n_items"] == "t1" else zoo(s))).property(
        "d4-same-exception")
    assert t["outcome"] == "pass" and t["details"]["excused_why"] == ["count-shape"], t
    assert "1 where zoo raised on a fully masked batch with a zero count for a reason outside the contract" in t[
        "reason"]
    # the input, in one line (the count in the spec's words here: this process has no torch)
    assert "no trainer sends it" in t["reason"] and "labels=all_masked n_items=t1/zero" in t["reason"]
    assert "zoo raises RuntimeError: expected a scalar" in t["reason"]
