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


def lines(td: Node) -> dict[str, tuple[str, str, str]]:
    """check id -> (guard state, glyph, verdict line on hover) of each square of a grid cell."""
    return {n.attrs["data-check"]: (n.attrs["data-guard"], n.all_text(), n.attrs["title"]) for n in td.find_all("span")
            if "sq" in n.classes()}


def test_registered() -> None:
    assert isinstance(RENDERERS["html"], HtmlRenderer) and HtmlRenderer.filename == "report.html"


def test_grid_has_one_square_per_check_in_each_cell(dom: Node) -> None:
    grid = dom.find("table", id="grid")
    assert [th.all_text() for th in grid.find_all("th", scope="col")] == ["z1pypi z1", "z2pypi z2"]
    assert [th.all_text().split("pypi")[0].split("git")[0] for th in grid.find_all("th", scope="row")] == \
        ["u1", "u2", "u3"]
    cells = grid_cells(dom)
    # the glyph says the gate (the colour is not the only sign); the hover says the whole verdict line
    assert lines(cells["u1__z1"]) == {
        LOSS["id"]: ("missing", "✗",
                     "toy-loss: vulnerable / missing (exposed) 2/3 (+1 n/a) · train nan-logged from step 4"),
        CPU["id"]: ("not-needed", "✓", "cpu-ops: absent / not-needed")}
    assert lines(cells["u1__z2"]) == {
        LOSS["id"]: ("not-needed", "✓", "toy-loss: fixed / not-needed 2/2 · train clean"),
        CPU["id"]: ("not-needed", "✓", "cpu-ops: fixed / not-needed 2/2")}
    assert lines(cells["u2__z1"]) == {LOSS["id"]: ("error", "✗", "toy-loss: unknown / error (unknown)"),
                                      CPU["id"]: ("error", "✗", "cpu-ops: unknown / error (unknown)")}
    assert lines(cells["u3__z2"])[LOSS["id"]] == ("activates", "✓", "toy-loss: vulnerable / activates 3/3 · train "
                                                                      "clean")
    square = next(n for n in cells["u1__z1"].find_all("span") if n.attrs.get("data-check") == LOSS["id"])
    assert {"sq", "g-missing"} <= square.classes()
    assert [cells[c].attrs["data-gate"] for c in ("u1__z1", "u1__z2", "u2__z1", "u3__z2")] == \
        ["fail", "pass", "fail", "pass"]
    assert "fail" in cells["u1__z1"].classes() and "pass" in cells["u3__z2"].classes()
    # the two pairs outside the matrix are empty, not missing from the grid
    assert len([td for td in grid.find_all("td") if "empty" in td.classes()]) == 2
    # each grid cell links to its evidence
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
    # one short line, opening into its details: the symptom and the plain words
    (d,) = first.find_all("details")
    assert "open" not in d.attrs
    assert d.find("summary").all_text() == "u1__z1 · toy-loss missing reach exposed"
    assert "symptom: logged loss NaN from step 4 to the end" in d.all_text()
    # the verdict comes first, then the grid and its legend, then the failures, then the evidence
    assert page.index('id="verdict"') < page.index('id="grid"') < page.index('id="legend"') < \
        page.index('id="failing"') < page.index('id="summary"') < page.index('id="cell-u1__z1"')


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
        "fix": "Upgrade toy_zoo to a release that guards the zero divisor. toy_zoo>=2026.10.6 carries the fix.",
        "next step": NEXT_STEP["missing"]}
    assert advice_of(items["u1__z2"]) == {"reach": "unknown: reach unknown",
                                          "install": "a plain `pip install` / `uv pip install` admits this pairing",
                                          "fix": "Pass num_items_in_batch explicitly until toy_zoo guards it. No "
                                                 "toy_zoo release carries a fix yet: toy/toy-zoo#7 is open, not "
                                                 "released.",
                                          "next step": NEXT_STEP["missing"]}
    # said once: the cells' evidence carries no plain words of their own
    for cid in ("u1__z1", "u1__z2"):
        assert not [d for d in dom.find("details", id=f"cell-{cid}").find_all("dl") if "advice" in d.classes()]
    assert INSTALL[True] not in dom.find("details", id="cell-u1__z2").all_text()


