"""reports.advice: who can reach a pairing, the fix and the next step, from a cell entry and a check."""

from __future__ import annotations

import pytest

from reports.advice import Advice, advice, fixed_since
from tests.reports.cells import CPU, LOSS, error_cell, make_report, reachable_cell, unreachable_cell


def test_unreachable_pair_says_only_a_pin_reaches_it() -> None:
    a = advice(unreachable_cell(), LOSS, fixed="2026.10.6")
    assert a == Advice(
        install="only an explicit pin or a lockfile reaches this pairing: a plain install refuses it",
        fix="Upgrade toy_zoo to a release that guards the zero divisor. unsloth_zoo>=2026.10.6 carries the fix.",
        next_step="Move affected environments to a zoo release that carries the fix (or to an unsloth build with a "
                  "guard for this kernel), then rerun this cell to confirm.",
        reach="exposed: reach exposed")


def test_reachable_pair_says_a_plain_install_admits_it() -> None:
    a = advice(reachable_cell(), CPU)
    assert a.install == "a plain `pip install` / `uv pip install` admits this pairing"
    assert a.fix == "Pass num_items_in_batch explicitly until toy_zoo guards it."  # already a sentence: no second dot
    assert a.reach == "unknown: reach unknown"  # a failing state's reach leads the plain words
    assert [k for k, _ in a.lines()] == ["reach", "install", "fix", "next step"]


def test_unknown_admissibility_and_error_state() -> None:
    a = advice(error_cell(), LOSS)
    assert a.install == "unknown whether a plain install admits this pairing: the resolver check did not run"
    assert a.next_step.startswith("Read this cell's error and log tail")
    cell = reachable_cell()
    cell["admissible"] = None  # no record at all
    assert advice(cell, LOSS).install == a.install


@pytest.mark.parametrize(("guard", "start"), [
    ("broken", "Fix or withdraw the guard"), ("activates", "Nothing is needed while the guard stays in"),
    ("no-ops", "Nothing to do: the zoo carries the fix"), ("not-needed", "Nothing to do: this pairing is not exposed"),
    ("sideways", "Rerun this cell: its state 'sideways' is not one this report knows."),
])
def test_one_next_step_per_guard_state(guard: str, start: str) -> None:
    cell = reachable_cell()
    cell["verdicts"][LOSS["id"]]["guard"] = guard
    step = advice(cell, LOSS).next_step
    assert step.startswith(start) and step.count(". ") == 0 and step.endswith(".")


def test_fixed_since_reads_the_scan_timeline() -> None:
    assert fixed_since(make_report([reachable_cell()]), LOSS["id"]) is None
    one = make_report([reachable_cell()], scan={"timeline": {"fixed_since": "2026.10.6"}})
    per_check = make_report([reachable_cell()], scan={"timeline": {"fixed_since": {LOSS["id"]: "2026.10.6"}}})
    assert fixed_since(one, LOSS["id"]) == "2026.10.6"
    assert fixed_since(per_check, LOSS["id"]) == "2026.10.6" and fixed_since(per_check, CPU["id"]) is None


def test_missing_fix_hint_is_said_not_invented() -> None:
    assert advice(reachable_cell(), {"id": CPU["id"]}).fix == "No fix is recorded for this check."
