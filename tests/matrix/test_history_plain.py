"""What a plain install gets (``plain_install``) and the history's first table, on inputs written here.

No uv runs: the resolver is a function of the test's; the pairs come from the real pair reader judging small
tables made here, or are written by hand where the judgment's newer keys (``breaks_at``) are the point.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from matrix.envs import recipe
from matrix.scan.history import grid, plain_install
from matrix.scan.history.history_page import headline, heatmap, markdown, plain_rows, runs
from probes.checks.pair_compat.pairs import TARGET
from tests.history_inputs import refs, table

NOW = datetime(2026, 12, 4, 12, tzinfo=timezone.utc)
STATE = {"unsloth_zoo": "3.0", "trl": "1.0", "transformers": "5.0"}


class Resolver:
    """Answers ``uv pip compile`` would give: zoo ``picks[v]``, or uv's "no solution" for a release not in it."""

    def __init__(self, picks: dict[str, str], fail: bool = False) -> None:
        self.picks, self.fail, self.calls = picks, fail, []  # type: ignore[var-annotated]

    def __call__(self, version: str, _work: Path) -> dict:
        self.calls.append(version)
        if self.fail:
            return {"error": "uv pip compile unsloth==10 failed (exit 2): Failed to fetch"}
        if version not in self.picks:
            return {"resolved_by": "uv", "zoo": None, "with": {}, "na": "n/a: uv: No solution found"}
        return {"resolved_by": "uv", "zoo": self.picks[version], "with": {"trl": "0.24.0"}}


def resolve(cache: Path, resolver: Resolver | None, state: dict = STATE, now: datetime = NOW,
            offline: bool = False) -> dict:
    return plain_install.resolve_all(["10", "11"], project="unsloth", state=state, cache=cache, resolver=resolver,
                                     offline=offline, log=lambda _m: None, now=now, workers=2)


def test_a_resolution_is_cached_per_release_until_a_mover_releases_or_it_ages(tmp_path: Path) -> None:
    r = Resolver({"10": "2.0"})
    first = resolve(tmp_path, r)
    assert (first["10"]["zoo"], first["10"]["resolved_by"], first["10"]["cached"]) == ("2.0", "uv", False)
    assert first["11"]["na"] == "n/a: uv: No solution found" and first["11"]["zoo"] is None  # a finding, no crash
    assert sorted(r.calls) == ["10", "11"]
    again = resolve(tmp_path, r, now=NOW + timedelta(days=6))
    assert sorted(r.calls) == ["10", "11"] and again["10"]["cached"] and again["11"]["cached"]  # uv's no: cached too
    resolve(tmp_path, r, state={**STATE, "unsloth_zoo": "3.1"})  # a new zoo release moves every resolution
    assert sorted(r.calls) == ["10", "10", "11", "11"]
    resolve(tmp_path, r, now=NOW + timedelta(days=8))  # older than the TTL: torch or peft may have moved it
    assert len(r.calls) == 6


def test_without_uv_the_answer_is_floor_only_and_never_cached(tmp_path: Path) -> None:
    broken = Resolver({}, fail=True)
    got = resolve(tmp_path, broken)
    assert got["10"]["resolved_by"] == "floor-only" and got["10"]["zoo"] is None  # the caller fills the floor pick
    assert "Failed to fetch" in got["10"]["reason"]
    resolve(tmp_path, broken)
    assert len(broken.calls) == 4  # a network error is not an answer: asked again
    offline = resolve(tmp_path, None, offline=True)
    assert offline["10"]["reason"].startswith("--offline and no cached resolution")
    resolve(tmp_path, Resolver({"10": "2.0"}))
    old = resolve(tmp_path, None, now=NOW + timedelta(days=30), offline=True)
    assert (old["10"]["zoo"], old["10"]["resolved_by"]) == ("2.0", "uv")  # offline: an old answer beats none
    assert resolve(tmp_path, None, now=NOW)["10"]["resolved_by"] == "uv"  # --floor-only keeps a fresh answer


def test_the_pins_and_the_message_of_uv_pip_compile() -> None:
    out = "torch==2.15.0\n    # via unsloth-zoo\nunsloth-zoo==2026.3.6\ntrl==0.24.0 ; python_version >= '3.9'\n"
    assert recipe.compiled_versions(out) == {"torch": "2.15.0", "unsloth-zoo": "2026.3.6", "trl": "0.24.0"}
    err = ("warning: something\n  × No solution found when resolving dependencies:\n"
           "  ╰─▶ Because unsloth==10 depends on trl<0.9 and trl<0.9 was yanked, we can conclude that ...\n")
    assert plain_install.uv_message(err) == ("No solution found when resolving dependencies: Because unsloth==10 "
                                             "depends on trl<0.9 and trl<0.9 was yanked, we can conclude that ...")