def test_passing_report_says_pass() -> None:
    dom = parse(HtmlRenderer().render(make_report([not_needed_cell()])))
    assert dom.find("div", id="verdict").all_text() == "GATE PASS: 1 cell passes"
    assert "v-pass" in dom.find("div", id="verdict").classes()
    assert not dom.find_all("ul", id="failing")


def test_legend_gives_the_colours_then_each_checks_meanings(dom: Node) -> None:
    legend = dom.find("div", id="legend")
    # the colours first: one entry per guard state, and the warning; the failing ones say so
    states = {li.attrs["data-state"]: li.all_text() for li in legend.find("ul").find_all("li")}
    assert list(states) == ["activates", "no-ops", "not-needed", "missing", "broken", "error", "warn"]
    assert states["missing"] == "✗ missing: nothing fixes it · fails the gate"
    assert states["no-ops"] == "✓ no-ops: a guard stays idle"
    # then each check's meanings, collapsed
    blocks = {n.attrs["data-check"]: n for n in legend.find_all("details") if "lcheck" in n.classes()}
    assert all("open" not in b.attrs for b in blocks.values())
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
    assert "open" not in d.attrs and {"cell", "fail"} <= d.classes()  # collapsed until asked for
    loss = section(d, LOSS["id"])
    assert loss.attrs["data-guard"] == "missing" and "fail" in loss.classes()
    text = loss.all_text()
    # zoo state by each detector, with reasons; the training outcome; the symptom
    assert "static detectorvulnerable: static says vulnerable" in text
    assert "runtime detectorvulnerable: runtime says vulnerable" in text
    assert "trainingnan-logged from step 4: num_items_in_batch reached the loss as 0 on step 4" in text
    assert "symptomlogged loss NaN from step 4 to the end" in text
    assert "guard probeforward replaced after import unsloth: no (zoo's own); all-masked call finite: no" in text
    # every step on one line; the one that did not pass again as a row, with why
    (steps,) = [p for p in loss.find_all("p") if "steps" in p.classes()]
    assert steps.all_text() == ("Steps: static pass · runtime pass 15.0 s · guard pass 22.0 s · behavior pass 30.0 s · "
                                "train failure 9.0 s")
    rows = {tr.attrs["data-step"]: [td.all_text() for td in tr.find_all("td")]
            for tr in loss.find_all("tr") if "data-step" in tr.attrs}
    assert rows == {"train": ["train", "failure",
                              "nan-logged from step 4: num_items_in_batch reached the loss as 0 on step 4"]}
    # behaviour: a row per failing test with its reason; passing ids on one line; n/a ones per reason
    after = loss.find("tr", data_test="02-after")
    assert "row-fail" in after.classes()
    assert [td.all_text() for td in after.find_all("td")][:2] == ["02-after", "fail"]
    passed = [p.all_text() for p in loss.find_all("p") if "passed" in p.classes()]
    assert passed == ["2 pass: 01-before, 03-dense", "1 n/a: no guard in this build: 11-idempotent",
                      "1 n/a: why x-compiled: x-compiled"]
    assert "Probes outside the suite" in text and loss.find("tr", data_test="x-public-all-masked")
    # the training run: only its fully masked and non-finite steps, the kernels said once
    (run,) = [n for n in loss.find_all("div") if n.attrs.get("data-run") == "ga1"]
    assert run.find("p").all_text() == ("run ga1 (gradient accumulation 1): nan-logged from step 4 (1 of 4 steps: the "
                                        "fully masked and the non-finite ones (every step in report.json); kernels "
                                        "every step: toy_fused×1)")
    rows = [[td.all_text() for td in tr.find_all("td")] for tr in run.find("tbody").find_all("tr")]
    assert rows == [["4", "0", "0", "nan", "nan", "0", "0"]]
    assert "row-fail" in run.find("tbody").find("tr").classes()
    assert "log tail of step behavior" in text and "Unsloth: patched" in text
    # the other check of the same cell
    cpu = section(d, CPU["id"])
    assert cpu.attrs["data-guard"] == "not-needed" and "pass" in cpu.classes()
    assert "Behaviour suite" in cpu.all_text() and "not run in this cell" in cpu.all_text()
    # the builds with short digests; the key distributions' versions on one line (the rest in report.json)
    text = d.all_text()
    assert "aaaaaaaaaaaa" in text and "a" * 13 not in text
    (inst,) = [p for p in d.find_all("p") if "installed" in p.classes()]
    assert inst.all_text() == ("Installed (4 key of 4; all, with digests, in report.json): unsloth 2026.10.9 · "
                               "unsloth_zoo 2026.9.3 · torch 2.12.1 · accelerate 1.16.0")
    # admissibility with uv's full message; the cell's own timings on one line
    assert "no: installed with overrides" in text and "we can conclude that your requirements are unsatisfiable." \
        in text
    (timings,) = [p for p in d.find_all("p") if "timings" in p.classes()]
    assert timings.all_text() == "Timings: install 2.0 s · probes 37.0 s · total 42.0 s"
    # no raw JSON of a step's result: report.json holds it
    assert '"all_masked_finite"' not in text


