"""report.html against hand-made cells: grid classes, escaping, drill-down content, self-containment."""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from reports.classify import GUARD_MEANING, ZOO_MEANING, GuardState, ZooState
from reports.model import build_report
from reports.render import RENDERERS
from reports.render.html import SCRIPT, HtmlRenderer
from tests.reports.cells import make_cell
from tests.reports.cells_behavior import SCRIPT_REASON, four_cell_report

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


def test_registered() -> None:
    assert isinstance(RENDERERS["html"], HtmlRenderer) and HtmlRenderer.filename == "report.html"


def test_grid_cells_carry_guard_state_and_gate_classes(dom: Node) -> None:
    grid = dom.find("table", id="grid")
    assert [th.all_text() for th in grid.find_all("th", scope="col")] == ["z1pypi z1", "z2pypi z2"]
    assert [th.all_text().split("pypi")[0].split("git")[0] for th in grid.find_all("th", scope="row")] == \
        ["u1", "u2", "u3"]
    cells = {td.attrs["data-cell"]: td for td in grid.find_all("td") if "data-cell" in td.attrs}
    assert {"gcell", "g-missing", "fail"} <= cells["u1__z1"].classes()
    assert {"gcell", "g-not-needed", "pass"} <= cells["u1__z2"].classes()
    assert {"gcell", "g-error", "fail"} <= cells["u2__z1"].classes()
    assert {"gcell", "g-activates", "pass"} <= cells["u3__z2"].classes()
    assert "✗ missing" in cells["u1__z1"].all_text() and "zoo vulnerable" in cells["u1__z1"].all_text()
    assert "behaviour 2/3 (+1 n/a)" in cells["u1__z1"].all_text()
    assert "✓ not-needed" in cells["u1__z2"].all_text()
    # the two pairs outside the matrix are empty, not missing from the grid
    assert len([td for td in grid.find_all("td") if "empty" in td.classes()]) == 2
    # each grid cell links to its details
    assert cells["u1__z1"].find("a").attrs["href"] == "#cell-u1__z1"
    assert dom.find("details", id="cell-u1__z1")


def test_verdict_summary_and_failing_list_on_top(dom: Node, page: str) -> None:
    assert dom.find("body").attrs["data-gate"] == "fail"
    assert dom.find("div", id="verdict").all_text() == "GATE FAIL: 2 of 4 cell(s)"
    summary = dom.find("p", id="summary").all_text()
    assert "missing 1" in summary and "error 1" in summary and "activates 1" in summary
    assert "no-ops" not in summary  # zero counts are left out
    failing = dom.find("ul", id="failing")
    assert [a.attrs["href"] for a in failing.find_all("a")] == ["#cell-u1__z1", "#cell-u2__z1"]
    # the verdict comes before the grid, the grid before the details
    assert page.index('id="verdict"') < page.index('id="grid"') < page.index('id="cell-u1__z1"')


def test_passing_report_says_pass() -> None:
    report = build_report([make_cell("u1__z2", static="fixed", runtime="fixed", finite=True)], matrix="m.toml")
    dom = parse(HtmlRenderer().render(report))
    assert dom.find("div", id="verdict").all_text() == "GATE PASS: 1 cell(s)"
    assert "v-pass" in dom.find("div", id="verdict").classes()
    assert not dom.find_all("ul", id="failing")


def test_legend_lists_every_state_and_the_gate(dom: Node) -> None:
    legend = dom.find("div", id="legend").all_text()
    for s in GuardState:
        assert GUARD_MEANING[s] in legend
    for z in ZooState:
        assert ZOO_MEANING[z] in legend
    rows = {r.find_all("td")[0].all_text(): r.find_all("td")[1].all_text() for r in dom.find("div", id="legend")
            .find_all("tr")}
    assert rows["missing"] == "fails gate" and rows["error"] == "fails gate" and rows["no-ops"] == "passes"


def test_untrusted_text_is_escaped(page: str, dom: Node) -> None:
    # one script element only: ours; the reason, the log tail and the describe are text
    assert len(dom.find_all("script")) == 1
    assert "<script>alert" not in page and "<b>bold</b>" not in page and "</pre><script>" not in page
    assert html.escape(SCRIPT_REASON, quote=True) in page
    row = dom.find("details", id="cell-u1__z1").find("tr", data_test="02-after")
    assert SCRIPT_REASON in row.all_text()  # the reader sees the original text
    assert 'git "main" <b>bold</b>' in dom.find("table", id="grid").all_text()


def test_quotes_in_cell_id_cannot_break_attributes() -> None:
    cell = make_cell('u1__z1" onmouseover="alert(1)')
    page = HtmlRenderer().render(build_report([cell], matrix="m.toml"))
    dom = parse(page)
    assert not [n for n in dom.iter() if "onmouseover" in n.attrs]
    assert dom.find("details", data_cell='u1__z1" onmouseover="alert(1)')


def test_drill_down_of_a_failing_cell(dom: Node) -> None:
    d = dom.find("details", id="cell-u1__z1")
    assert "open" in d.attrs and {"cell", "g-missing", "fail"} <= d.classes()
    text = d.all_text()
    # zoo state by each detector, with reasons
    assert "static detectorvulnerable: static says vulnerable" in text
    assert "runtime detectorvulnerable: runtime says vulnerable" in text
    assert "guard probeforward replaced after import unsloth: no (zoo's own); all-masked call finite: no" in text
    # behaviour tests with outcomes and reasons, extras apart
    after = d.find("tr", data_test="02-after")
    assert "row-fail" in after.classes()
    assert [td.all_text() for td in after.find_all("td")][:2] == ["02-after", "fail"]
    na = d.find("tr", data_test="11-idempotent")
    assert [td.all_text() for td in na.find_all("td")] == ["11-idempotent", "n/a", "title of 11-idempotent",
                                                           "n/a: no guard in this build", "0.250 s"]
    assert "Probes outside the 13" in text and d.find("tr", data_test="x-compiled")
    # installed versions and digests: short in the key table, full in the complete list
    assert "unsloth_zoo" in text and "2026.9.3" in text and "666666666666" in text and "6" * 64 in text
    # admissibility with uv's message, timings, the probe step's log tail
    assert "no: installed with overrides" in text and "unsatisfiable." in text
    assert "install2.0 s" in text and "probes37.0 s" in text and "total 42.0 s" in text
    assert "log tail of probe step behavior" in text and "Unsloth: patched" in text


def test_passing_cells_start_closed_and_error_cells_show_the_log(dom: Node) -> None:
    assert "open" not in dom.find("details", id="cell-u1__z2").attrs
    err = dom.find("details", id="cell-u2__z1")
    assert "open" in err.attrs
    text = err.all_text()
    assert "Error (build)" in text and "uv pip install failed (exit 1)" in text
    assert "\x1b[31merror\x1b[0m: resolver failed </pre><script>alert(1)</script>" in text
    assert "Behaviour suite" in text and "not run in this cell" in text


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
    cell = make_cell("u1__z1", error={"kind": "crash", "message": "m", "log_tail": "x" * 20_000 + "END"})
    text = parse(HtmlRenderer().render(build_report([cell], matrix="m.toml"))).all_text()
    assert "END" in text and "earlier characters in report.json" in text
    assert re.search("x{12001}", text) is None
