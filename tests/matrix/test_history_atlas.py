"""The atlas: one line per unsloth release merging the pair verdicts, the other checks' scan verdicts and the
guards, on a document written here (real pair reader on small tables; checks taken from the registry)."""

from __future__ import annotations

from matrix.scan.history import atlas, grid
from matrix.scan.history.history_page import heatmap, markdown
from probes import checks
from probes.checks.pair_compat.pairs import TARGET
from tests.history_inputs import refs, table

SCANNED = checks.with_capability("scan")
GUARDED = next(n for n in SCANNED if checks.capability(n, "scan").guard is not None)
UNGUARDED = next(n for n in SCANNED if checks.capability(n, "scan").guard is None)
C1, C2 = checks.info(GUARDED).id, checks.info(UNGUARDED).id
M1 = checks.info(GUARDED).zoo_meaning["vulnerable"]
M2 = checks.info(UNGUARDED).zoo_meaning["vulnerable"]


def document() -> dict:
    """unsloth 10 and 11 import ``loss.b``, which zoo 1.0 lacks. C1 (a guard exists: absent in 10, present in 11)
    is vulnerable up to zoo 2.5 (runtime-confirmed there), fixed from 3.0; C2 (no guard exists) is vulnerable in
    zoo 4.0 only."""
    uns = [{"version": v, "refs": refs("unsloth_zoo.loss.b"), "plain": None} for v in ("10", "11")]
    zoo = [{"version": "1.0", "table": table("a")}] + [{"version": v, "table": table("a", "b")}
                                                        for v in ("2.0", "2.5", "3.0", "4.0")]
    judged = grid.judge_all(TARGET, uns, zoo)
    scan = {C1: {"zoo": {"1.0": "vulnerable", "2.0": "vulnerable", "2.5": "vulnerable", "3.0": "fixed", "4.0": "fixed"},
                 "confirmed": {"2.5": "vulnerable"}, "guard": {"10": {"state": "absent"}, "11": {"state": "present"}},
                 "meaning": checks.info(GUARDED).zoo_meaning},
            C2: {"zoo": {"1.0": "absent", "2.0": "absent", "2.5": "absent", "3.0": "absent", "4.0": "vulnerable"},
                 "confirmed": {}, "guard_na": "n/a: names no guard", "meaning": checks.info(UNGUARDED).zoo_meaning},
            "no-scan-check": {"na": "n/a: declares no scan target"}}
    plain = {"resolved_by": "uv", "zoo": "2.5", "with": {}}
    return {"check": "x", "newest_zoo": "4.0", "pairs": judged["pairs"], "scan": scan, "zoo": [],
            "unsloth": [{"version": v, "floor": None, "plain_pick": "4.0", "plain_install": plain}
                        for v in ("10", "11")],
            "classes": judged["classes"], "runtime": "static", "stats": {"classes": 2, "seconds": 0},
            "lines": [grid.release_line(v, judged["pairs"]) for v in ("10", "11")]}


def test_one_line_per_release_pins_the_newest_span_with_no_known_hazard_and_names_each_hazard_in_its_words() -> None:
    doc = atlas.attach(document())
    by = {a["unsloth"]: a for a in doc["atlas"]}
    assert by["10"]["line"] == (
        f"unsloth 10: zoo 4.0 works but {M2} ({C2}; no guard exists); pin zoo 3.0 (works, no known hazard); "
        f"zoo 2.0 … 2.5 works but {M1} ({C1}, runtime-confirmed at zoo 2.5; no guard in 10); "
        "zoo 1.0 breaks at import (`b`); a plain install gets zoo 2.5 today (uv)")
    assert by["11"]["line"].startswith(f"unsloth 11: zoo 4.0 works but {M2} ({C2}; no guard exists); pin zoo 3.0")
    assert f"({C1}, runtime-confirmed at zoo 2.5; guard present in 11)" in by["11"]["line"]
    spans = by["10"]["spans"]
    assert [(s["from"], s["to"], s["verdict"], s["breaks_at"]) for s in spans] == [
        ("1.0", "1.0", "incompatible", "import"), ("2.0", "2.5", "compatible", None),
        ("3.0", "3.0", "compatible", None), ("4.0", "4.0", "compatible", None)]
    assert spans[1]["hazards"] == [{"check": C1, "verdict": "vulnerable", "guard": "absent", "meaning": M1,
                                    "confirmed": ["2.5"]}]


def test_a_release_with_a_hazard_everywhere_has_nothing_to_pin() -> None:
    doc = document()
    doc["scan"][C1]["zoo"] |= {"3.0": "vulnerable"}
    doc["scan"][C2]["zoo"] |= {"3.0": "vulnerable"}
    line = atlas.attach(doc)["atlas"][0]["line"]
    assert line.startswith("unsloth 10: no zoo release of the window works with no known hazard; zoo 4.0 works but")
    assert f"zoo 3.0 works but {M1} ({C1}; no guard in 10); and {M2} ({C2}; no guard exists)" in line


def test_the_atlas_renders_in_the_markdown_and_the_heatmap_marks_unguarded_hazard_cells() -> None:
    doc = atlas.attach(document())
    md = markdown(doc)
    assert f"- {doc['atlas'][0]['line']}" in md
    assert f"- {C1}: fixed 2, vulnerable 3; guard in unsloth: absent 1, present 1" in md
    page = heatmap(doc)
    row10 = page[page.index("<tr><th>10</th>"):page.index("</tr>", page.index("<tr><th>10</th>"))]
    row11 = page[page.index("<tr><th>11</th>"):page.index("</tr>", page.index("<tr><th>11</th>"))]
    # C1 on 2.0 … 2.5 (zoo 1.0 breaks at import: it never reaches the hazard), C2 on 4.0
    assert row10.count(f'data-hazard="{C1}"') == 2 and row10.count(f'data-hazard="{C2}"') == 1
    assert row11.count("data-hazard") == 1  # the guard is present in 11: only the hazard no guard exists for
