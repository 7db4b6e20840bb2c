"""The history's ``--confirm`` on rows written here: which pairs, how an outcome is merged, cached and shown.

No env is built: the runtime check is a function of the test's (``runner``), the verdicts come from the real
pair reader judging small tables made here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.scan.history import grid, history_confirm
from matrix.scan.history.history_confirm import Outcome, boundaries, merge, pick
from matrix.scan.history.history_page import heatmap, markdown
from probes.checks.pair_compat.pairs import TARGET


def row(u: str, z: str, verdict: str, cls: str | None = "c") -> dict:
    return {"unsloth": u, "zoo": z, "verdict": verdict, "class": cls, "admitted": True}


def test_boundaries_are_both_sides_of_each_change_along_the_zoo_axis() -> None:
    pairs = [row("10", z, v) for z, v in (("1.0", "incompatible"), ("1.10", "compatible"), ("1.2", "incompatible"),
                                         ("2.0", "compatible"))]  # zoo order: 1.0 < 1.2 < 1.10 < 2.0 (not text order)
    pairs += [row("11", z, "compatible") for z in ("1.0", "1.2", "1.10", "2.0")]  # no change: no boundary
    assert boundaries(pairs) == {("10", "1.2"), ("10", "1.10")}


def test_pick_adds_one_pair_per_class_no_boundary_stands_for_newest_first_and_capped() -> None:
    pairs = [row("10", "1.0", "incompatible", "A"), row("10", "2.0", "compatible", "B"),
             row("10", "3.0", "compatible", "B"),  # boundary 1.0|2.0 covers classes A and B
             row("9", "1.0", "compatible", "C"), row("9", "2.0", "compatible", "C"),  # C: no boundary
             row("9", "3.0", "compatible", "D"), row("8", "3.0", "compatible", "D"),  # D: newest member (9, 3.0)
             row("7", "1.0", "unknown", None)]  # not read: no class, and alone on its row: no change
    assert pick(pairs, 12) == [("10", "2.0", "boundary"), ("10", "1.0", "boundary"), ("9", "3.0", "class"),
                               ("9", "2.0", "class")]
    assert pick(pairs, 3) == pick(pairs, 12)[:3]
    assert pick(pairs, 0) == []


@pytest.mark.parametrize(("static", "outcome", "verdict", "by"), [
    ("compatible", "imports", "compatible", "runtime"),
    ("degraded", "imports", "degraded", "runtime"),
    ("incompatible", "skew", "incompatible", "runtime"),
    ("incompatible", "imports", "inconsistent", "inconsistent"),  # an import that succeeds is never incompatible
    ("compatible", "skew", "inconsistent", "inconsistent"),
    ("unknown", "skew", "incompatible", "runtime"),  # the runtime decides what the source could not
    ("unknown", "imports", "unknown", "runtime"),
    ("incompatible", "n/a", "incompatible", "static-only"),
    ("compatible", "n/a", "compatible", "static-only"),
])
def test_merge(static: str, outcome: str, verdict: str, by: str) -> None:
    got = merge(row("10", "1.0", static), Outcome(outcome, "why", 1.0), "boundary")
    assert (got["verdict"], got["confirmed_by"], got["static_verdict"]) == (verdict, by, static)
    assert got["runtime"]["outcome"] == outcome and got["confirm_why"] == "boundary"


def refs(path: str) -> dict:
    return {"refs": [{"path": path, "kind": "from", "modules": 1, "file": "unsloth/models/_utils.py", "line": 3,
                      "function": None, "swallowed": [], "branch": None, "import_time": True}], "unparsed": []}


def table(*names: str) -> dict:
    return {"modules": {"unsloth_zoo": {"names": [], "unknown": [], "package": True},
                        "unsloth_zoo.loss": {"names": list(names), "unknown": [], "package": False}}}


def document() -> dict:
    """unsloth 10 needs ``loss.b``: zoo 1.0 lacks it (incompatible), zoo 2.0 has it (compatible)."""
    uns = [{"version": "10", "refs": refs("unsloth_zoo.loss.b"), "plain": None, "sha256": "u10"}]
    zoo = [{"version": "1.0", "table": table("a"), "sha256": "z1"}, {"version": "2.0", "table": table("a", "b"),
                                                                    "sha256": "z2"}]
    judged = grid.judge_all(TARGET, uns, zoo)
    return {"check": "x", "unsloth": [{"version": "10", "sha256": "u10", "plain_pick": "2.0", "floor": None}],
            "zoo": [{"version": z["version"], "sha256": z["sha256"]} for z in zoo], "newest_zoo": "2.0",
            "pairs": judged["pairs"], "classes": judged["classes"], "scan": {}, "runtime": "static",
            "lines": [grid.release_line("10", judged["pairs"])], "stats": {"classes": 2, "seconds": 0}}


def test_confirm_records_each_pair_caches_it_and_redoes_the_lines(tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []
    answers = {"1.0": Outcome("imports", "import unsloth succeeded", 2.0, {"unsloth": "10"}),  # static missed it
               "2.0": Outcome("imports", "import unsloth succeeded", 3.0)}

    def runner(u: str, z: str, _work: Path) -> Outcome:
        calls.append((u, z))
        return answers[z]

    lines: list[str] = []
    doc = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lines.append, runner=runner)
    by = {p["zoo"]: p for p in doc["pairs"]}
    assert calls == [("10", "2.0"), ("10", "1.0")]  # both sides of the one boundary, newest first
    assert (by["1.0"]["verdict"], by["1.0"]["static_verdict"], by["1.0"]["confirmed_by"]) == (
        "inconsistent", "incompatible", "inconsistent")
    assert (by["2.0"]["verdict"], by["2.0"]["confirmed_by"]) == ("compatible", "runtime")
    assert lines[0].startswith("confirm [1/2] unsloth 10 x zoo 2.0 (boundary): static compatible, runtime imports")
    assert doc["confirm"]["confirmed_by"] == {"inconsistent": 1, "runtime": 1}
    assert "zoo 1.0: inconsistent" in doc["lines"][0]  # the line no longer calls it incompatible
    again = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lines.append, runner=runner)
    assert len(calls) == 2 and again["pairs"] == doc["pairs"]  # the rerun built nothing: same answers, cached


def test_an_environment_failure_is_not_cached_and_another_wheel_is_another_pair(tmp_path: Path) -> None:
    calls: list[str] = []

    def runner(u: str, z: str, _work: Path) -> Outcome:
        calls.append(z)
        return Outcome("n/a", "uv pip install failed", 1.0, cacheable=False)

    doc = history_confirm.confirm(document(), max_n=1, cache=tmp_path, log=lambda _m: None, runner=runner)
    assert [p.get("confirmed_by") for p in doc["pairs"]] == [None, "static-only"]  # the cap: the newest pair only
    history_confirm.confirm(document(), max_n=1, cache=tmp_path, log=lambda _m: None, runner=runner)
    assert calls == ["2.0", "2.0"]


def test_markdown_and_heatmap_show_the_confirmed_pairs(tmp_path: Path) -> None:
    def runner(u: str, z: str, _work: Path) -> Outcome:
        if z == "1.0":
            return Outcome("skew", "ImportError: cannot import name 'b' from 'unsloth_zoo.loss'", 2.0)
        return Outcome("n/a", "no accelerator: RuntimeError: Found no NVIDIA driver", 1.0)

    doc = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lambda _m: None, runner=runner)
    md = markdown(doc)
    section = md[md.index("## Confirmed at runtime"):]
    assert "| 10 | 2.0 | boundary | compatible | n/a | static-only | no accelerator: RuntimeError" in section
    assert "| 10 | 1.0 | boundary | incompatible | skew | runtime | ImportError: cannot import name 'b'" in section
    assert section.index("| 10 | 2.0 |") < section.index("| 10 | 1.0 |")
    page = heatmap(doc)
    assert page.count('<td class="rt"') == 2
    assert "static incompatible, runtime skew: ImportError: cannot import name &#x27;b&#x27;" in page
    assert "## Confirmed at runtime" not in markdown(document())  # without --confirm: no section
    assert 'class="rt"' not in heatmap(document())


def test_an_inconsistent_pair_has_its_own_colour() -> None:
    doc = document()
    doc["pairs"][0] = merge(doc["pairs"][0], Outcome("imports", "import unsloth succeeded", 1.0), "boundary")
    assert "background:#6a1b9a" in heatmap(doc) and "inconsistent 1" in markdown(doc)
    assert "inconsistent" not in markdown(document()).split("\n")[2]  # no zero count without a confirmation


def test_the_in_env_entry_classifies_the_import_with_the_checks_rule(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A made-up unsloth whose import fails on a zoo name inside a wrapper: ``skew``, the innermost message."""
    import json
    import sys

    from probes.checks.pair_compat import confirm as entry

    (tmp_path / "unsloth").mkdir()
    (tmp_path / "unsloth_zoo").mkdir()
    (tmp_path / "unsloth_zoo" / "__init__.py").write_text("")
    (tmp_path / "unsloth_zoo" / "loss.py").write_text("a = 1\n")
    (tmp_path / "unsloth" / "__init__.py").write_text(
        "try:\n    from unsloth_zoo.loss import gone\nexcept ImportError as e:\n"
        "    raise ImportError('Unsloth: Please install unsloth_zoo') from e\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("unsloth", "unsloth_zoo", "unsloth_zoo.loss"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert entry.main(["--out", str(tmp_path / "out.json")]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert (got["imported"], got["class"]) == (False, "skew")
    assert got["reason"].startswith("ImportError: cannot import name 'gone' from 'unsloth_zoo.loss'")
    assert [e["link"] for e in got["chain"]] == ["raised", "__cause__"]
    (tmp_path / "unsloth" / "__init__.py").write_text("from unsloth_zoo.loss import a\n")
    for name in ("unsloth", "unsloth_zoo", "unsloth_zoo.loss"):
        sys.modules.pop(name, None)
    assert entry.import_once() == {"imported": True, "class": "ok", "reason": "import unsloth succeeded",
                                   "chain": []}
    for name in ("unsloth", "unsloth_zoo", "unsloth_zoo.loss"):
        sys.modules.pop(name, None)


def test_the_history_bench_writes_both_runs_against_the_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from matrix.scan.history import history_bench

    seen: list[tuple[list[str], str]] = []

    def timed(argv: list[str], env: dict[str, str], log: Path) -> dict:
        folder = Path(argv[argv.index("-o") + 1])
        seen.append((argv, env["SKEWMATRIX_CACHE"]))
        (folder / "history.json").write_text(json.dumps({"pairs": [{}] * 3, "stats": {"peak_rss_mib": 99.0}}))
        return {"seconds": 700.0 if "cold" in log.name else 12.5, "returncode": 0}

    monkeypatch.setattr(history_bench, "timed", timed)
    assert history_bench.bench_history(["history", "--no-scan"], tmp_path) == 0
    got = json.loads((tmp_path / "bench-history.json").read_text())
    assert (got["cold"]["met"], got["warm"]["met"]) == (False, True)  # 700 s > 600 s; 12.5 s < 60 s
    assert got["warm"]["peak_rss_mib"] == 99.0 and got["cold"]["pairs"] == 3
    assert seen[0][1] == seen[1][1] and "--no-scan" in seen[0][0]  # the warm run reuses the cold run's cache
    out = capsys.readouterr().out
    assert "cold 700.0 s (target < 600 s: NOT met)" in out and "warm 12.5 s (target < 60 s: met)" in out
