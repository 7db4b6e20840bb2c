"""grpo-normalizer-nan without torch: the static detector on sources of our own making (the shapes zoo has
had and the shapes a contributor might write), the hand-off reader, the runtime judgement, the suite's
comparison and the verdict from hand-written evidence. The real releases, guards and runs are in
tests/integration/test_grpo_matrix.py."""

from __future__ import annotations

from typing import Any

import pytest

from probes.checks.grpo_normalizer_nan import handoff, judge, static, suite
from probes.checks.grpo_normalizer_nan import verdict as grpo_verdict
from probes.checks.vocabulary import GuardState, Reach, ZooState

HEAD = '''
def grpo_compute_loss(ref, new, old, sampling, input_ids, mask, beta, advantages, **kwargs):
    loss_type = kwargs.get("loss_type", "grpo")
    num_items_in_batch = kwargs.get("num_items_in_batch", None)
    num_processes = kwargs.get("num_processes", 1)
    steps = kwargs.get("steps_per_generation", None)
    loss_i = new * advantages
'''
GRPO = '''
    if loss_type == "grpo":
        loss = ((loss_i * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
'''
LUSPO = '''
    elif loss_type == "luspo":
        normalizer = current_gradient_accumulation_steps
        loss = loss_i.sum() / normalizer
'''
DR = '''
    elif loss_type == "dr_grpo":
        loss = (loss_i * mask).sum() / (loss_i.size(0) * max_completion_length)
'''


def src(dapo: str) -> str:
    return HEAD + GRPO + dapo + LUSPO + DR


BARE = '''
    elif loss_type in ["cispo", "dapo", "vespo"]:
        normalizer = num_items_in_batch / num_processes
        loss = (loss_i * mask).sum() / normalizer
'''
FLOORED_BOTH_ARMS = '''
    elif loss_type in ["cispo", "dapo", "vespo"]:
        if torch.is_tensor(num_items_in_batch):
            normalizer = num_items_in_batch.clamp(min = 1.0) / num_processes
        else:
            normalizer = max(float(num_items_in_batch), 1.0) / num_processes
        if steps:
            normalizer = normalizer * 2 / steps
        loss = (loss_i * mask).sum() / normalizer
'''
ONE_ARM = FLOORED_BOTH_ARMS.replace("max(float(num_items_in_batch), 1.0)", "float(num_items_in_batch)")
INLINE_BARE = '''
    elif loss_type == "dapo":
        loss = (loss_i * mask).sum() / num_items_in_batch
'''
FLOORED_AT_TOP = '''
    elif loss_type == "dapo":
        loss = (loss_i * mask).sum() / num_items_in_batch
'''
TESTED = '''
    elif loss_type == "dapo":
        if num_items_in_batch == 0:
            loss = loss_i.sum() * 0
        else:
            loss = (loss_i * mask).sum() / num_items_in_batch
'''
HELPER = '''
    elif loss_type == "dapo":
        loss = (loss_i * mask).sum() / safe_count(num_items_in_batch)
'''
WHERE = '''
    elif loss_type == "dapo":
        normalizer = torch.where(num_items_in_batch == 0, 1.0, num_items_in_batch)
        loss = (loss_i * mask).sum() / normalizer
'''


@pytest.mark.parametrize(("body", "verdict", "words"), [
    (BARE, "vulnerable", "loss_type cispo/dapo/vespo"),
    (INLINE_BARE, "vulnerable", "loss_type dapo"),
    (FLOORED_BOTH_ARMS, "fixed", "floors it"),
    (ONE_ARM, "vulnerable", "no floor"),
    (TESTED, "unknown", "test the count's value"),
    (HELPER, "unknown", "does not follow"),
    (WHERE, "unknown", "does not follow"),
    ("", "absent", "never divides"),
])
def test_static_reads_each_shape(body: str, verdict: str, words: str) -> None:
    r = static.analyze_source(src(body))
    assert r["verdict"] == verdict, r
    assert words in r["reason"]


def test_static_floored_reassignment_of_the_count_is_fixed() -> None:
    head = HEAD.replace('    loss_i = new', '    num_items_in_batch = max(num_items_in_batch, 1)\n    loss_i = new')
    r = static.analyze_source(head + GRPO + FLOORED_AT_TOP)
    assert r["verdict"] == "fixed", r


