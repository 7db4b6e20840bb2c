"""Faults injected below a guard, without torch or zoo: the injection itself on a module of ours, the judging
of one case from hand-written records (``probes.checks.faults``), and how the fused check's property and the
CPU check's test pick their target and judge with fake calls. Real kernels: tests/integration/
test_differential_guards.py (the wrong guards as backports)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from probes.checks import PhaseContext, faults
from probes.checks.cpu_ce_masked_nan import faults as cpu_faults
from probes.checks.cpu_ce_masked_nan import phases as cpu_phases
from probes.checks.fused_ce_masked_nan import differential as D
from probes.checks.fused_ce_masked_nan.differential import faults as fused_faults
from probes.checks.fused_ce_masked_nan.differential import judge
from probes.checks.fused_ce_masked_nan.differential import spec as S

OOM = f"RuntimeError: {faults.FAULTS['oom'][1]}"
TYPE = f"TypeError: {faults.FAULTS['type-error'][1]}"


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module of ours, ``fake_zoo_ops``: ``helper`` (its own), ``inner.step``, and a kernel that calls both."""
    m = types.ModuleType("fake_zoo_ops")
    m.helper = lambda x: x + 1  # type: ignore[attr-defined]
    m.inner = types.SimpleNamespace(step=lambda x: x * 2)  # type: ignore[attr-defined]
    m.kernel = lambda x: m.inner.step(m.helper(x))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_zoo_ops", m)
    return m


# ---------------------------------------------------------------- the injection


def test_an_injection_makes_the_kernel_raise_counts_and_restores(module: types.ModuleType) -> None:
    helper = module.helper
    captured = module.kernel  # what a guard holds: the injection reaches below it
    with faults.injected("fake_zoo_ops:helper", "oom") as fired:
        with pytest.raises(RuntimeError, match="CUDA out of memory") as info:
            captured(1)
        with pytest.raises(RuntimeError):
            captured(2)
    assert fired.count == 2 and faults.MARK in str(info.value)
    assert module.helper is helper and captured(1) == 4
    with faults.injected("fake_zoo_ops:inner.step", "type-error") as fired, pytest.raises(TypeError):
        captured(1)
    assert fired.count == 1 and captured(1) == 4


def test_an_injection_is_undone_when_the_call_raises_and_an_inherited_attribute_is_removed_again() -> None:
    class Base:
        def step(self) -> int:
            return 1

    class Kernel(Base):
        pass

    holder = types.ModuleType("fake_zoo_classes")
    holder.Kernel = Kernel  # type: ignore[attr-defined]
    sys.modules["fake_zoo_classes"] = holder
    try:
        with pytest.raises(RuntimeError), faults.injected("fake_zoo_classes:Kernel.step", "oom"):
            Kernel().step()
        assert "step" not in vars(Kernel) and Kernel().step() == 1
    finally:
        del sys.modules["fake_zoo_classes"]


def test_a_target_this_build_lacks_is_an_error_not_a_silent_injection(module: types.ModuleType) -> None:
    with pytest.raises(AttributeError):
        faults.resolve("fake_zoo_ops:nothing")
    with pytest.raises(ImportError):
        faults.resolve("no_such_zoo_module_here:helper")


# ---------------------------------------------------------------- one case

RAISED = {"e": OOM, "fired": 1}
ZERO = {"loss": "0", "defined_zero": True, "fired": 0}


@pytest.mark.parametrize(("kind", "empty", "zoo", "guarded", "outcome", "words"), [
    # zoo's own kernel must raise the injected fault, else the case says why it cannot judge
    ("oom", False, {"loss": "2.5", "fired": 0}, RAISED, "n/a", "zoo answered loss 2.5, and the injected function"),
    ("oom", False, {"e": TYPE, "fired": 1}, RAISED, "n/a", "zoo raised TypeError"),
    ("oom", False, {"e": "RuntimeError: no CUDA GPUs are available", "fired": 0}, RAISED, "n/a", "never ran"),
    # the same type passes, wherever it came from; another type fails
    ("oom", False, RAISED, {"e": "RuntimeError: wrapped", "fired": 1}, "pass", None),
    ("oom", False, RAISED, {"e": "ValueError: loss failed", "fired": 1}, "fail", "guarded raises ValueError"),
    # labels left: any answer fails, zero or not, fired or not
    ("oom", False, RAISED, {**ZERO, "fired": 1}, "fail", "labels are left"),
    ("type-error", False, {"e": TYPE, "fired": 1}, ZERO, "fail", "labels are left"),
    # every label masked, a zero count: the defined zero, but only when zoo's kernel never ran
    ("oom", True, RAISED, ZERO, "pass", None),
    ("oom", True, RAISED, {**ZERO, "fired": 1}, "fail", "swallowed"),
    ("oom", True, RAISED, {"loss": "nan", "defined_zero": False, "fired": 0}, "fail", "not the defined zero"),
    ("oom", True, RAISED, RAISED, "pass", None),
])
def test_one_case(kind: str, empty: bool, zoo: dict[str, Any], guarded: dict[str, Any], outcome: str,
                  words: str | None) -> None:
    got, why = faults.judge_case(kind, empty, zoo, guarded)
    assert got == outcome, why
    assert (why is None) == (words is None) and (words is None or words in str(why)), why


