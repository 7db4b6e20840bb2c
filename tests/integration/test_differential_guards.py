"""Hand-written guards, built as real backports of unsloth on a vulnerable zoo, judged by the differential suite.

Each wrong guard in tests/mutants/diff_*.diff is the shipped guard plus one plausible mistake aimed at one
property of the ``differential`` step (tests/mutants/README.md); its cell must show that property failing
with a minimal input in the reason. The shipped guard, an independently written second guard
(``correct_second_guard.diff``) and one that hands the empty batch to zoo with a count of 1, as zoo's own
fix does (``correct_delegate_count_one.diff``), must pass every property, each by the empty region's
reference it gives (the defined zero, or the fixed zoo's answer); and the unguarded build must pass every
property but the defined empty answer (zoo gives NaN there: the suite checking itself). A third party's
guard without the protocol hooks (tests/backports/hookless-guard) answers 0 where zoo raises only for a
count shape no trainer sends: it is judged right on the vulnerable zoo and stays out on the fixed one.
CI builds one wrong guard per property (``REPEATS`` are left to ``pytest --all-cells``).

Fault injection (``d10-faults-propagate``; the CPU check's ``c6-faults-propagate``): zoo's kernel is made to
raise below the guard. A guard that turns zoo's RuntimeError into a zero loss (``diff_catch_runtime_error``,
and for the CPU kernel tests/backports/cpu-ce-catch-runtime-error on the zoo that has one) passes every other
test, so only the injection makes it ``broken``; the ``except Exception`` variant (``diff_swallow_errors``)
fails it too, and the right guards pass it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import ROOT, UNSLOTH, explain, run_nox, sampled

pytestmark = pytest.mark.integration
MUTANTS = ROOT / "tests" / "mutants"
GUARD = ROOT / "matrix" / "backports" / "unsloth-guard"
FUSED = "fused-ce-masked-nan"
ZOO = "z-vuln"
PROPERTIES = ("d1-same-answer", "d2-same-gradients", "d3-same-meta", "d4-same-exception",
              "d5-defined-empty-answer", "d6-non-finite-stays", "d7-no-side-effects-env",
              "d8-no-side-effects-globals", "d9-caller-tensors-unchanged", "d10-faults-propagate")
FAULTS = "d10-faults-propagate"
CPU = "cpu-ce-masked-nan"
CPU_GUARD = ROOT / "tests" / "backports" / "cpu-ce-catch-runtime-error"

# wrong guard -> (the property that must fail, words its one-line reason must carry)
WRONG = {
    "diff_mask_binary": ("d1-same-answer", "mask=values"),
    "diff_grad_scrub": ("d2-same-gradients", "nonfinite="),
    "diff_bf16_zero": ("d3-same-meta", "guarded bfloat16"),
    "diff_shape_one": ("d3-same-meta", "shape (1,)"),
    "diff_swallow_errors": ("d4-same-exception", "zoo raises"),
    "diff_ignore_falsy": ("d5-defined-empty-answer", "ignore_index=0"),
    "diff_hidden_grad_only": ("d5-defined-empty-answer", "hidden_grad=False"),
    "diff_zero_0d_only": ("d5-defined-empty-answer", "n_items=0"),
    "diff_nan_scrub": ("d6-non-finite-stays", "nonfinite="),
    "diff_env_at_install": ("d7-no-side-effects-env", "UNSLOTH_FUSED_CE_COMPILE_DISABLE"),
    "diff_compile_flag": ("d8-no-side-effects-globals", "_FUSED_CE_COMPILE_SUPPORTED"),
    "diff_labels_in_place": ("d9-caller-tensors-unchanged", "caller's labels"),
    "diff_sentinel_always_ignored": ("d4-same-exception", "labels=sentinel_-100"),
    "diff_catch_runtime_error": (FAULTS, "labels left"),
}
CORRECT = ("shipped", "correct_second_guard", "correct_delegate_count_one")
# CI builds one wrong guard per property (and both fault-injection guards): these four repeat a property another
# wrong guard already fails, at about 45 s of a busy host each. `pytest --all-cells` builds all fourteen.
REPEATS = ("diff_shape_one", "diff_sentinel_always_ignored", "diff_hidden_grad_only", "diff_zero_0d_only")


def chosen(config: pytest.Config) -> list[str]:
    """The wrong guards this run builds: every one with ``--all-cells``, else one per property."""
    return sampled(config, WRONG, REPEATS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "wrong" in metafunc.fixturenames:
        metafunc.parametrize("wrong", chosen(metafunc.config))
HOOKLESS = ROOT / "tests" / "backports" / "hookless-guard"
FIXED = "z-fixed"


def build_name(name: str) -> str:
    return "g-" + name.removeprefix("diff_").removeprefix("correct_").replace("_", "-")


def guard_backport(base: Path, name: str) -> None:
    """The guard backport's manifest and files, plus the diff as a [[patch]] (none for the shipped guard)."""
    d = base / "backports" / name
    shutil.copytree(GUARD, d)
    if name != "shipped":
        shutil.copy2(MUTANTS / f"{name}.diff", d / "guard.diff")
        with (d / "backport.toml").open("a") as fh:
            fh.write('\n[[patch]]\nfile = "guard.diff"\n')


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    base = tmp_path_factory.mktemp("differential")
    text = f"""
[options]
train = false

[[build]]
name = "u"
package = "unsloth"
source = "pypi"
version = "{UNSLOTH}"

[[build]]
name = "{ZOO}"
package = "unsloth_zoo"
source = "pypi"
version = "2026.9.3"

[[build]]
name = "{FIXED}"
package = "unsloth_zoo"
source = "pypi"
version = "2026.10.9"

[[build]]
name = "g-hookless"
package = "unsloth"
source = "backport"
base = "u"
backport = "backports/hookless-guard"

[[build]]
name = "g-cpu-catch"
package = "unsloth"
source = "backport"
base = "u"
backport = "backports/cpu-ce-catch-runtime-error"
"""
    shutil.copytree(HOOKLESS, base / "backports" / "hookless-guard")
    shutil.copytree(CPU_GUARD, base / "backports" / "cpu-ce-catch-runtime-error")
    include = [f'{{ unsloth = "u", zoo = "{ZOO}" }}', f'{{ unsloth = "g-hookless", zoo = "{ZOO}" }}',
               f'{{ unsloth = "g-hookless", zoo = "{FIXED}" }}', f'{{ unsloth = "g-cpu-catch", zoo = "{FIXED}" }}']
    for name in (*chosen(request.config), *CORRECT):
        guard_backport(base, name)
        text += (f'\n[[build]]\nname = "{build_name(name)}"\npackage = "unsloth"\nsource = "backport"\n'
                 f'base = "u"\nbackport = "backports/{name}"\n')
        include.append(f'{{ unsloth = "{build_name(name)}", zoo = "{ZOO}" }}')
    text += "\n[pairs]\nproduct = false\ninclude = [\n  " + ",\n  ".join(include) + ",\n]\n"
    (base / "guards.toml").write_text(text)
    out = base / "out"
    # The gate's exit code is not the question here (the unguarded cell is missing, the wrong guards broken).
    proc = run_nox(base / "envs", "-j", "2", "-s", "matrix", out=out, matrix=base / "guards.toml")
    # A cell whose session failed (exit 2) aborts the report: every cell's test would error on a missing file.
    assert proc.returncode in (0, 1) and (out / "report.json").is_file(), explain(proc)
    found = {}
    for path in (out / "cells").glob("*/cell.json"):
        cell = json.loads(path.read_text())
        found[cell["cell_id"]] = cell
    for c in json.loads((out / "report.json").read_text())["cells"]:
        found[c["cell_id"]]["verdict"] = c["verdicts"][FUSED]
        found[c["cell_id"]]["cpu_verdict"] = c["verdicts"][CPU]
    return found