def test_residual_failures_are_said_in_the_grid_and_the_drill_down() -> None:
    dom = parse(HtmlRenderer().render(make_report([residual_cell()])))
    (td,) = grid_cells(dom).values()
    assert lines(td)[LOSS["id"]] == ("no-ops", "✓", "toy-loss: fixed / no-ops 2/2 · train clean · passes, "
                                                    "1 residual failure")
    assert td.attrs["data-gate"] == "pass"
    assert "gatepasses, 1 residual failure: x-probe" in section(dom.find("details", id="cell-u2__z2"),
                                                                LOSS["id"]).all_text()


def test_every_cell_starts_closed_and_error_cells_show_the_log(dom: Node) -> None:
    assert [n.attrs["data-cell"] for n in dom.find_all("details") if "cell" in n.classes() and "open" in n.attrs] == []
    err = dom.find("details", id="cell-u2__z1")
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
    assert "guard probe" not in text
    # the run's outcome still, without its per-step rows, which need the renderer
    (run,) = [n for n in loss.find_all("div") if n.attrs.get("data-run")]
    assert run.all_text() == "run ga1 (gradient accumulation 1): nan-logged from step 4" and not run.find_all("table")
    assert (f"Training run, per steprun ga1 (gradient accumulation 1): nan-logged from step 4n/a: check {LOSS['id']} "
            "is not registered here") in text


def test_the_guard_probe_routes_come_from_the_checks_renderer(dom: Node) -> None:
    loss = section(dom.find("details", id="cell-u1__z1"), LOSS["id"])
    (routes,) = [t for t in loss.find_all("table") if [th.all_text() for th in t.find_all("th")][:2] == [
        "route", "loss"]]
    (row,) = routes.find("tbody").find_all("tr")
    cells = row.find_all("td")
    assert [td.all_text() for td in cells][:2] == ["public", "nan"] and "bad" in cells[1].classes()
    assert "mono" in cells[3].classes()


def test_each_grid_square_carries_its_checks_short_label(dom: Node) -> None:
    """The grid reads without the legend: every square sits beside its check's short label."""
    rows = [n for n in grid_cells(dom)["u1__z1"].find_all("span") if "sqrow" in n.classes()]
    assert [(r.find_all("span")[1].attrs["data-check"], r.find_all("small")[0].all_text()) for r in rows] == [
        (LOSS["id"], "toy-loss"), (CPU["id"], "cpu-ops")]