def row(case: str, kind: str, empty: bool, guarded: dict[str, Any]) -> dict[str, Any]:
    zoo = {"e": OOM if kind == "oom" else TYPE, "fired": 1}
    return {"case": case, "kind": kind, "empty": empty, "zoo": zoo, "guarded": guarded}


def test_the_summary_names_the_first_failure_and_counts() -> None:
    rows = [row("labels left", "oom", False, {**ZERO, "fired": 1}), row("labels left", "type-error", False,
            {"e": TYPE, "fired": 1}), row("all masked", "oom", True, ZERO),
            row("all masked", "type-error", True, {**ZERO, "fired": 1})]
    outcome, reason, details = faults.summarize("m:f", ["m:f"], rows)
    assert outcome == "fail" and reason.startswith("labels left, oom injected at m:f: zoo raises RuntimeError")
    assert reason.endswith("(2 of 4 cases fail)") and details["failing"] == ["labels left (oom)",
                                                                              "all masked (type-error)"]
    outcome, reason, _ = faults.summarize("m:f", ["m:f"], [rows[1], rows[2]])
    assert outcome == "pass" and "1 fully masked ones answered by the guard itself" in reason
    assert "RuntimeError and TypeError at m:f" in reason


def test_a_zoo_that_never_raises_under_the_injection_is_not_applicable_with_the_reason() -> None:
    r = {"case": "labels left", "kind": "oom", "empty": False, "zoo": {"loss": "1", "fired": 0}, "guarded": {}}
    outcome, reason, _ = faults.summarize(None, ["a:b", "c:d"], [r])
    assert outcome == "n/a" and reason.startswith("n/a: an injection at any of a:b, c:d does not make zoo's own")
    assert "never ran" in reason
    assert faults.summarize(None, [], [])[0] == "n/a"


# ---------------------------------------------------------------- the fused check's property


def test_the_fused_cases_have_labels_left_or_sit_in_the_empty_region_on_both_routes() -> None:
    cases = fused_faults.cases(has_compute_gradients=True, cuda=False)
    assert len(cases) == 2 * len(fused_faults.CASES)
    for name, s in cases:
        assert s == S.normalize(s, has_compute_gradients=True, cuda=False) and s["chunks"] != "default"
        assert s["route"] in name
        if name.startswith("labels left"):
            assert s["labels"] in ("dense", "sparse") and s["n_items"] in ("none", "t0") and s["count"] == "true"
        else:  # every label masked, what the trainer sends as the count: None or a 0-d tensor 0
            assert s["labels"] == "all_masked" and (s["n_items"], s["count"]) in (("none", "true"), ("tlong", "zero"))


def test_the_raw_side_takes_the_first_target_at_which_zoo_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    fires = {fused_faults.TARGETS[0]: False, fused_faults.TARGETS[1]: True}
    monkeypatch.setattr(faults, "resolve", lambda t: (None, t) if t in fires else (_ for _ in ()).throw(
        AttributeError(t)))
    monkeypatch.setattr(fused_faults, "record", lambda k, s, target, kind: (
        {"e": OOM, "fired": 1, "empty": False} if fires[target] else {"answer": {}, "fired": 0, "empty": False}))
    out = fused_faults.raw(None, False, False)
    assert out["target"] == fused_faults.TARGETS[1] and out["tried"] == list(fused_faults.TARGETS[:2])
    assert len(out["records"]) == 2 * len(fused_faults.CASES) * len(faults.FAULTS)
    fires[fused_faults.TARGETS[1]] = False
    assert fused_faults.raw(None, False, False)["target"] is None