def differential(cells: dict[str, dict[str, Any]], unsloth: str, zoo: str = ZOO) -> dict[str, dict[str, Any]]:
    cell = cells[f"{unsloth}__{zoo}"]
    assert cell.get("error") is None, cell.get("error")
    step = next(s for s in cell["checks"][FUSED]["steps"] if s["name"] == "differential")
    assert step["status"] == "ok", step
    result = step["result"]
    assert result["examples"] >= 1 and isinstance(result["seed"], int)
    return {t["id"]: t for t in result["tests"]}


def test_a_wrong_guard_fails_its_property_with_a_minimal_input(cells: dict[str, dict[str, Any]], wrong: str) -> None:
    name = wrong
    prop, words = WRONG[name]
    tests = differential(cells, build_name(name))
    t = tests[prop]
    assert t["outcome"] == "fail", (prop, t["reason"])
    assert t["reason"].startswith(f'property "{prop.split("-", 1)[1]}": '), t["reason"]
    assert words in t["reason"], t["reason"]
    if prop == FAULTS:  # zoo's own inputs, named by case and where the fault was injected
        assert "injected at torch.func:grad_and_value" in t["reason"], t["reason"]
    elif prop not in ("d7-no-side-effects-env", "d8-no-side-effects-globals"):
        assert "bsz=" in t["reason"] and "seed=" in t["reason"], t["reason"]  # the minimal input, in one line
    verdict = cells[f"{build_name(name)}__{ZOO}"]["verdict"]
    assert verdict["guard"] == "broken" and prop in verdict["guard_reason"], verdict


