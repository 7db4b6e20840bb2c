"""reports.advice: who can reach a pairing, the fix and the next step, from a cell entry and a check."""

from __future__ import annotations

import pytest

from reports.advice import Advice, advice, fixed_since, release_sentence
from tests.reports.cells import CPU, LOSS, error_cell, make_report, reachable_cell, unreachable_cell


def test_unreachable_pair_says_only_a_pin_reaches_it() -> None:
    a = advice(unreachable_cell(), LOSS, fixed="2026.10.6")
    assert a == Advice(
        install="only an explicit pin or a lockfile reaches this pairing: a plain install refuses it",
        fix="Upgrade toy_zoo to a release that guards the zero divisor. toy_zoo>=2026.10.6 carries the fix.",
        next_step="Move affected environments to a zoo release that carries the fix (or to an unsloth build with a "
                  "guard for this kernel), then rerun this cell to confirm.",
        reach="exposed: reach exposed")


def test_reachable_pair_says_a_plain_install_admits_it() -> None:
    a = advice(reachable_cell(), CPU)
    assert a.install == "a plain `pip install` / `uv pip install` admits this pairing"
    # already a sentence: no second dot; then the declared fix: no release yet, its pull request open
    assert a.fix == ("Pass num_items_in_batch explicitly until toy_zoo guards it. No toy_zoo release carries a fix "
                     "yet: toy/toy-zoo#7 is open, not released.")
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
    assert advice(reachable_cell(), {"id": CPU["id"]}).fix == ("No fix is recorded for this check. No upstream fix is "
                                                                 "declared for this check.")


def test_the_declared_release_is_named_without_a_scan() -> None:
    # no scan in the report: the toy loss's declared release still reaches the fix line
    assert advice(unreachable_cell(), LOSS).fix == ("Upgrade toy_zoo to a release that guards the zero divisor. "
                                                    "toy_zoo>=2026.10.6 carries the fix.")
    merged = {**LOSS, "upstream_fix": {"package": "toy_zoo", "release": "2026.10.6",
                                       "prs": ["toy/toy-zoo#3", "toy/toy-zoo#4"], "prs_state": "merged"}}
    assert release_sentence(merged) == "toy_zoo>=2026.10.6 carries the fix (toy/toy-zoo#3, toy/toy-zoo#4, merged)."
    none = {**LOSS, "upstream_fix": {"package": "toy_zoo", "release": None, "prs": []}}
    assert release_sentence(none) == "No toy_zoo release fixes it yet."
    two_open = {**LOSS, "upstream_fix": {"package": "toychat", "release": None, "prs": ["a/b#1", "a/b#2"],
                                         "prs_state": "open"}}
    assert release_sentence(two_open) == "No toychat release carries a fix yet: a/b#1, a/b#2 are open, not released."


def test_a_scan_that_disagrees_with_the_declared_release_is_said() -> None:
    assert release_sentence(LOSS, "2026.10.6") == "toy_zoo>=2026.10.6 carries the fix."  # agrees: said once
    assert release_sentence(LOSS, "2026.10.8") == (
        "toy_zoo>=2026.10.6 carries the fix. This run's scan disagrees: the check declares 2026.10.6 as the first "
        "toy_zoo release carrying the fix, but the scan's timeline says 2026.10.8.")
    assert release_sentence({"id": "x"}, "2026.10.8") == ("No upstream fix is declared for this check. This run's "
                                                          "scan finds unsloth_zoo>=2026.10.8 carries the fix.")
    # a scan of another check says nothing about this one
    other = make_report([reachable_cell()], scan={"check": CPU["id"], "timeline": {"fixed_since": "2026.10.8"}})
    assert fixed_since(other, LOSS["id"]) is None and fixed_since(other, CPU["id"]) == "2026.10.8"


def broken_cell() -> dict:
    """u1__z1 with the toy loss's guard broken: two behaviour tests fail (one an extra), training NaN from step 4."""
    cell = unreachable_cell()
    v = cell["verdicts"][LOSS["id"]]
    v["guard"], v["guard_reason"] = "broken", "behaviour tests failing: 02-after"
    v["behavior"]["failing"] = ["02-after", "x-probe"]
    return cell


def test_a_broken_guards_fix_line_is_about_the_guard() -> None:
    a = advice(broken_cell(), LOSS)
    # 02-after's title comes from the behaviour step; x-probe has no result there, so its id alone
    assert a.fix == ("The guard in this unsloth build fails its own suite: 02-after (title of 02-after); x-probe; "
                     "the training run (nan-logged from step 4). Fix the guard so these pass, or remove it from this "
                     "build. Upstream: toy_zoo>=2026.10.6 carries the fix.")
    assert "upgrade" not in a.fix.lower() and "backport" not in a.fix
    # nothing identifiable failed: the guard's own reason says what
    cell = broken_cell()
    v = cell["verdicts"][LOSS["id"]]
    v["behavior"]["failing"], v["training"] = [], None
    assert advice(cell, LOSS).fix.startswith("The guard in this unsloth build fails its own suite: behaviour tests "
                                             "failing: 02-after. Fix the guard")


def test_a_broken_fix_in_a_source_tree_is_about_that_build() -> None:
    cell = broken_cell()
    cell["builds"] = {"toychat": cell["builds"]["unsloth"]}
    assert advice(cell, LOSS).fix.startswith("This build's fix fails its own suite: 02-after (title of 02-after); "
                                             "x-probe; the training run (nan-logged from step 4). Fix it so these "
                                             "pass, or remove it. Upstream: ")
