"""summary.md, the GitHub step summary: ✅/❌ headline, failing cells expanded, passing collapsed, under 1 MiB."""

from __future__ import annotations

import copy

from reports.advice import NEXT_STEP
from reports.render import RENDERERS
from reports.render.summary import CAP_BYTES, SummaryRenderer
from tests.reports.cells import LOSS, make_report, reachable_cell, residual_cell, unreachable_cell
from tests.reports.cells_behavior import not_needed_cell


def test_registered() -> None:
    assert isinstance(RENDERERS["summary"], SummaryRenderer) and SummaryRenderer.filename == "summary.md"


def test_failing_cells_expanded_with_plain_words_passing_collapsed() -> None:
    report = make_report([unreachable_cell(), reachable_cell(), residual_cell()],
                         scan={"timeline": {"fixed_since": "2026.10.6"}})
    lines = SummaryRenderer().render(report).splitlines()
    assert lines[0] == "## ❌ skewmatrix: GATE FAIL: 2 of 3 cells fail"
    assert lines[2] == "Matrix `matrix/test.toml` · 3 cells × 2 checks · failing states: broken, error, missing."
    assert "| `toy-loss-masked-nan` (toy-loss) | no-ops 1, missing 1, not-needed 1 |" in lines
    start = lines.index("### ❌ `u1__z1`")
    assert lines[start:start + 12] == [
        "### ❌ `u1__z1`",
        "",
        "- toy-loss: vulnerable / **missing** (exposed) 2/3 (+1 n/a) · train nan-logged from step 4",
        "- cpu-ops: absent / not-needed",
        "",
        "- **FAIL** `u1__z1` · `toy-loss-masked-nan`: **missing** (reach exposed): no guard replaced the forward",
        "  - symptom: logged loss NaN from step 4 to the end",
        "  - reach: exposed: reach exposed",
        "  - install: only an explicit pin or a lockfile reaches this pairing: a plain install refuses it",
        "  - fix: Upgrade toy_zoo to a release that guards the zero divisor. toy_zoo>=2026.10.6 carries the fix.",
        f"  - next step: {NEXT_STEP['missing']}",
        "",
    ]
    assert "  - install: a plain `pip install` / `uv pip install` admits this pairing" in lines
    # the one passing cell, folded, with its residual failure said
    fold = lines.index("<details><summary>✅ 1 passing cell</summary>")
    assert lines[fold + 2] == ("- `u2__z2`: toy-loss: fixed / no-ops 2/2 · train clean · passes, 1 residual failure; "
                               "cpu-ops: absent / not-needed")
    assert lines[fold + 4] == "</details>"
    assert fold > start  # failing first


def test_all_passing_headline() -> None:
    text = SummaryRenderer().render(make_report([not_needed_cell()]))
    assert text.startswith("## ✅ skewmatrix: GATE PASS: 1 cell passes\n")
    assert "### " not in text and "<details><summary>✅ 1 passing cell</summary>" in text


def test_a_stale_expectation_is_expanded_even_when_every_check_passes() -> None:
    cell = not_needed_cell()
    cell["expect"] = {LOSS["id"]: "missing"}
    text = SummaryRenderer().render(make_report([cell]))
    assert "### ⚠️ `u1__z2`" in text
    assert "- **XPASS** `u1__z2` · `toy-loss-masked-nan`: expected missing, got not-needed: the expectation is stale" \
        in text


def synthetic(n: int) -> dict:
    """n cells, every other one failing, each with a 5,000-character reason: 250 failing cells of over 5 kB each
    are over 1 MiB together."""
    cells = []
    for i in range(n):
        cell = copy.deepcopy(unreachable_cell() if i % 2 == 0 else not_needed_cell())
        cell["cell_id"] = f"u{i}__z{i}"
        cell["builds"]["unsloth"]["name"], cell["builds"]["zoo"]["name"] = f"u{i}", f"z{i}"
        for v in cell["verdicts"].values():
            v["guard_reason"] = "r" * 5_000
        cells.append(cell)
    return make_report(cells)


def test_a_500_cell_report_stays_under_the_cap_and_says_what_it_left_out() -> None:
    report = synthetic(500)
    text = SummaryRenderer().render(report)
    size = len(text.encode("utf-8"))
    assert size < CAP_BYTES
    assert text.startswith("## ❌ skewmatrix: GATE FAIL: 250 of 500 cells fail")
    shown = text.count("### ❌ ")
    assert 0 < shown < 250  # the cap mattered: some failing cells were left out
    note = next(line for line in text.splitlines() if line.startswith("**"))
    assert note.startswith(f"**{250 - shown} failing cell(s) left out to keep this summary under GitHub's 1 MiB cap:**")
    assert text.rstrip().endswith("in this run's artifacts.")


def test_a_small_budget_cuts_passing_cells_with_a_note() -> None:
    report = make_report([unreachable_cell(), *(
        {**not_needed_cell(), "cell_id": f"u1__p{i}",
         "builds": {"unsloth": {"name": "u1"}, "zoo": {"name": f"p{i}"}}} for i in range(50))])
    text = SummaryRenderer(budget=4_000).render(report)
    assert len(text.encode("utf-8")) < 5_000
    assert "### ❌ `u1__z1`" in text and "more passing cell(s) left out (step summary size cap)" in text