def test_static_another_arms_normalizer_does_not_leak_into_this_one() -> None:
    # luspo's `normalizer` (no count) comes after dapo's bare one: dapo stays vulnerable, luspo is not named.
    r = static.analyze_source(src(BARE))
    assert r["verdict"] == "vulnerable" and "luspo" not in r["reason"] and "dr_grpo" not in r["reason"]


def test_static_absent_without_the_function() -> None:
    assert static.analyze_source("def other():\n    pass\n")["verdict"] == "absent"
    assert static.analyze_source("def (:")["verdict"] == "unknown"


COMPUTE = '''
def compute_loss(self, model, inputs, return_outputs = False, num_items_in_batch = None):
    prompt_ids = inputs["prompt_ids"]
    num_items_in_batch = inputs.get("num_items_in_batch", None)
{guard}    current_gradient_accumulation_steps = 1
    input_ids = prompt_ids
    loss = grpo_accumulated_loss(self, input_ids, num_items_in_batch = {passes}, loss_type = self.args.loss_type)
    return loss
'''


def test_handoff_plain_when_unsloth_passes_the_count_as_read() -> None:
    h = handoff.read(COMPUTE.format(guard="", passes="num_items_in_batch"))
    assert h.found and h.plain and h.passes == ["num_items_in_batch"] and h.statements == []


def test_handoff_sees_a_guard_after_the_read_and_in_the_argument() -> None:
    guard = ("    from unsloth.x import floor as _f\n"
             "    if self.args.loss_type == 'dapo':\n        num_items_in_batch = _f(num_items_in_batch)\n")
    h = handoff.read(COMPUTE.format(guard=guard, passes="num_items_in_batch"))
    assert h.found and not h.plain and len(h.statements) == 2  # the import and the if, not the unrelated line
    h2 = handoff.read(COMPUTE.format(guard="", passes="max(num_items_in_batch, 1)"))
    assert h2.found and not h2.plain and h2.passes == ["max(num_items_in_batch, 1)"]


def test_handoff_not_found_without_a_read_or_a_call() -> None:
    assert not handoff.read(COMPUTE.replace('inputs.get("num_items_in_batch", None)', "None").format(
        guard="", passes="num_items_in_batch")).found
    assert not handoff.read("def compute_loss(self):\n    num_items_in_batch = inputs.get('n')\n").found


def entry(depends: bool | None, zero_ok: bool = True) -> dict[str, Any]:
    dep = {"error": "ValueError: Unknown loss type"} if depends is None else {"depends": depends}
    out = {"loss": 0.0 if zero_ok else "nan", "loss_finite": zero_ok, "grads_finite": True}
    return {"dependence": dep, "zero": {"tensor(0.)": out, "0": out}}


def probe(dapo_ok: bool, kl_ok: bool = True, vespo: bool | None = True) -> dict[str, Any]:
    return {"loss_types": {"grpo": entry(False), "dapo": entry(True, dapo_ok), "vespo": entry(vespo, dapo_ok)},
            "kl_one_masked": {"kl": 0.1 if kl_ok else "nan", "kl_finite": kl_ok}}


def test_judge_vulnerable_names_types_counts_and_that_gradients_are_finite() -> None:
    verdict, reason = judge.judge(probe(False, kl_ok=False))
    assert verdict == "vulnerable"
    assert "dapo (count 0)" in reason and "vespo (count tensor(0.))" in reason and "gradients finite" in reason
    assert "controls (the count is no divisor): grpo" in reason and "kl goes NaN" in reason


def test_judge_fixed_absent_and_not_taken() -> None:
    assert judge.judge(probe(True))[0] == "fixed"
    assert "not taken by this zoo: vespo" in judge.judge(probe(True, vespo=None))[1]
    none = {"loss_types": {"grpo": entry(False), "dapo": entry(False)}, "kl_one_masked": {}}
    assert judge.judge(none)[0] == "absent"


NAN = {"loss": "nan", "loss_finite": False, "grads_finite": True, "loss_hex": "nan", "grad_hex": ["0x0.0p+0"],
       "kl": None}
ZERO = {"loss": 0.0, "loss_finite": True, "grads_finite": True, "loss_hex": "0x0.0p+0", "grad_hex": ["0x0.0p+0"],
        "kl": None}
POS = {"loss": 0.5, "loss_finite": True, "grads_finite": True, "loss_hex": "0x1.0p-1", "grad_hex": ["0x1.0p-2"],
       "kl": None}


