"""Release policy: ``fixed_since`` on synthetic regression timelines, boundaries, and what gets recommended."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from matrix.cli.release_gate import pick_zoo
from matrix.scan import admitted_floor, recommended_zoo, timeline
from matrix.scan.policy import boundaries
from reports.gate import recommendation
from reports.render.scan_markdown import render


def z(version: str, verdict: str, yanked: bool = False, confirmed_by: str = "static-only") -> dict[str, Any]:
    return {"version": version, "verdict": verdict, "yanked": yanked, "confirmed_by": confirmed_by,
            "reason": f"{verdict} (test)", "file": None}


# fixed early, vulnerable again (a regression), fixed again, one undecided release, then fixed;
# a yanked vulnerable release at the top.
REGRESSION = [z("1.0", "vulnerable"), z("2.0", "fixed"), z("2.1", "fixed"), z("3.0", "vulnerable"),
              z("4.0", "fixed", confirmed_by="runtime"), z("5.0", "unknown"), z("6.0", "fixed"),
              z("7.0", "vulnerable", yanked=True)]


def test_fixed_since_skips_the_regression() -> None:
    t = timeline(REGRESSION, include_yanked=False)
    assert t["first_fixed"] == "2.0"  # the naive answer, which 3.0 contradicts
    assert t["fixed_since"] == "4.0" and t["fixed_since_confirmed_by"] == "runtime"
    assert t["last_vulnerable"] == "3.0" and t["regressions"] == [{"version": "3.0", "after_fixed": "2.1"}]
    assert t["unknown_after_fixed_since"] == ["5.0"]


def test_a_yanked_vulnerable_release_counts_only_when_asked() -> None:
    t = timeline(REGRESSION, include_yanked=True)
    assert t["fixed_since"] is None and t["last_vulnerable"] == "7.0"
    assert recommended_zoo({"timeline": t}) is None


def test_an_inconsistent_release_blocks_fixed_since_like_a_vulnerable_one() -> None:
    rows = [z("1.0", "vulnerable"), z("2.0", "fixed"), z("3.0", "inconsistent", confirmed_by="runtime"),
            z("4.0", "fixed")]
    t = timeline(rows, include_yanked=False)
    assert t["fixed_since"] == "4.0" and t["regressions"] == []


def test_the_recommendation_admits_no_vulnerable_release() -> None:
    rec = recommended_zoo({"timeline": timeline(REGRESSION, include_yanked=False)})
    assert rec is not None and rec.requirement() == "unsloth_zoo>=4.0"
    assert "confirmed by running the kernel" in rec.words()
    floor = admitted_floor(rec.requirement().removeprefix("unsloth_zoo"), REGRESSION, include_yanked=False)
    assert floor is not None and floor["admits_vulnerable"] == []
    # the naive first_fixed would have admitted the regression
    naive = admitted_floor(">=2.0", REGRESSION, include_yanked=False)
    assert naive is not None and naive["admits_vulnerable"] == ["3.0"]


def test_the_gate_candidates_use_fixed_since_when_the_requirement_is_unknown() -> None:
    doc = {"zoo": REGRESSION, "timeline": timeline(REGRESSION, include_yanked=False)}
    rec = recommended_zoo(doc)
    assert rec is not None
    picks = dict(pick_zoo(doc["zoo"], f">={rec.version}", below=2))
    assert picks == {"4.0": "admitted floor", "2.1": "below the floor (reachable by a pin)",
                     "3.0": "below the floor (reachable by a pin)", "6.0": "newest"}


def test_recommendation_text_names_fixed_since() -> None:
    cell = {"verdicts": {"k-one": {"guard": "missing", "guard_reason": "", "zoo": "vulnerable", "symptom": "NaN"}},
            "builds": {"zoo": {"version": "3.0"}, "unsloth": {"version": "9.0"}}}
    check = {"id": "k-one", "hazard": "a made-up hazard", "fix_hint": "upgrade", "zoo_meaning": {}}
    rec = recommended_zoo({"timeline": timeline(REGRESSION, include_yanked=False)})
    text = recommendation(cell, [check], rec.version if rec else None, rec.confirmed_by if rec else None, "k-one")
    assert "unsloth_zoo>=4.0" in text and "unsloth_zoo>=2.0" not in text
    assert "no vulnerable release from it on" in text


def test_markdown_recommends_fixed_since_and_warns_about_first_fixed() -> None:
    doc = {"check": "fused-ce-masked-nan", "index": {"url": "https://i/simple", "origin": {"unsloth-zoo": "index"}},
           "generated": "2026-12-03T00:00:00+00:00", "warnings": [], "errors": [], "unsloth": [],
           "zoo": REGRESSION, "timeline": timeline(REGRESSION, include_yanked=False)}
    md = render(doc)
    assert "- **Recommend unsloth_zoo>=4.0**: no release from 4.0 on is vulnerable or inconsistent " \
           "(confirmed at runtime)." in md
    assert "- First fixed release: 2.0 (not recommended: a vulnerable or inconsistent release follows it)." in md
    assert "- **Regression: 3.0 is vulnerable again after 2.1 was fixed.**" in md
    assert "| 7.0 (yanked) | vulnerable | static-only | - | vulnerable (test) |" in md
    assert "INCONSISTENT" not in md


def test_markdown_is_loud_about_inconsistent_releases() -> None:
    rows = [z("1.0", "vulnerable"), z("2.0", "inconsistent", confirmed_by="runtime")]
    doc = {"index": {"url": "u", "origin": {}}, "generated": "g", "warnings": [], "errors": [], "unsloth": [],
           "zoo": rows, "timeline": timeline(rows, include_yanked=False)}
    md = render(doc)
    assert md.splitlines()[4].startswith("> **INCONSISTENT: the static and runtime detectors disagree on 1 "
                                         "release(s): 2.0.")
    assert "| 2.0 | **INCONSISTENT** | runtime |" in md
    assert "- **No release to recommend**" in md


def test_boundaries_are_both_sides_of_every_change() -> None:
    assert boundaries(REGRESSION, include_yanked=False) == ["1.0", "2.0", "2.1", "3.0", "4.0"]
    assert boundaries([z("1", "absent"), z("2", "fixed")], include_yanked=False) == []


VERDICTS = st.sampled_from(["vulnerable", "fixed", "absent", "unknown", "inconsistent"])


@given(st.lists(st.tuples(VERDICTS, st.booleans()), max_size=30), st.booleans())
def test_fixed_since_never_precedes_a_vulnerable_release(spec: list[tuple[str, bool]], include_yanked: bool) -> None:
    rows = [z(f"1.{i}", v, yanked=y) for i, (v, y) in enumerate(spec)]
    t = timeline(rows, include_yanked)
    considered = [r for r in rows if include_yanked or not r["yanked"]]
    since = t["fixed_since"]
    if since is None:
        # only when no fixed release follows the last unsafe one
        unsafe = [i for i, r in enumerate(considered) if r["verdict"] in ("vulnerable", "inconsistent")]
        tail = considered[unsafe[-1] + 1:] if unsafe else considered
        assert all(r["verdict"] != "fixed" for r in tail)
        return
    assert next(r for r in considered if r["version"] == since)["verdict"] == "fixed"
    later = [r for r in considered if Version(r["version"]) >= Version(since)]
    assert all(r["verdict"] not in ("vulnerable", "inconsistent") for r in later)


@pytest.mark.parametrize("doc", [None, {}, {"timeline": {"fixed_since": None}}, {"timeline": "x"}])
def test_no_recommendation_without_fixed_since(doc: Any) -> None:
    assert recommended_zoo(doc) is None
