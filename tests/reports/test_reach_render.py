"""Reach in every format (issue 17): a latent cell is a WARN that passes the gate, and every headline
says what the exit code says."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reports.gate import evaluate
from reports.render import RENDERERS
from tests.reports.cells import CPU, LATENT_REASON, latent_cell, make_report, unreachable_cell

WARN_CELL = "u1__z3"


def latent_report() -> dict:
    return make_report([latent_cell()])


def test_gate_passes_a_latent_cell_with_a_warning_line() -> None:
    outcome = evaluate(latent_report())
    assert outcome.passed and not outcome.no_verdict
    assert outcome.headline() == "GATE PASS: 1 cell passes (1 latent warning(s), WARN)"
    [line] = outcome.lines()
    assert line.startswith(f"{WARN_CELL} {CPU['id']}: missing (latent) (WARN: passes the gate; ")
    assert line.endswith("strict mode fails it)") and "num_items_in_batch=0.0" in line


def test_terminal_warns_and_opens_no_failure() -> None:
    text = RENDERERS["terminal"].render(latent_report())
    assert "cpu-ops: missing (latent)" in text  # the grid line
    lines = text.splitlines()
    head = f"WARN {CPU['id']}: missing (latent) in {WARN_CELL}"
    assert lines.count(head) == 1  # in full, once
    assert lines[lines.index(head) + 1] == f"    passes the gate; strict mode fails it: {LATENT_REASON}"
    assert text.rstrip().splitlines()[-1] == "GATE PASS: 1 cell passes (1 latent warning(s), WARN)"
    assert "FAIL" not in text.replace("GATE PASS", "")


def test_markdown_and_summary_headlines_agree_with_the_exit_code() -> None:
    md = RENDERERS["markdown"].render(latent_report()).splitlines()
    assert md[3].startswith("**✅ GATE PASS: 1 cell passes (1 latent warning(s), WARN)**")
    assert f"- **WARN** `{CPU['id']}`: **missing (latent)** in `{WARN_CELL}`: passes the gate; strict mode fails " \
           f"it: {LATENT_REASON}" in md
    summary = RENDERERS["summary"].render(latent_report())
    assert summary.startswith("## ✅ skewmatrix: GATE PASS: 1 cell passes (1 latent warning(s), WARN)\n")
    assert f"### ⚠️ `{WARN_CELL}`" in summary  # a warned cell is shown open


def test_html_headline_is_the_gate_verdict() -> None:
    page = RENDERERS["html"].render(latent_report())
    assert '<body data-gate="pass">' in page
    assert '<div class="verdict v-pass" id="verdict">GATE PASS: 1 cell passes (1 latent warning(s), WARN)</div>' in page
    # the warning is one line of the failure list, opening into its plain words
    from tests.reports.test_html import parse

    (li,) = parse(page).find("ul", id="failing").find_all("li")
    assert li.attrs["data-word"] == "WARN" and "warn" in li.classes()
    assert li.find("summary").all_text() == f"{WARN_CELL} · cpu-ops missing reach latent WARN (passes the gate)"
    both = RENDERERS["html"].render(make_report([latent_cell(), unreachable_cell()]))
    assert '<div class="verdict v-fail" id="verdict">GATE FAIL: 1 of 2 cells fail</div>' in both


def test_junit_has_no_failure_for_a_latent_cell() -> None:
    root = ET.fromstring(RENDERERS["junit"].render(latent_report()).split("\n", 1)[1])
    assert root.find(".//failure") is None and root.find(".//error") is None
    gate = next(tc for tc in root.iter("testcase") if tc.get("classname", "").endswith(f"{CPU['id']}.gate"))
    skipped = gate.find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith("WARN: missing, reach latent: ")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props[f"check.{CPU['id']}.reach"] == "latent" and props[f"check.{CPU['id']}.gate"] == "warn"


def test_stacks_are_grid_columns_of_their_own() -> None:
    from reports.model import build_report

    floor, newest = latent_cell(), latent_cell()
    for cell, name, tf in ((floor, "floor", "4.52.4"), (newest, "newest", "5.17.0")):
        cell["cell_id"] = f"u1__z3__{name}"
        cell["stack"] = {"name": name, "requested": {"transformers": tf}, "resolved": {"transformers": tf, "trl": "x"}}
    rep = build_report([floor, newest], matrix="m.toml")
    assert rep["grid"] == {"unsloth": ["u1"], "zoo": ["z3 @ floor", "z3 @ newest"], "axes": ["unsloth", "zoo × stack"]}
    text = RENDERERS["terminal"].render(rep)
    header = next(line for line in text.splitlines() if line.startswith("unsloth \\ zoo"))
    assert "z3 @ floor" in header and "z3 @ newest" in header
    page = RENDERERS["html"].render(rep)
    assert "z3 @ newest<small>pypi z3 · transformers 5.17.0, trl x</small>" in page