def case(test: str) -> suite.Case:
    return suite.Case(test, "dapo", (False, False), "tensor(0.)")


def test_suite_allows_a_difference_only_in_zero_over_zero() -> None:
    assert suite.compare(case("s1-zero-all-masked"), ZERO, NAN) == ""  # 0 / 0 became 0.0: right
    assert "still not finite" in suite.compare(case("s1-zero-all-masked"), NAN, NAN)
    assert "not 0.0" in suite.compare(case("s1-zero-all-masked"), POS, NAN)
    assert suite.compare(case("s4-nan-stays"), ZERO, NAN)  # a NaN that is not 0 / 0 must stay
    assert suite.compare(case("s2-positive-counts"), {**POS, "loss_hex": "0x1.1p-1"}, POS)
    assert suite.compare(case("s2-positive-counts"), POS, POS) == ""
    assert suite.compare(case("s3-none-count"), {"error": "TypeError"}, {"error": "TypeError"}) == ""


def test_suite_tests_fail_the_group_of_a_wrong_case() -> None:
    oracle = {c.key: (NAN if c.test == "s1-zero-all-masked" and c.loss_type in ("dapo", "cispo", "vespo")
                      else POS) for c in suite.cases()}
    right = {k: [ZERO if v is NAN else v] for k, v in oracle.items()}
    assert all(t["outcome"] == "pass" for t in suite.tests(oracle, {"r": right}))
    dapo_only = {k: [ZERO if v is NAN and k.startswith("dapo") else v] for k, v in oracle.items()}
    outcomes = {t["id"]: t["outcome"] for t in suite.tests(oracle, {"r": dapo_only})}
    assert outcomes["s1-zero-all-masked"] == "fail" and outcomes["s2-positive-counts"] == "pass"


def section(zoo: str, *, plain: bool = True, original: bool = True, suite_ok: bool = True,
            route_ok: bool = True, train: dict[str, Any] | None = None,
            unsloth: dict[str, Any] | None = None) -> dict[str, Any]:
    route = {"loss": 0.0 if route_ok else "nan", "loss_finite": route_ok, "grads_finite": True}
    tests = [{"id": t, "outcome": "pass" if suite_ok or t != "s2-positive-counts" else "fail"} for t in suite.TITLES]
    steps = [
        {"name": "runtime", "status": "ok", "result": {"verdict": zoo, "reason": f"runtime {zoo}"}},
        {"name": "guard", "status": "ok", "result": {
            "kernel": "present", "original": original, "routes": {"r": route},
            "handoff": {"found": True, "plain": plain, "statements": [] if plain else ["n = floor(n)"],
                        "passes": ["num_items_in_batch"]}}},
        {"name": "behavior", "status": "ok", "result": {"tests": tests}},
    ]
    if train is not None:
        steps.append({"name": "train", "status": "ok", "result": train})
    if unsloth is not None:
        steps.insert(1, {"name": "unsloth_train", "status": "ok", "result": unsloth})
    return {"static": {"verdict": zoo, "reason": f"static {zoo}"}, "steps": steps}


LATENT_RUN = {"outcome": "clean", "reason": "clean", "kernel_calls": 3, "masked_inputs": ["tensor(4)"],
              "versions": {"transformers": "5.17.0", "trl": "0.29.1"}}
EXPOSED_RUN = {"outcome": "nan-logged", "reason": "logged loss NaN from step 1", "first_nan_step": 1,
               "kernel_calls": 3, "masked_inputs": ["tensor(0)"], "versions": {"trl": "1.13.0"}}


@pytest.mark.parametrize(("evidence", "state"), [
    (section("vulnerable", route_ok=False), GuardState.MISSING),
    (section("vulnerable", plain=False), GuardState.ACTIVATES),
    (section("vulnerable", plain=False, suite_ok=False), GuardState.BROKEN),
    (section("vulnerable", plain=False, route_ok=False), GuardState.BROKEN),
    (section("vulnerable", original=False), GuardState.ACTIVATES),
    (section("fixed"), GuardState.NOT_NEEDED),
    (section("fixed", plain=False), GuardState.NO_OPS),
    (section("fixed", plain=False, suite_ok=False), GuardState.BROKEN),
    (section("fixed", original=False), GuardState.BROKEN),
    (section("absent"), GuardState.NOT_NEEDED),
])
def test_guard_states(evidence: dict[str, Any], state: GuardState) -> None:
    assert grpo_verdict.classify(evidence, {}).guard is state