def document() -> dict:
    """unsloth 10 needs ``loss.b`` at import: uv gives it zoo 1.0, which lacks it (breaks at import), though the
    floor-only pick (3.0) has it; 11 gets zoo 3.0 (compatible); 12 cannot be resolved; 9 gets zoo 0.5, outside the
    window, whose pair the history judged alone (by hand here: breaks at model load, the judgment's newer key)."""
    uns = [{"version": v, "refs": refs("unsloth_zoo.loss.b"), "plain": None} for v in ("10", "11", "12")]
    zoo = [{"version": "1.0", "table": table("a")}, {"version": "3.0", "table": table("a", "b")}]
    judged = grid.judge_all(TARGET, uns, zoo)
    answers = {"10": {"resolved_by": "uv", "zoo": "1.0", "with": {"trl": "0.24.0"}},
               "11": {"resolved_by": "uv", "zoo": "3.0", "with": {}},
               "12": {"resolved_by": "uv", "zoo": None, "with": {}, "na": "n/a: uv: No solution found"},
               "9": {"resolved_by": "uv", "zoo": "0.5", "with": {}}}
    extra = [{"unsloth": "9", "zoo": "0.5", "admitted": True, "class": None, "plain_only": True,
              "verdict": "incompatible", "breaks_at": "model-load", "missing_count": 1, "unknown_count": 0,
              "missing": [{"name": "unsloth_zoo.hf_utils.get_transformers_model_type", "breaks": "model-load",
                           "features": ["model load"], "exception": "TypeError", "where": [], "closest": None,
                           "detail": "TypeError: got an unexpected keyword argument 'model_name'"}], "unknown": []}]
    return {"check": "x", "newest_zoo": "3.0", "pairs": judged["pairs"], "plain_pairs": extra, "scan": {},
            "unsloth": [{"version": v, "floor": None, "plain_pick": "3.0", "plain_install": a}
                        for v, a in answers.items()],
            "zoo": [], "classes": judged["classes"], "runtime": "static", "stats": {"classes": 2, "seconds": 0},
            "lines": [grid.release_line(v, judged["pairs"]) for v in ("10", "11", "12")]}


def test_the_first_table_is_the_resolved_pick_and_that_pairs_verdict() -> None:
    rows = {r["unsloth"]: r for r in plain_rows(document())}
    assert [r["unsloth"] for r in plain_rows(document())] == ["12", "11", "10", "9"]
    assert (rows["10"]["zoo"], rows["10"]["verdict"], rows["10"]["breaks_at"]) == ("1.0", "incompatible", "import")
    assert rows["10"]["names"] == ["unsloth_zoo.loss.b"] and rows["10"]["floor_pick"] == "3.0"  # not what uv gives
    assert (rows["11"]["verdict"], rows["11"]["breaks_at"]) == ("compatible", None)
    assert (rows["12"]["verdict"], rows["12"]["why"]) == ("n/a", "n/a: uv: No solution found")
    assert (rows["9"]["verdict"], rows["9"]["breaks_at"]) == ("incompatible", "model-load")  # judged outside the window
    assert headline(document()) == ("A plain `pip install unsloth==X` breaks 2 of 4 unsloth releases today: 1 at "
                                    "import, 1 at model load; at import: 10; at model load: 9. Others: compatible 1, "
                                    "n/a 1.")
    md = markdown(document())
    assert md.index("## What a plain install gets today") < md.index("## Atlas")  # the first table
    assert "| 10 | - | 1.0 | uv | trl 0.24.0 | incompatible | import | `unsloth_zoo.loss.b` |" in md
    assert ("| 9 | - | 0.5 | uv | - | incompatible | model load | `unsloth_zoo.hf_utils.get_transformers_model_type` |"
            in md)
    page = heatmap(document())
    first = page[page.index("<tr><th>10</th>"):]
    assert first.startswith('<tr><th>10</th><td class="pi" style="background:#c62828"')  # the first column
    assert "a plain install gets zoo 1.0 (uv): incompatible, breaks at import" in first[:400]


def test_a_judgment_without_breaks_at_still_renders_an_incompatible_pair_as_breaking_at_import() -> None:
    old = {"verdict": "incompatible", "missing": [{"name": "x", "breaks": "import"}]}  # cached before the key
    assert grid.breaks_at(old) == "import" and grid.breaks_at({"verdict": "degraded"}) is None
    assert grid.breaks_at({**old, "breaks_at": "model-load"}) == "model-load"


def test_releases_are_named_as_runs_of_consecutive_releases() -> None:
    order = ["1", "2", "3", "4", "5", "6"]
    assert runs(["5", "1", "2", "3"], order) == "1 … 3 (3), 5"


def test_no_uv_on_the_host_falls_back_to_the_floor(tmp_path: Path, monkeypatch) -> None:
    from matrix.errors import SkewmatrixError

    def missing() -> str:
        raise SkewmatrixError("uv: not found. Install it with `pip install uv`")

    monkeypatch.setattr(plain_install, "uv_bin", missing)
    got = resolve(tmp_path, plain_install.resolve_with_uv("unsloth", "unsloth_zoo"))
    assert got["10"]["resolved_by"] == "floor-only" and got["10"]["reason"].startswith("uv: not found")
    assert not list(tmp_path.rglob("*.in"))  # no requirement file left behind
