"""junit.xml against hand-made two-check cells: counts, outcomes, classnames, properties, schema shape.

No JUnit XSD ships on PyPI, so ``check_schema`` states the rules of the
surefire/Jenkins schema (``junit-10.xsd``, the one GitLab, Jenkins and the
GitHub JUnit actions accept) explicitly: allowed elements and attributes,
required attributes, the time pattern, and no properties on a testcase (the
xunit2 schema rejects them).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from reports.advice import INSTALL, NEXT_STEP
from reports.render import RENDERERS
from reports.render.junit import JunitRenderer
from tests.reports.cells import CPU, LOSS, make_report, make_step, reachable_cell, residual_cell, unreachable_cell
from tests.reports.cells_behavior import SCRIPT_REASON, four_cell_report

# element -> (allowed attributes, required attributes, allowed children, may hold text)
SCHEMA: dict[str, tuple[set[str], set[str], set[str], bool]] = {
    "testsuites": ({"name", "time", "tests", "failures", "errors"}, set(), {"testsuite"}, False),
    "testsuite": ({"name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp", "hostname", "id",
                   "package", "file", "log", "url", "version"}, {"name", "tests", "failures", "errors"},
                  {"testsuite", "properties", "testcase", "system-out", "system-err"}, False),
    "properties": (set(), set(), {"property"}, False),
    "property": ({"name", "value"}, {"name", "value"}, set(), False),
    "testcase": ({"name", "time", "classname", "group"}, {"name"},
                 {"skipped", "error", "failure", "system-out", "system-err"}, False),
    "failure": ({"type", "message"}, set(), set(), True),
    "error": ({"type", "message"}, set(), set(), True),
    "skipped": ({"type", "message"}, set(), set(), True),
    "system-out": (set(), set(), set(), True),
    "system-err": (set(), set(), set(), True),
}
SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]{0,3})?")


def check_schema(el: ET.Element) -> None:
    attrs, required, children, text = SCHEMA[el.tag]
    assert set(el.attrib) <= attrs, (el.tag, set(el.attrib) - attrs)
    assert required <= set(el.attrib), (el.tag, required - set(el.attrib))
    if "time" in el.attrib:
        assert SUREFIRE_TIME.fullmatch(el.attrib["time"]), (el.tag, el.attrib["time"])
    for count in ("tests", "failures", "errors", "skipped"):
        if count in el.attrib:
            assert el.attrib[count].isdigit(), (el.tag, count, el.attrib[count])
    if not text:
        assert not (el.text or "").strip(), (el.tag, el.text)
    for child in el:
        assert child.tag in children, (el.tag, child.tag)
        check_schema(child)


@pytest.fixture
def xml_text() -> str:
    return JunitRenderer().render(four_cell_report())


@pytest.fixture
def root(xml_text: str) -> ET.Element:
    return ET.fromstring(xml_text)


def render(*cells: dict) -> ET.Element:
    root = ET.fromstring(JunitRenderer().render(make_report(list(cells))))
    check_schema(root)
    return root


def suite(root: ET.Element, cell_id: str) -> ET.Element:
    (s,) = [s for s in root.iter("testsuite") if s.get("name") == cell_id]
    return s


def case(s: ET.Element, check_id: str, group: str, name: str) -> ET.Element:
    (c,) = [c for c in s.iter("testcase") if c.get("classname") == f"{s.get('name')}.{check_id}.{group}"
            and c.get("name") == name]
    return c


def counts(s: ET.Element) -> tuple[int, ...]:
    return tuple(int(s.get(k)) for k in ("tests", "failures", "errors", "skipped"))


def test_registered() -> None:
    assert isinstance(RENDERERS["junit"], JunitRenderer) and JunitRenderer.filename == "junit.xml"


def test_matches_the_junit_schema_rules(xml_text: str, root: ET.Element) -> None:
    assert xml_text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert root.tag == "testsuites"
    check_schema(root)


def test_one_suite_per_cell_with_exact_counts(root: ET.Element) -> None:
    assert [s.get("name") for s in root] == ["u1__z1", "u1__z2", "u2__z1", "u3__z2"]
    # Per check: a gate testcase, the static detector, one per step (a train testcase is added when the check
    # has no train step: skipped), one per behaviour test and extra.
    # u1__z1 toy-loss: gate failure, static, runtime, guard, behavior, train failure (NaN from step 4),
    #   4 tests (1 fail, 1 n/a), 2 extras (1 fail, 1 n/a) = 12, 4 failures, 2 skipped;
    #   cpu-ops: gate, static, runtime, train n/a = 4, 1 skipped.
    # u1__z2 toy-loss: gate, static, 4 steps, 2 tests, 1 extra = 9; cpu-ops: gate, static, runtime, behavior,
    #   train n/a, 2 tests = 7, 1 skipped.
    # u2__z1 (build failed, no checks): per check a gate error and two skips (steps, train) = 3.
    # u3__z2 toy-loss: gate, static, 4 steps, 3 tests = 9; cpu-ops as in u1__z2.
    assert {s.get("name"): counts(s) for s in root} == {
        "u1__z1": (16, 4, 0, 3), "u1__z2": (16, 0, 0, 1), "u2__z1": (6, 0, 2, 4), "u3__z2": (16, 0, 0, 1)}
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("54", "4", "2")
    assert root.get("time") == "168.000" and suite(root, "u1__z1").get("time") == "42.000"
    for s in root:  # the attributes agree with the children
        cases = list(s.iter("testcase"))
        assert int(s.get("tests")) == len(cases)
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(s.get(attr)) == sum(c.find(tag) is not None for c in cases)


def test_classnames_carry_cell_and_check_and_are_unique(root: ET.Element) -> None:
    seen = set()
    for s in root:
        groups = set()
        for c in s.iter("testcase"):
            cell, check, group = c.get("classname").split(".", 2)
            assert cell == s.get("name") and check in (LOSS["id"], CPU["id"])
            groups.add(group)
            key = (c.get("classname"), c.get("name"))
            assert key not in seen, key
            seen.add(key)
        assert {"gate", "step"} <= groups


def test_gate_testcase_per_check_with_plain_words(root: ET.Element) -> None:
    s = suite(root, "u1__z1")
    fail = case(s, LOSS["id"], "gate", "guard state").find("failure")
    assert fail.get("message") == ("missing: no guard replaced the forward. Reach: exposed: reach exposed. "
                                   f"Install: {INSTALL[False]}. "
                                   f"Next step: {NEXT_STEP['missing']}")
    assert "failing behaviour tests: 02-after" in fail.text
    assert "training: nan-logged from step 4" in fail.text and "symptom: logged loss NaN from step 4" in fail.text
    assert "fix: Upgrade toy_zoo to a release that guards the zero divisor." in fail.text
    ok = case(s, CPU["id"], "gate", "guard state")
    assert list(ok) == [ok.find("system-out")] and ok.find("system-out").text.startswith("guard not-needed")
    reachable = case(suite(root, "u1__z2"), LOSS["id"], "gate", "guard state")
    assert reachable.find("failure") is None
    err = case(suite(root, "u2__z1"), CPU["id"], "gate", "guard state").find("error")
    assert err.get("message").startswith(
        f"error: build: uv pip install failed (exit 1). Reach: unknown: reach unknown. Install: {INSTALL[None]}.")
    assert "resolver failed </pre><script>" in err.text


def test_reachable_pair_says_so_in_the_failure_message() -> None:
    fail = case(suite(render(reachable_cell()), "u1__z2"), CPU["id"], "gate", "guard state").find("failure")
    assert fail.get("message") == ("missing: no guard targets this kernel. Reach: unknown: reach unknown. "
                                   f"Install: {INSTALL[True]}. "
                                   f"Next step: {NEXT_STEP['missing']}")


def test_training_testcase_per_check(root: ET.Element) -> None:
    nan = case(suite(root, "u1__z1"), LOSS["id"], "step", "train")
    assert nan.find("failure").get("message") == ("nan-logged from step 4: num_items_in_batch reached the loss "
                                                  "as 0 on step 4")
    assert "run ga1 (gradient accumulation 1): nan-logged from step 4" in nan.find("failure").text
    assert nan.get("time") == "9.000"
    clean = case(suite(root, "u1__z2"), LOSS["id"], "step", "train")
    assert clean.find("failure") is None and clean.find("system-out").text.startswith("clean: every step finite")
    na = case(suite(root, "u1__z2"), CPU["id"], "step", "train").find("skipped")
    assert na.get("message") == "n/a: this check has no training run"


def test_behaviour_outcomes(root: ET.Element) -> None:
    s = suite(root, "u1__z1")
    after = case(s, LOSS["id"], "behavior", "02-after: title of 02-after").find("failure")
    assert after.get("message") == SCRIPT_REASON  # escaped on write, intact on read
    assert after.get("type") == "behavior"
    skipped = case(s, LOSS["id"], "behavior", "11-idempotent: title of 11-idempotent").find("skipped")
    assert skipped.get("message") == "n/a: no guard in this build"
    assert case(s, LOSS["id"], "behavior.extra", "x-compiled: title of x-compiled").find("skipped").get(
        "message") == "why x-compiled"
    assert case(s, LOSS["id"], "behavior.extra", "x-public-all-masked: title of x-public-all-masked").find(
        "failure") is not None
    passed = case(s, LOSS["id"], "behavior", "01-before: title of 01-before")
    assert passed.find("failure") is None and passed.get("time") == "0.250"


def test_step_testcases(root: ET.Element) -> None:
    s = suite(root, "u1__z1")
    assert case(s, LOSS["id"], "step", "static").find("system-out").text == "verdict vulnerable: static says vulnerable"
    assert case(s, LOSS["id"], "step", "runtime").get("time") == "15.000"
    assert case(s, CPU["id"], "step", "runtime").find("system-out").text == "verdict absent: no cpu backend"
    assert '"all_masked_finite": false' in case(s, LOSS["id"], "step", "guard").find("system-out").text
    skipped = case(suite(root, "u2__z1"), LOSS["id"], "step", "steps").find("skipped")
    assert skipped.get("message") == "not run: build: uv pip install failed (exit 1)"


def test_crashed_step_is_an_error_with_its_log() -> None:
    cell = unreachable_cell()
    cell["checks"][CPU["id"]]["steps"][0] = make_step("runtime", status="crash", reason="killed by SIGABRT",
                                                      log_tail="Fatal Python error: Aborted")
    err = case(suite(render(cell), "u1__z1"), CPU["id"], "step", "runtime").find("error")
    assert err.get("message") == "crash: killed by SIGABRT" and "Fatal Python error" in err.text


def test_residual_failures_fail_their_testcase_while_the_gate_says_passes() -> None:
    s = suite(render(residual_cell()), "u2__z2")
    gate = case(s, LOSS["id"], "gate", "guard state")
    assert gate.find("failure") is None
    assert gate.find("system-out").text.startswith("passes, 1 residual failure: x-probe\nguard no-ops")
    assert case(s, LOSS["id"], "behavior.extra", "x-probe: title of x-probe").find("failure") is not None
    assert counts(s)[1] == 1


def test_expected_failure_is_skipped_and_a_stale_expectation_fails() -> None:
    xfail = unreachable_cell()
    xfail["expect"] = {LOSS["id"]: "missing", CPU["id"]: "missing"}  # cpu-ops is not-needed here: stale
    s = suite(render(xfail), "u1__z1")
    gate = case(s, LOSS["id"], "gate", "guard state").find("skipped")
    assert gate.get("message").startswith("XFAIL (the matrix expects missing): missing: no guard replaced")
    assert case(s, LOSS["id"], "step", "train").find("skipped").get("message").startswith(
        "XFAIL (the matrix expects missing): nan-logged from step 4")
    stale = case(s, CPU["id"], "gate", "guard state").find("failure")
    assert stale.get("message") == "XPASS: expected missing, got not-needed: the expectation is stale"
    assert counts(s)[1:3] == (1, 0)  # the stale expectation is the one failure


def test_properties_on_suites_only(root: ET.Element) -> None:
    for c in root.iter("testcase"):
        assert c.find("properties") is None and c.find("property") is None
    assert root.find("properties") is None
    props = {p.get("name"): p.get("value") for p in suite(root, "u1__z1").find("properties")}
    assert props["unsloth.build"] == "u1" and props["zoo.build"] == "z1"
    assert props["unsloth.digest"] == "a" * 64 and props["zoo.digest"] == "b" * 64
    assert props["installed.unsloth_zoo"] == "2026.9.3" and props["installed.unsloth_zoo.wheel_sha256"] == "7" * 64
    assert props["torch.version"] == "2.12.1" and props["admissible"] == "no"
    assert props[f"check.{LOSS['id']}.guard_state"] == "missing" and props[f"check.{LOSS['id']}.gate"] == "fail"
    assert props[f"check.{LOSS['id']}.training"] == "nan-logged from step 4"
    assert props[f"check.{CPU['id']}.guard_state"] == "not-needed" and props[f"check.{CPU['id']}.training"] == "n/a"
    assert props["gate"] == "fail"
    # properties come first in the suite (Jenkins and xunit2 readers expect them before the testcases)
    assert suite(root, "u1__z1")[0].tag == "properties"


def test_control_characters_are_made_visible_not_written(xml_text: str) -> None:
    assert "\x1b" not in xml_text and "\\x1b[31merror" in xml_text


def test_a_check_in_its_own_words_is_judged_in_them() -> None:
    """A degraded pair (a passing state the check calls a warning) is a skipped gate case saying why; its own word
    is a suite property; the story leads with that word, not the guard vocabulary."""
    cell = reachable_cell()
    v = cell["verdicts"][LOSS["id"]]
    v.update(word="degraded", warn="missing `x` (save / GGUF export)", gate_warn=True)
    s = suite(render(cell), "u1__z2")
    props = {p.get("name"): p.get("value") for p in s.iter("property")}
    assert props[f"check.{LOSS['id']}.state"] == "degraded" and props[f"check.{LOSS['id']}.gate"] == "warn"
    skipped = case(s, LOSS["id"], "gate", "guard state").find("skipped")
    assert skipped is not None
    assert skipped.get("message") == "WARN: degraded, missing `x` (save / GGUF export)"
    assert skipped.text is not None and skipped.text.startswith("degraded: ")