def test_missing_reach_is_decided_by_the_count_the_stack_sent() -> None:
    latent = grpo_verdict.classify(section("vulnerable", route_ok=False, train=LATENT_RUN), {})
    assert latent.zoo is ZooState.VULNERABLE and latent.guard is GuardState.MISSING
    assert latent.reach is Reach.LATENT and "TRL 0.29.1" in latent.reach_reason
    assert "num_items_in_batch=tensor(4)" in latent.reach_reason
    exposed = grpo_verdict.classify(section("vulnerable", route_ok=False, train=EXPOSED_RUN), {})
    assert exposed.reach is Reach.EXPOSED and "step 1" in exposed.guard_reason
    unknown = grpo_verdict.classify(section("vulnerable", route_ok=False), {})
    assert unknown.reach is Reach.UNKNOWN


def test_a_stack_that_cannot_import_grpotrainer_is_latent_only_where_its_trl_counts_before_the_mask() -> None:
    """TRL 0.24.0 under transformers 5 imports mergekit with its GRPOTrainer: the check's run cannot run on such a
    stack. Its TRL counts
    before the truncation mask (< 1.9), so the kernel's 0 / 0 is not reached there: latent; a TRL >= 1.9
    stack that cannot run would count after the mask, so that says nothing: unknown (treated as exposed)."""
    from probes.checks.grpo_normalizer_nan.verdict import _reach
    from probes.checks.vocabulary import GuardState, Reach

    why = "this stack cannot import TRL's GRPOTrainer without unsloth (ModuleNotFoundError: No module named 'mergekit')"
    old = {"unavailable": why, "versions": {"trl": "0.24.0"}}
    r, text = _reach(GuardState.MISSING, None, old)
    assert r is Reach.LATENT and "mergekit" in text and "TRL 0.24.0" in text
    for trl in ("1.9.0", "1.15.0", None):
        assert _reach(GuardState.MISSING, None, {"unavailable": why, "versions": {"trl": trl}})[0] is Reach.UNKNOWN
    # a passing state has no reach, and without the marker the generic rule stands (no run: unknown)
    assert _reach(GuardState.NOT_NEEDED, None, old)[0] is None
    assert _reach(GuardState.MISSING, None, {"versions": {"trl": "0.24.0"}})[0] is Reach.UNKNOWN


def test_a_trl_without_the_dapo_options_is_a_route_that_does_not_exist() -> None:
    import dataclasses

    from probes.checks.grpo_normalizer_nan.train import RouteUnavailable, _config
    from probes.training import NotApplicable

    @dataclasses.dataclass
    class OldConfig:  # a GRPOConfig from before loss_type
        output_dir: str = ""
        mask_truncated_completions: bool = False

    assert issubclass(RouteUnavailable, NotApplicable)
    try:
        _config(OldConfig, "out", 1, 0)
    except RouteUnavailable as exc:
        assert "loss_type" in str(exc)
    else:
        raise AssertionError("a config without loss_type gave a dapo route")


# The steps through unsloth's generated UnslothGRPOTrainer (unsloth_train.py), as the step records them.
UNSLOTH_NAN = {"outcome": "nan-weights", "reason": "non-finite weights from step 1 to the end", "first_nan_step": 1,
               "kernel_calls": 1, "masked_inputs": ["tensor(0)"], "handed_inputs": ["tensor(0)"],
               "versions": {"transformers": "5.17.0", "trl": "1.13.0"}}
UNSLOTH_FLOORED = {"outcome": "clean", "reason": "logged loss finite at every step", "kernel_calls": 3,
                   "masked_inputs": ["tensor(0)"], "handed_inputs": ["tensor(1)"],
                   "versions": {"transformers": "5.17.0", "trl": "1.13.0"}}
UNSLOTH_OLD_TRL = {"outcome": "n/a", "reason": "n/a: TRL 0.24.0 counts the completion tokens before the mask",
                   "kernel_calls": 0, "masked_inputs": []}


