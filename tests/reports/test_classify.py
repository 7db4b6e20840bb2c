"""Classification: each zoo state and guard state from hand-written evidence."""

from __future__ import annotations

import pytest

from reports.classify import GuardState, ZooState, classify
from tests.reports.cells import behaviour, make_cell

ALL_PASS = {f"{i:02d}": "pass" for i in range(1, 14)}


@pytest.mark.parametrize(("static", "runtime", "zoo"), [
    ("vulnerable", "vulnerable", ZooState.VULNERABLE),
    ("fixed", "fixed", ZooState.FIXED),
    ("absent", "absent", ZooState.ABSENT),
    ("fixed", "vulnerable", ZooState.INCONSISTENT),
    ("vulnerable", "fixed", ZooState.INCONSISTENT),
    ("unknown", "fixed", ZooState.UNKNOWN),
])
def test_zoo_state_from_both_detectors(static: str, runtime: str, zoo: ZooState) -> None:
    c = classify(make_cell(static=static, runtime=runtime, finite=runtime == "fixed"))
    assert c.zoo is zoo
    if zoo is ZooState.INCONSISTENT:
        assert c.guard is GuardState.ERROR and "disagree" in c.guard_reason
        assert f"static says {static}" in c.zoo_reason and f"runtime says {runtime}" in c.zoo_reason


def test_runtime_crash_is_unknown_with_reason() -> None:
    c = classify(make_cell(runtime_status="crash"))
    assert c.zoo is ZooState.UNKNOWN and "SIGABRT" in c.zoo_reason
    assert c.guard is GuardState.ERROR


def test_missing() -> None:
    c = classify(make_cell())
    assert c.guard is GuardState.MISSING and "nan" in c.guard_reason


def test_not_needed() -> None:
    assert classify(make_cell(static="fixed", runtime="fixed", finite=True)).guard is GuardState.NOT_NEEDED


def test_activates_needs_replacement_finite_and_passing_suite() -> None:
    ok = make_cell(original=False, finite=True, behavior=behaviour(ALL_PASS, True))
    c = classify(ok)
    assert c.guard is GuardState.ACTIVATES and c.behavior.label() == "13/13"
    failing = make_cell(original=False, finite=True, behavior=behaviour({**ALL_PASS, "11": "fail"}, True))
    c = classify(failing)
    assert c.guard is GuardState.BROKEN and "11" in c.guard_reason


def test_replaced_but_still_nan_is_broken() -> None:
    assert classify(make_cell(original=False, finite=False)).guard is GuardState.BROKEN


def test_no_ops_needs_a_guard_hook_and_an_untouched_forward() -> None:
    c = classify(make_cell(static="fixed", runtime="fixed", finite=True,
                           behavior=behaviour({**ALL_PASS, "01": "n/a"}, True)))
    assert c.guard is GuardState.NO_OPS and c.behavior.label() == "12/12 (+1 n/a)"


def test_guard_that_replaces_a_fixed_forward_is_broken() -> None:
    c = classify(make_cell(static="fixed", runtime="fixed", finite=True, original=False))
    assert c.guard is GuardState.BROKEN and "carries the fix" in c.guard_reason


def test_build_error_is_error_with_kind() -> None:
    c = classify(make_cell(error={"kind": "build", "message": "uv pip install failed (exit 1):\nboom",
                                  "log_tail": ""}))
    assert c.guard is GuardState.ERROR and c.guard_reason.startswith("build: uv pip install failed")


def test_import_failure_is_error() -> None:
    c = classify(make_cell(guard_status="error"))
    assert c.guard is GuardState.ERROR and "import unsloth" in c.guard_reason


def test_absent_kernel_needs_no_guard() -> None:
    assert classify(make_cell(static="absent", runtime="absent")).guard is GuardState.NOT_NEEDED