@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_guard_passes_every_property(cells: dict[str, dict[str, Any]], name: str) -> None:
    tests = differential(cells, build_name(name))
    assert list(tests) == list(PROPERTIES)
    assert {k: t["reason"] for k, t in tests.items() if t["outcome"] != "pass"} == {}


# guard -> the empty region's references its answers matched (d5's reason says which), and which it never does
REFERENCES = {
    # answers 0 with zero gradients itself: where a NaN in a masked row reaches a fixed zoo's gradients, only
    # the defined zero
    "shipped": ("the defined zero", "the fixed zoo's answer"),
    # zoo itself computes the answer on zero inputs: the defined zero too
    "correct_second_guard": ("the defined zero", "the fixed zoo's answer"),
    # zoo with a count of 1 on the caller's inputs is what the fixed zoo computes: its NaN gradient included
    "correct_delegate_count_one": ("the fixed zoo's answer", "the defined zero "),
}


@pytest.mark.parametrize("name", CORRECT)
def test_the_empty_region_says_which_reference_a_correct_guard_gave(cells: dict[str, dict[str, Any]],
                                                                    name: str) -> None:
    t = differential(cells, build_name(name))["d5-defined-empty-answer"]
    given, never = REFERENCES[name]
    assert t["outcome"] == "pass" and "the guarded answer in the empty region matched" in t["reason"], t
    assert given in t["reason"] and never not in t["reason"], t["reason"]
    refs = t["details"]["references"]
    assert sum(refs.values()) == t["details"]["examples"], refs


def test_a_hookless_third_party_guard_is_judged_right(cells: dict[str, dict[str, Any]]) -> None:
    # It answers 0 with zero gradients for tensor([0.]) on an all-masked batch, where zoo 2026.9.3 raises (it
    # rejects that count's shape on every batch): outside the contract, so same-exception passes and says why.
    tests = differential(cells, "g-hookless")
    assert {k: t["reason"] for k, t in tests.items() if t["outcome"] != "pass"} == {}
    d4 = tests["d4-same-exception"]
    assert d4["details"]["excused_why"] == ["count-shape"], d4
    assert "n_items=tensor([0.])" in d4["reason"] and "no trainer sends it" in d4["reason"], d4["reason"]
    vuln, fixed = cells[f"g-hookless__{ZOO}"]["verdict"], cells[f"g-hookless__{FIXED}"]["verdict"]
    assert vuln["guard"] == "activates", vuln["guard_reason"]
    # on the fixed zoo it probes, finds no NaN and leaves zoo's forward alone (no protocol module to find)
    assert fixed["guard"] == "not-needed", fixed["guard_reason"]
    guard = next(s for s in cells[f"g-hookless__{FIXED}"]["checks"][FUSED]["steps"] if s["name"] == "guard")
    assert guard["result"]["forward"]["original"] is True


def test_zoo_itself_passes_everything_but_the_empty_answer(cells: dict[str, dict[str, Any]]) -> None:
    tests = differential(cells, "u")
    failing = {k for k, t in tests.items() if t["outcome"] != "pass"}
    assert failing == {"d5-defined-empty-answer"}, {k: tests[k]["reason"] for k in failing}
    assert "zoo loss nan" in tests["d5-defined-empty-answer"]["reason"]


def test_a_guard_that_hands_zoo_a_safe_count_is_not_failed_for_zoos_own_accelerator_query(
        cells: dict[str, dict[str, Any]]) -> None:
    # The delegating guard lets zoo read its default target_gb=None on test 10's defaults route, which asks the
    # accelerator for free memory: on this CPU host zoo raises there, with the guard's count of 1 in its frame.
    # That is zoo's own query, not the guard's fault (issue 20: a correct guard came out broken on CPU for it).
    cell = cells[f"{build_name('correct_delegate_count_one')}__{ZOO}"]
    behavior = next(s for s in cell["checks"][FUSED]["steps"] if s["name"] == "behavior")["result"]
    t10 = next(t for t in behavior["tests"] if t["id"].startswith("10"))
    assert t10["outcome"] == "pass", t10
    assert str(t10["details"]["first_only_defaults_omitted"]).startswith("n/a: this host cannot run zoo's defaults")