def test_the_unsloth_route_decides_the_reach_where_it_ran() -> None:
    """A run through UnslothGRPOTrainer that went NaN is the reach, whatever TRL's own trainer showed: the user's
    run goes through unsloth's. Without the raw run it would be unknown; with a latent raw run, latent."""
    for raw in (None, LATENT_RUN):
        v = grpo_verdict.classify(section("vulnerable", route_ok=False, train=raw, unsloth=UNSLOTH_NAN), {})
        assert v.guard is GuardState.MISSING and v.reach is Reach.EXPOSED, v
        assert v.reach_reason.startswith("through unsloth's own route"), v.reach_reason
        assert "UnslothGRPOTrainer nan-weights from step 1" in v.guard_reason, v.guard_reason


def test_where_the_unsloth_route_cannot_run_the_reach_says_it_came_from_trls_trainer() -> None:
    v = grpo_verdict.classify(section("vulnerable", route_ok=False, train=LATENT_RUN, unsloth=UNSLOTH_OLD_TRL), {})
    assert v.reach is Reach.LATENT and "TRL 0.29.1" in v.reach_reason
    assert "the reach comes from the check's run with TRL's GRPOTrainer" in v.reach_reason
    assert "UnslothGRPOTrainer: n/a: TRL 0.24.0 counts" in v.reach_reason
    # no unsloth step at all (a cell JSON from before it): the words stay as they were
    plain = grpo_verdict.classify(section("vulnerable", route_ok=False, train=LATENT_RUN), {})
    assert "the reach comes from" not in plain.reach_reason


def test_a_guard_is_judged_by_the_steps_through_unsloths_trainer_too() -> None:
    # the raw run (zoo's loss under TRL's trainer, no unsloth) goes NaN on such a stack whatever unsloth guards
    ok = grpo_verdict.classify(section("vulnerable", plain=False, train=EXPOSED_RUN, unsloth=UNSLOTH_FLOORED), {})
    assert ok.guard is GuardState.ACTIVATES, ok
    assert "stayed finite (the trainer sent num_items_in_batch=tensor(0)" in ok.guard_reason
    assert "the loss got tensor(1)" in ok.guard_reason
    nan = grpo_verdict.classify(section("vulnerable", plain=False, unsloth=UNSLOTH_NAN), {})
    assert nan.guard is GuardState.BROKEN and "UnslothGRPOTrainer nan-weights" in nan.guard_reason
    assert grpo_verdict.classify(section("fixed", plain=False, unsloth=UNSLOTH_NAN), {}).guard is GuardState.BROKEN
    # no guard, a zoo both detectors call fixed, and yet unsloth's route goes NaN: not a pass
    assert grpo_verdict.classify(section("fixed", unsloth=UNSLOTH_NAN), {}).guard is GuardState.ERROR
    assert grpo_verdict.classify(section("fixed", unsloth=UNSLOTH_FLOORED), {}).guard is GuardState.NOT_NEEDED


@pytest.mark.parametrize(("trl", "after"), [("1.9.0", True), ("1.13.0", True), ("2.0", True), ("1.8.3", False),
                                            ("0.24.0", False), (None, None), ("dev", None)])
def test_which_trl_counts_after_the_truncation_mask(trl: str | None, after: bool | None) -> None:
    from probes.checks.grpo_normalizer_nan import unsloth_train

    assert unsloth_train.counts_after_mask(trl) is after


def test_the_unsloth_steps_are_n_a_below_trl_1_9_without_forking(monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.checks.grpo_normalizer_nan import unsloth_train

    monkeypatch.setattr(unsloth_train, "version", lambda name: "0.24.0" if name == "trl" else "1.0")

    def no_fork(*args: Any) -> Any:
        raise AssertionError("forked for a TRL that counts before the mask")

    monkeypatch.setattr(unsloth_train, "in_fork", no_fork)
    r = unsloth_train.run()
    assert r["outcome"] == "n/a" and "TRL 0.24.0 counts the completion tokens before" in r["reason"], r


def test_the_drill_down_shows_the_steps_through_unsloths_trainer() -> None:
    from probes.checks.grpo_normalizer_nan import render

    evidence = section("vulnerable", plain=False, unsloth=UNSLOTH_FLOORED)
    items = dict(render.details(evidence).items)
    assert items["GRPO steps through UnslothGRPOTrainer"] == ("logged loss finite at every step "
                                                              "(trainer sent tensor(0), loss got tensor(1))")
    assert "GRPO steps through UnslothGRPOTrainer" not in dict(render.details(section("vulnerable")).items)
