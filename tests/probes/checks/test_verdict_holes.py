"""Verdict holes closed (issue 20, part 3): an errored suite is not "0 failures"; the absent- and fixed-zoo
branches judge a present guard; both checks share one rule for a kernel replaced on a fixed zoo."""

from __future__ import annotations

from probes.checks.cpu_ce_masked_nan import verdict as cpu_verdict
from probes.checks.fused_ce_masked_nan import verdict as fused_verdict
from probes.checks.vocabulary import GuardState, behavior_counts
from tests.probes.checks.evidence import behaviour, cpu, fused

ALL_PASS = {f"{i:02d}": "pass" for i in range(1, 15)}


def test_an_errored_suite_counts_as_a_failure() -> None:
    section = fused(original=False, finite=True, behavior=behaviour(ALL_PASS, True))
    suite = next(s for s in section["steps"] if s["name"] == "behavior")
    suite.update(status="error", reason="KeyError: 'tests'", result=None)
    counts, _ = behavior_counts(section)
    assert counts.failed == 1 and counts.failing[0].startswith("behavior (error: KeyError")
    v = fused_verdict.classify(section, {})
    assert v.guard is GuardState.BROKEN and "behavior (error" in v.guard_reason


def test_the_differential_suite_counts_beside_the_named_tests() -> None:
    section = fused(original=False, finite=True, behavior=behaviour(ALL_PASS, True))
    section["steps"].append({"name": "differential", "status": "ok", "seconds": 2.0, "returncode": 0,
                             "result": behaviour({"d1-same-answer": "fail", "d2-same-gradients": "pass"}, True)})
    v = fused_verdict.classify(section, {})
    assert v.behavior.failing == ("d1-same-answer",) and v.behavior.passed == 15
    assert v.guard is GuardState.BROKEN and "d1-same-answer" in v.guard_reason


def test_a_present_guard_failing_its_tests_on_an_absent_zoo_is_broken() -> None:
    v = fused_verdict.classify(fused(static="absent", runtime="absent",
                                     behavior=behaviour({**ALL_PASS, "07": "fail"}, True)), {})
    assert v.guard is GuardState.BROKEN and "07" in v.guard_reason
    quiet = fused_verdict.classify(fused(static="absent", runtime="absent", behavior=behaviour(ALL_PASS, True)), {})
    assert quiet.guard is GuardState.NOT_NEEDED


def test_both_checks_call_a_replacement_on_a_fixed_zoo_broken() -> None:
    f = fused_verdict.classify(fused(static="fixed", runtime="fixed", original=False, finite=True,
                                     behavior=behaviour(ALL_PASS, True)), {})
    c = cpu_verdict.classify(cpu(static="fixed", runtime="fixed", original=False, finite=True,
                                 outcomes={"c1": "pass"}), {})
    assert f.guard is c.guard is GuardState.BROKEN
    assert "replaced on a zoo that carries the fix" in f.guard_reason
    assert "replaced on a zoo that carries the fix" in c.guard_reason