def test_the_property_judges_guarded_records_at_zoos_target(monkeypatch: pytest.MonkeyPatch) -> None:
    zoo = {"target": "t:f", "tried": ["t:f"], "records": {
        f"{name}|{kind}": {"e": OOM if kind == "oom" else TYPE, "fired": 1, "empty": name.startswith("all")}
        for name, _ in fused_faults.cases(False, False) for kind in faults.FAULTS}}
    seen = []

    def swallow_runtime_error(kernel: Any, s: dict[str, Any], target: str, kind: str) -> dict[str, Any]:
        seen.append(target)
        if kind == "oom" and s["labels"] != "all_masked":
            return {"answer": {"l": "0x0.0p+0"}, "fired": 1, "empty": False}
        return {"e": OOM if kind == "oom" else TYPE, "fired": 1, "empty": False}

    monkeypatch.setattr(fused_faults, "record", swallow_runtime_error)
    t = fused_faults.judged(zoo, None, False, False, lambda ans: ("0", True))
    assert t["id"] == "d10-faults-propagate" and t["outcome"] == "fail" and set(seen) == {"t:f"}
    assert t["reason"].startswith('property "faults-propagate": labels left, no count, route function, oom')
    assert "(4 of 16 cases fail)" in t["reason"]
    none = fused_faults.judged({}, None, False, False, lambda ans: ("0", True))
    assert none["outcome"] == "n/a" and "recorded no fault injection" in none["reason"]


def test_the_judge_runs_the_property_among_the_others() -> None:
    raw = {"seed": 1, "examples": [], "answers": {}, "cuda": False, "has_compute_gradients": False}
    t = judge.Judge(raw, None).property(fused_faults.PROPERTY)
    assert D.PROPERTY_IDS[-1] == fused_faults.PROPERTY and t["outcome"] == "n/a"


# ---------------------------------------------------------------- the CPU check's test


def ctx(raw: dict[str, Any] | None) -> PhaseContext:
    return PhaseContext("cpu", False, "allow-cpu", None, {}, raw=raw)


def test_the_cpu_test_is_wired_after_the_raw_records() -> None:
    assert [s.name for s in cpu_phases.RAW_STEPS] == ["runtime", "faults"]
    behavior = next(s for s in cpu_phases.UNSLOTH_STEPS if s.name == "behavior")
    assert behavior.needs_raw and list(cpu_phases.TITLES)[-1] == cpu_faults.TEST_ID


def test_the_cpu_test_without_a_kernel_or_without_records(monkeypatch: pytest.MonkeyPatch) -> None:
    t = cpu_faults.test(ctx({cpu_faults.SHARED_KEY: {"absent": "ModuleNotFoundError: no unsloth_zoo.cpu"}}))
    assert t["outcome"] == "n/a" and "unsloth_zoo.cpu" in t["reason"]
    assert cpu_faults.test(ctx({}))["outcome"] == "fail"


def test_the_cpu_test_fails_a_call_that_swallows_zoos_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    records = {f"{name}|{kind}": {"e": OOM if kind == "oom" else TYPE, "fired": 1, "empty": name.startswith("all")}
               for name in cpu_faults.CASES for kind in faults.FAULTS}
    raw = {cpu_faults.SHARED_KEY: {"target": cpu_faults.TARGETS[0], "tried": [cpu_faults.TARGETS[0]],
                                   "records": records}}

    def guard(name: str, target: str, kind: str) -> dict[str, Any]:
        """Answers an all-masked batch with the count None itself; hands the rest to zoo, swallowing its OOM."""
        if name == "all masked, count None":
            return {"loss": 0.0, "defined_zero": True, "fired": 0, "empty": True}
        if kind == "oom":
            return {"loss": 0.0, "defined_zero": True, "fired": 1, "empty": False}
        return {"e": TYPE, "fired": 1, "empty": False}

    monkeypatch.setattr(cpu_faults, "record", guard)
    raw[cpu_faults.SHARED_KEY]["records"] = dict(sorted(records.items()))  # as JSON hands them on: sorted keys
    t = cpu_faults.test(ctx(raw))
    assert t["id"] == "c6-faults-propagate" and t["outcome"] == "fail", t
    assert t["reason"].startswith("labels left, no count, oom") and cpu_faults.TARGETS[0] in t["reason"]
    assert "(3 of 8 cases fail)" in t["reason"]
    monkeypatch.setattr(cpu_faults, "record", lambda name, target, kind: {
        "e": OOM if kind == "oom" else TYPE, "fired": 1, "empty": False})
    assert cpu_faults.test(ctx(raw))["outcome"] == "pass"
