"""report.html against hand-made two-check cells: grid lines per check, plain words, escaping, drill-down
content (steps, behaviour, the training run per step), self-containment."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from reports.advice import INSTALL, NEXT_STEP
from reports.render import RENDERERS
from reports.render.html import SCRIPT, HtmlRenderer
from tests.reports.cells import CPU, LOSS, error_cell, make_report, reachable_cell, residual_cell, unreachable_cell
from tests.reports.cells_behavior import SCRIPT_REASON, four_cell_report, not_needed_cell

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "source"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None]
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, tag: str, **attrs: str) -> list[Node]:
        return [n for n in self.iter() if n.tag == tag and all(n.attrs.get(k.replace("_", "-")) == v
                                                                  for k, v in attrs.items())]

    def find(self, tag: str, **attrs: str) -> Node:
        found = self.find_all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Node("#text", {}, text=data))


def parse(page: str) -> Node:
    p = _Dom()
    p.feed(page)
    p.close()
    assert p.stack == [p.root], "unclosed elements: " + ", ".join(n.tag for n in p.stack[1:])
    return p.root


@pytest.fixture
def page() -> str:
    return HtmlRenderer().render(four_cell_report())


@pytest.fixture
def dom(page: str) -> Node:
    return parse(page)


def grid_cells(dom: Node) -> dict[str, Node]:
    grid = dom.find("table", id="grid")
    return {td.attrs["data-cell"]: td for td in grid.find_all("td") if "data-cell" in td.attrs}


def lines(td: Node) -> dict[str, tuple[str, str]]:
    """check id -> (guard state, text) of each line of a grid cell."""
    return {n.attrs["data-check"]: (n.attrs["data-guard"], n.all_text()) for n in td.find_all("span")
            if "gl" in n.classes()}


def test_registered() -> None:
    assert isinstance(RENDERERS["html"], HtmlRenderer) and HtmlRenderer.filename == "report.html"


def test_grid_has_one_line_per_check_in_each_cell(dom: Node) -> None:
    grid = dom.find("table", id="grid")
    assert [th.all_text() for th in grid.find_all("th", scope="col")] == ["z1pypi z1", "z2pypi z2"]
    assert [th.all_text().split("pypi")[0].split("git")[0] for th in grid.find_all("th", scope="row")] == \
        ["u1", "u2", "u3"]
    cells = grid_cells(dom)
    assert lines(cells["u1__z1"]) == {
        LOSS["id"]: ("missing",
                     "✗ toy-loss: vulnerable / missing (exposed) 2/3 (+1 n/a) · train nan-logged from step 4"),
        CPU["id"]: ("not-needed", "✓ cpu-ops: absent / not-needed")}
    assert lines(cells["u1__z2"]) == {
        LOSS["id"]: ("not-needed", "✓ toy-loss: fixed / not-needed 2/2 · train clean"),
        CPU["id"]: ("not-needed", "✓ cpu-ops: fixed / not-needed 2/2")}
    assert lines(cells["u2__z1"]) == {LOSS["id"]: ("error", "✗ toy-loss: unknown / error (unknown)"),
                                      CPU["id"]: ("error", "✗ cpu-ops: unknown / error (unknown)")}
    assert lines(cells["u3__z2"])[LOSS["id"]] == ("activates", "✓ toy-loss: vulnerable / activates 3/3 · train clean")
    line = next(n for n in cells["u1__z1"].find_all("span") if n.attrs.get("data-check") == LOSS["id"])
    assert {"gl", "g-missing"} <= line.classes()
    assert [cells[c].attrs["data-gate"] for c in ("u1__z1", "u1__z2", "u2__z1", "u3__z2")] == \
        ["fail", "pass", "fail", "pass"]
    assert "fail" in cells["u1__z1"].classes() and "pass" in cells["u3__z2"].classes()
    # the two pairs outside the matrix are empty, not missing from the grid
    assert len([td for td in grid.find_all("td") if "empty" in td.classes()]) == 2
    # each grid cell links to its details
    assert cells["u1__z1"].find("a").attrs["href"] == "#cell-u1__z1"
    assert dom.find("details", id="cell-u1__z1")


def test_verdict_counts_per_check_and_failing_checks_on_top(dom: Node, page: str) -> None:
    assert dom.find("body").attrs["data-gate"] == "fail"
    assert dom.find("div", id="verdict").all_text() == "GATE FAIL: 2 of 4 cells fail"
    summary = dom.find("div", id="summary")
    per_check = {li.attrs["data-check"]: li.all_text() for li in summary.find_all("li")}
    assert per_check == {LOSS["id"]: f"{LOSS['id']}: activates 1 missing 1 not-needed 1 error 1",
                         CPU["id"]: f"{CPU['id']}: not-needed 3 error 1"}  # zero counts are left out
    failing = dom.find("ul", id="failing")
    assert [(li.attrs["data-cell"], li.attrs["data-check"]) for li in failing.find_all("li")] == [
        ("u1__z1", LOSS["id"]), ("u2__z1", LOSS["id"]), ("u2__z1", CPU["id"])]
    first = failing.find_all("li")[0]
    assert first.find("a").attrs["href"] == "#cell-u1__z1"
    assert "symptom: logged loss NaN from step 4 to the end" in first.all_text()
    # the verdict comes before the grid, the grid before the details
    assert page.index('id="verdict"') < page.index('id="grid"') < page.index('id="cell-u1__z1"')


def advice_of(node: Node) -> dict[str, str]:
    (dl,) = [d for d in node.find_all("dl") if "advice" in d.classes()]
    dts, dds = dl.find_all("dt"), dl.find_all("dd")
    return {dt.all_text(): dd.all_text() for dt, dd in zip(dts, dds, strict=True)}


def test_plain_words_for_an_unreachable_and_a_reachable_pair() -> None:
    dom = parse(HtmlRenderer().render(make_report([unreachable_cell(), reachable_cell()], scan={
        "timeline": {"fixed_since": {LOSS["id"]: "2026.10.6"}}})))
    items = {li.attrs["data-cell"]: li for li in dom.find("ul", id="failing").find_all("li")}
    assert advice_of(items["u1__z1"]) == {
        "reach": "exposed: reach exposed",
        "install": "only an explicit pin or a lockfile reaches this pairing: a plain install refuses it",
        "fix": "Upgrade toy_zoo to a release that guards the zero divisor. unsloth_zoo>=2026.10.6 carries the fix.",
        "next step": NEXT_STEP["missing"]}
    assert advice_of(items["u1__z2"]) == {"reach": "unknown: reach unknown",
                                          "install": "a plain `pip install` / `uv pip install` admits this pairing",
                                          "fix": "Pass num_items_in_batch explicitly until toy_zoo guards it.",
                                          "next step": NEXT_STEP["missing"]}
    # the same words in the failing check's drill-down, and none for the passing check
    (sec,) = [n for n in dom.find("details", id="cell-u1__z2").find_all("section")
              if n.attrs.get("data-check") == CPU["id"]]
    assert advice_of(sec)["install"] == INSTALL[True]
    (ok,) = [n for n in dom.find("details", id="cell-u1__z2").find_all("section")
             if n.attrs.get("data-check") == LOSS["id"]]
    assert not [d for d in ok.find_all("dl") if "advice" in d.classes()]


def test_passing_report_says_pass() -> None:
    dom = parse(HtmlRenderer().render(make_report([not_needed_cell()])))
    assert dom.find("div", id="verdict").all_text() == "GATE PASS: 1 cell passes"
    assert "v-pass" in dom.find("div", id="verdict").classes()
    assert not dom.find_all("ul", id="failing")


def test_legend_per_check_lists_its_meanings_and_the_gate(dom: Node) -> None:
    legend = dom.find("div", id="legend")
    blocks = {n.attrs["data-check"]: n for n in legend.find_all("div") if "lcheck" in n.classes()}
    assert list(blocks) == [LOSS["id"], CPU["id"]]
    for check in (LOSS, CPU):
        text = blocks[check["id"]].all_text()
        assert check["hazard"] in text and check["kernel"] in text and check["title"] in text
        for meaning in (*check["guard_meaning"].values(), *check["zoo_meaning"].values()):
            assert meaning in text
        rows = {r.attrs["data-state"]: r.find_all("td")[1].all_text() for r in blocks[check["id"]].find_all("tr")}
        assert rows == {"activates": "passes", "no-ops": "passes", "missing": "fails gate", "not-needed": "passes",
                        "broken": "fails gate", "error": "fails gate"}


def test_untrusted_text_is_escaped(page: str, dom: Node) -> None:
    # one script element only: ours; the reason, the log tail and the describe are text
    assert len(dom.find_all("script")) == 1
    assert "<script>alert" not in page and "<b>bold</b>" not in page and "</pre><script>" not in page
    assert html.escape(SCRIPT_REASON, quote=True) in page
    row = dom.find("details", id="cell-u1__z1").find("tr", data_test="02-after")
    assert SCRIPT_REASON in row.all_text()  # the reader sees the original text
    assert 'git "main" <b>bold</b>' in dom.find("table", id="grid").all_text()


def test_quotes_in_cell_id_cannot_break_attributes() -> None:
    cell = reachable_cell()
    cell["cell_id"] = 'u1__z1" onmouseover="alert(1)'
    dom = parse(HtmlRenderer().render(make_report([cell])))
    assert not [n for n in dom.iter() if "onmouseover" in n.attrs]
    assert dom.find("details", data_cell='u1__z1" onmouseover="alert(1)')


def section(d: Node, check_id: str) -> Node:
    (s,) = [n for n in d.find_all("section") if n.attrs.get("data-check") == check_id]
    return s


def test_drill_down_of_a_failing_cell_check_by_check(dom: Node) -> None:
    d = dom.find("details", id="cell-u1__z1")
    assert "open" in d.attrs and {"cell", "fail"} <= d.classes()
    loss = section(d, LOSS["id"])
    assert loss.attrs["data-guard"] == "missing" and "fail" in loss.classes()
    text = loss.all_text()
    # zoo state by each detector, with reasons; the training outcome; the symptom
    assert "static detectorvulnerable: static says vulnerable" in text
    assert "runtime detectorvulnerable: runtime says vulnerable" in text
    assert "trainingnan-logged from step 4: num_items_in_batch reached the loss as 0 on step 4" in text
    assert "symptomlogged loss NaN from step 4 to the end" in text
    assert "guard probeforward replaced after import unsloth: no (zoo's own); all-masked call finite: no" in text
    # one row per step, the train step failing
    steps = {tr.attrs["data-step"]: [td.all_text() for td in tr.find_all("td")][:3]
             for tr in loss.find_all("tr") if "data-step" in tr.attrs}
    assert steps == {"static": ["static", "pass", "-"], "runtime": ["runtime", "pass", "15.0 s"],
                     "guard": ["guard", "pass", "22.0 s"], "behavior": ["behavior", "pass", "30.0 s"],
                     "train": ["train", "failure", "9.0 s"]}
    # behaviour tests with outcomes and reasons, extras apart
    after = loss.find("tr", data_test="02-after")
    assert "row-fail" in after.classes()
    assert [td.all_text() for td in after.find_all("td")][:2] == ["02-after", "fail"]
    na = loss.find("tr", data_test="11-idempotent")
    assert [td.all_text() for td in na.find_all("td")] == ["11-idempotent", "n/a", "title of 11-idempotent",
                                                           "n/a: no guard in this build", "0.250 s"]
    assert "Probes outside the suite" in text and loss.find("tr", data_test="x-compiled")
    # the training run's per-step table: step 4 masked, n_items 0, NaN loss, marked
    (run,) = [n for n in loss.find_all("div") if n.attrs.get("data-run") == "ga1"]
    assert "run ga1 (gradient accumulation 1): nan-logged from step 4" in run.all_text()
    rows = [[td.all_text() for td in tr.find_all("td")] for tr in run.find("tbody").find_all("tr")]
    assert rows[0] == ["1", "7", "7", "5.541", "5.541", "0.5", "0", "toy_fused×1"]
    assert rows[3] == ["4", "0", "0", "nan", "nan", "0", "0", "toy_fused×1"]
    assert ["row-fail" in tr.classes() for tr in run.find("tbody").find_all("tr")] == [False, False, False, True]
    assert "log tail of step behavior" in text and "Unsloth: patched" in text
    # the other check of the same cell
    cpu = section(d, CPU["id"])
    assert cpu.attrs["data-guard"] == "not-needed" and "pass" in cpu.classes()
    assert "Behaviour suite" in cpu.all_text() and "not run in this cell" in cpu.all_text()
    # installed versions and digests: short in the key table, full in the complete list
    text = d.all_text()
    assert "unsloth_zoo" in text and "2026.9.3" in text and "666666666666" in text and "6" * 64 in text
    # admissibility with uv's full message, timings per check and step
    assert "no: installed with overrides" in text and "we can conclude that your requirements are unsatisfiable." \
        in text
    assert "install2.0 s" in text and "probes37.0 s" in text and "total 42.0 s" in text
    assert f"{LOSS['id']}trainok9.0 sraw0" in text


def test_residual_failures_are_said_in_the_grid_and_the_drill_down() -> None:
    dom = parse(HtmlRenderer().render(make_report([residual_cell()])))
    (td,) = grid_cells(dom).values()
    assert lines(td)[LOSS["id"]] == ("no-ops", "✓ toy-loss: fixed / no-ops 2/2 · train clean · passes, "
                                               "1 residual failure")
    assert td.attrs["data-gate"] == "pass"
    assert "gatepasses, 1 residual failure: x-probe" in section(dom.find("details", id="cell-u2__z2"),
                                                                LOSS["id"]).all_text()


def test_passing_cells_start_closed_and_error_cells_show_the_log(dom: Node) -> None:
    assert "open" not in dom.find("details", id="cell-u1__z2").attrs
    err = dom.find("details", id="cell-u2__z1")
    assert "open" in err.attrs
    text = err.all_text()
    assert "Error (build)" in text and "uv pip install failed (exit 1)" in text
    assert "\x1b[31merror\x1b[0m: resolver failed </pre><script>alert(1)</script>" in text
    assert "not run: build: uv pip install failed (exit 1)" in section(err, LOSS["id"]).all_text()


def test_self_contained_and_locked_down(page: str, dom: Node) -> None:
    for n in dom.iter():
        assert "src" not in n.attrs, n
        href = n.attrs.get("href")
        assert href is None or href.startswith("#"), href
    assert not dom.find_all("link") and not dom.find_all("iframe")
    css = dom.find("style").all_text()
    assert "url(" not in css and "@import" not in css
    csp = next(m.attrs["content"] for m in dom.find_all("meta") if m.attrs.get("http-equiv") ==
               "Content-Security-Policy")
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp
    assert dom.find("script").all_text() == SCRIPT  # the hash covers exactly what is served


def test_long_log_tail_is_cut_with_a_note() -> None:
    cell = error_cell()
    cell["error"]["log_tail"] = "x" * 20_000 + "END"
    text = parse(HtmlRenderer().render(make_report([cell]))).all_text()
    assert "END" in text and "earlier characters in report.json" in text
    assert re.search("x{12001}", text) is None


def test_a_check_without_a_step_renderer_says_n_a_in_place_of_its_details(monkeypatch: pytest.MonkeyPatch) -> None:
    from reports.render import details

    monkeypatch.setattr(details, "renderer_of", lambda cid: None)
    loss = section(parse(HtmlRenderer().render(four_cell_report())).find("details", id="cell-u1__z1"), LOSS["id"])
    text = loss.all_text()
    assert f"step detailsn/a: check {LOSS['id']} is not registered here" in text
    assert "guard probe" not in text and not [n for n in loss.find_all("div") if n.attrs.get("data-run")]
    assert f"Training run, per stepn/a: check {LOSS['id']} is not registered here" in text


def test_the_guard_probe_routes_come_from_the_checks_renderer(dom: Node) -> None:
    loss = section(dom.find("details", id="cell-u1__z1"), LOSS["id"])
    (routes,) = [t for t in loss.find_all("table") if [th.all_text() for th in t.find_all("th")][:2] == [
        "route", "loss"]]
    (row,) = routes.find("tbody").find_all("tr")
    cells = row.find_all("td")
    assert [td.all_text() for td in cells][:2] == ["public", "nan"] and "bad" in cells[1].classes()
    assert "mono" in cells[3].classes()