def suite_outcomes(cell: dict[str, Any], check: str) -> dict[str, str]:
    """Every behaviour and differential test of ``check`` in ``cell``: id -> outcome."""
    out = {}
    for s in cell["checks"][check]["steps"]:
        if s["name"] in ("behavior", "differential") and s["status"] == "ok":
            out.update({t["id"]: t["outcome"] for t in s["result"]["tests"]})
    return out


def test_only_fault_injection_catches_a_guard_that_turns_zoos_runtime_error_into_a_zero(
        cells: dict[str, dict[str, Any]]) -> None:
    # The guard differs from the shipped one only where zoo's forward raises a RuntimeError on a batch with
    # labels left; no input of the suites makes zoo raise one on this host, so before d10 it activated.
    cell = cells[f"{build_name('diff_catch_runtime_error')}__{ZOO}"]
    outcomes = suite_outcomes(cell, FUSED)
    assert {k for k, v in outcomes.items() if v == "fail"} == {FAULTS}, outcomes
    t = differential(cells, build_name("diff_catch_runtime_error"))[FAULTS]
    assert "RuntimeError: CUDA out of memory" in t["reason"] and "guarded answers loss 0" in t["reason"], t
    # the TypeError passes through: only the 2 labels-left cases x 2 routes with the OOM fail
    assert t["details"]["failed"] == 4 and all("oom" in f for f in t["details"]["failing"]), t["details"]
    assert cell["verdict"]["guard"] == "broken" and FAULTS in cell["verdict"]["guard_reason"], cell["verdict"]


def test_the_except_exception_variant_fails_fault_injection_too(cells: dict[str, dict[str, Any]]) -> None:
    t = differential(cells, build_name("diff_swallow_errors"))[FAULTS]
    assert t["outcome"] == "fail" and "labels left" in t["reason"], t
    # both faults on both labels-left cases and both routes; the fully masked ones it answers itself
    assert t["details"]["failed"] == 8, t["details"]


def test_right_guards_pass_fault_injection_each_its_own_way(cells: dict[str, dict[str, Any]]) -> None:
    # The shipped guard answers a fully masked batch before zoo's kernel runs (nothing to swallow); the
    # delegating one hands it to zoo, which raises, and raises alike; the unguarded zoo raises everywhere.
    shipped = differential(cells, build_name("shipped"))[FAULTS]
    assert shipped["outcome"] == "pass" and "8 fully masked ones answered by the guard itself" in shipped["reason"]
    delegating = differential(cells, build_name("correct_delegate_count_one"))[FAULTS]
    assert delegating["outcome"] == "pass" and "answered by the guard itself" not in delegating["reason"]
    for t in (shipped, delegating, differential(cells, "u")[FAULTS]):
        assert t["details"]["judged"] == 16 and t["details"]["target"] == "torch.func:grad_and_value", t


def test_a_cpu_kernel_guard_that_swallows_zoos_runtime_error_is_broken_by_its_fault_test(
        cells: dict[str, dict[str, Any]]) -> None:
    cell = cells[f"g-cpu-catch__{FIXED}"]
    outcomes = suite_outcomes(cell, CPU)
    assert {k for k, v in outcomes.items() if v == "fail"} == {"c6-faults-propagate"}, outcomes
    c6 = next(t for s in cell["checks"][CPU]["steps"] if s["name"] == "behavior" for t in s["result"]["tests"]
              if t["id"] == "c6-faults-propagate")
    assert "unsloth_zoo.cpu.ops:_softmax_without_collapse" in c6["reason"], c6
    # the OOM on both labels-left batches, and on the all-masked one whose count tensor(0) it hands to zoo (it
    # answers only the count None itself); the TypeError passes through everywhere
    assert sorted(c6["details"]["failing"]) == ["all masked, count tensor(0) (oom)", "labels left, no count (oom)",
                                                "labels left, their count (oom)"], c6["details"]
    verdict = cell["cpu_verdict"]
    assert verdict["guard"] == "broken" and "c6-faults-propagate" in verdict["guard_reason"], verdict
    # the same zoo without that guard: its own kernel, made to raise, raises through the module attribute
    plain = cells[f"g-hookless__{FIXED}"]
    assert suite_outcomes(plain, CPU)["c6-faults-propagate"] == "pass"
    raw = next(s for s in plain["checks"][CPU]["steps"] if s["name"] == "faults")["result"]
    assert raw["zoo_raised"] == raw["cases"] == 8, raw
    # zoo 2026.9.3 has no CPU kernel: the test says so
    assert suite_outcomes(cells[f"u__{ZOO}"], CPU)["c6-faults-propagate"] == "n/a"
