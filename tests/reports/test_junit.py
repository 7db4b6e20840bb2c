"""junit.xml against hand-made cells: counts, outcomes, classnames, properties, schema shape.

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

from reports.model import build_report
from reports.render import RENDERERS
from reports.render.junit import JunitRenderer
from tests.reports.cells import make_cell
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


def suite(root: ET.Element, cell_id: str) -> ET.Element:
    (s,) = [s for s in root.iter("testsuite") if s.get("name") == cell_id]
    return s


def case(s: ET.Element, classname_tail: str, name: str) -> ET.Element:
    (c,) = [c for c in s.iter("testcase") if c.get("classname") == f"{s.get('name')}.{classname_tail}"
            and c.get("name") == name]
    return c


def test_registered() -> None:
    assert isinstance(RENDERERS["junit"], JunitRenderer) and JunitRenderer.filename == "junit.xml"


def test_matches_the_junit_schema_rules(xml_text: str, root: ET.Element) -> None:
    assert xml_text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    assert root.tag == "testsuites"
    check_schema(root)


def test_one_suite_per_cell_with_exact_counts(root: ET.Element) -> None:
    assert [s.get("name") for s in root] == ["u1__z1", "u1__z2", "u2__z1", "u3__z2"]
    counts = {s.get("name"): tuple(int(s.get(k)) for k in ("tests", "failures", "errors", "skipped")) for s in root}
    # u1__z1: gate failure, 4 probes, 4 tests (1 fail, 1 n/a), 2 extras (1 fail, 1 n/a)
    # u2__z1: gate error, 4 probes skipped (the build failed, nothing was probed)
    assert counts == {"u1__z1": (11, 3, 0, 2), "u1__z2": (8, 0, 0, 0), "u2__z1": (5, 0, 1, 4), "u3__z2": (8, 0, 0, 0)}
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("32", "3", "1")
    assert root.get("time") == "168.000" and suite(root, "u1__z1").get("time") == "42.000"
    for s in root:  # the attributes agree with the children
        cases = list(s.iter("testcase"))
        assert int(s.get("tests")) == len(cases)
        for tag, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(s.get(attr)) == sum(c.find(tag) is not None for c in cases)


def test_classnames_are_prefixed_and_unique(root: ET.Element) -> None:
    seen = set()
    for s in root:
        for c in s.iter("testcase"):
            assert c.get("classname").startswith(s.get("name") + ".")
            key = (c.get("classname"), c.get("name"))
            assert key not in seen, key
            seen.add(key)


def test_gate_testcase_fails_when_the_cell_fails(root: ET.Element) -> None:
    missing = case(suite(root, "u1__z1"), "gate", "guard state")
    fail = missing.find("failure")
    assert fail is not None and fail.get("message").startswith("missing: no guard replaced the forward")
    assert "failing behaviour tests: 02-after" in fail.text
    ok = case(suite(root, "u1__z2"), "gate", "guard state")
    assert list(ok) == [ok.find("system-out")] and ok.find("system-out").text.startswith("guard not-needed")
    err = case(suite(root, "u2__z1"), "gate", "guard state").find("error")
    assert err is not None and err.get("message").startswith("error: build: uv pip install failed")
    assert "resolver failed </pre><script>" in err.text


def test_behaviour_outcomes(root: ET.Element) -> None:
    s = suite(root, "u1__z1")
    after = case(s, "behavior", "02-after: title of 02-after").find("failure")
    assert after.get("message") == SCRIPT_REASON  # escaped on write, intact on read
    skipped = case(s, "behavior", "11-idempotent: title of 11-idempotent").find("skipped")
    assert skipped.get("message") == "n/a: no guard in this build"
    assert case(s, "behavior.extra", "x-compiled: title of x-compiled").find("skipped").get("message") == \
        "why x-compiled"
    assert case(s, "behavior.extra", "x-public-all-masked: title of x-public-all-masked").find("failure") is not None
    passed = case(s, "behavior", "01-before: title of 01-before")
    assert passed.find("failure") is None and passed.get("time") == "0.250"


def test_probe_testcases(root: ET.Element) -> None:
    s = suite(root, "u1__z1")
    assert case(s, "probe", "static").find("system-out").text == "verdict vulnerable: static says vulnerable"
    assert case(s, "probe", "runtime").get("time") == "15.000"
    assert "all-masked finite: False" in case(s, "probe", "guard").find("system-out").text
    skipped = case(suite(root, "u2__z1"), "probe", "runtime").find("skipped")
    assert skipped.get("message") == "not run: build: uv pip install failed (exit 1)"


def test_crashed_probe_is_an_error_with_its_log() -> None:
    cell = make_cell("u1__z1", runtime_status="crash")
    cell["probes"]["steps"][0]["log_tail"] = "Fatal Python error: Aborted"
    root = ET.fromstring(JunitRenderer().render(build_report([cell], matrix="m.toml")))
    err = case(suite(root, "u1__z1"), "probe", "runtime").find("error")
    assert err.get("message") == "crash: runtime was killed by SIGABRT" and "Fatal Python error" in err.text
    assert case(suite(root, "u1__z1"), "gate", "guard state").find("error") is not None
    check_schema(root)


def test_properties_on_suites_only(root: ET.Element) -> None:
    for c in root.iter("testcase"):
        assert c.find("properties") is None and c.find("property") is None
    assert root.find("properties") is None
    props = {p.get("name"): p.get("value") for p in suite(root, "u1__z1").find("properties")}
    assert props["unsloth.build"] == "u1" and props["zoo.build"] == "z1"
    assert props["unsloth.digest"] == "a" * 64 and props["zoo.digest"] == "b" * 64
    assert props["installed.unsloth_zoo"] == "2026.9.3" and props["installed.unsloth_zoo.wheel_sha256"] == "7" * 64
    assert props["torch.version"] == "2.12.1" and props["admissible"] == "no"
    assert props["guard_state"] == "missing" and props["gate"] == "fail"
    # properties come first in the suite (Jenkins and xunit2 readers expect them before the testcases)
    assert suite(root, "u1__z1")[0].tag == "properties"


def test_control_characters_are_made_visible_not_written(xml_text: str) -> None:
    assert "\x1b" not in xml_text and "\\x1b[31merror" in xml_text
