"""The history's grid, lines and metadata, on rows written here (no index, no wheels)."""

from __future__ import annotations

from matrix.scan.history import grid, metadata_caps
from probes.checks.pair_compat.pairs import TARGET


def refs(*paths: str, line: int = 1) -> dict:
    return {"refs": [{"path": p, "kind": "from", "modules": p.count("."), "file": "unsloth/models/_utils.py",
                      "line": line, "function": None, "swallowed": [], "branch": None, "import_time": True}
                     for p in paths], "unparsed": []}


def table(**names: list[str]) -> dict:
    return {"modules": {"unsloth_zoo": {"names": [], "unknown": [], "package": True},
                        **{f"unsloth_zoo.{m}": {"names": n, "unknown": [], "package": False}
                           for m, n in names.items()}}}


ZOO = [{"version": "1.0", "table": table(loss=["a"])}, {"version": "2.0", "table": table(loss=["a", "b"])},
       {"version": "3.0", "table": table(loss=["a", "b"])}]


def test_pairs_classes_and_each_pairs_own_lines() -> None:
    uns = [{"version": "10", "refs": refs("unsloth_zoo.loss.b", line=5), "plain": ">=2.0"},
           {"version": "11", "refs": refs("unsloth_zoo.loss.b", line=9), "plain": None}]
    got = grid.judge_all(TARGET, uns, ZOO)
    verdicts = {(p["unsloth"], p["zoo"]): p["verdict"] for p in got["pairs"]}
    assert verdicts == {("10", "1.0"): "incompatible", ("10", "2.0"): "compatible", ("10", "3.0"): "compatible",
                        ("11", "1.0"): "incompatible", ("11", "2.0"): "compatible", ("11", "3.0"): "compatible"}
    # same references (lines aside) x two distinct tables: two classes for six pairs
    assert sorted(c["pairs"] for c in got["classes"]) == [2, 4]
    p11 = next(p for p in got["pairs"] if p["unsloth"] == "11" and p["zoo"] == "1.0")
    assert p11["missing"][0]["where"][0]["line"] == 9  # its own line, not its class representative's
    admitted = {(p["unsloth"], p["zoo"]): p["admitted"] for p in got["pairs"]}
    assert admitted[("10", "1.0")] is False and admitted[("11", "1.0")] is True


def test_one_line_per_release_names_the_working_span_and_what_breaks_before_it() -> None:
    got = grid.judge_all(TARGET, [{"version": "10", "refs": refs("unsloth_zoo.loss.b"), "plain": None}], ZOO)
    line = grid.release_line("10", got["pairs"])
    assert line == ("unsloth 10: works with zoo 2.0 … 3.0; zoo 1.0: incompatible, missing `b` (core patches)")


def test_a_release_that_could_not_be_read_is_unknown_with_the_reason() -> None:
    got = grid.judge_all(TARGET, [{"version": "10", "refs": None, "error": "x.whl: HTTP 404"}], ZOO[:1])
    assert got["pairs"][0]["verdict"] == "unknown" and got["pairs"][0]["reason"] == "x.whl: HTTP 404"


META = """Metadata-Version: 2.1
Name: unsloth
Requires-Dist: unsloth_zoo>=2025.3.8
Requires-Dist: unsloth_zoo>=2025.3.9; extra == "huggingface"
Requires-Dist: torch<2.8,>=2.1
Requires-Dist: transformers>=4.46
Requires-Dist: trl!=0.15.0,<=0.15.2; extra == "never"
"""


def test_floor_plain_install_and_caps_from_metadata() -> None:
    side = metadata_caps.unsloth_side(META)
    assert (side["plain"], side["floor"]) == (">=2025.3.8", "2025.3.8")
    assert metadata_caps.admits(side["plain"], "2025.3.8") and not metadata_caps.admits(side["plain"], "2025.3.7")
    assert metadata_caps.plain_pick(side["plain"], ["2025.3.7", "2025.3.9", "2025.3.8"]) == "2025.3.9"
    assert metadata_caps.zoo_caps(META) == {"torch": "<2.8,>=2.1"}  # no upper bound on transformers; trl: extra


def test_pinned_reads_the_installed_pair_without_importing_it(tmp_path) -> None:
    from matrix.scan.history import structural_line

    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "unsloth").mkdir(parents=True)
    (site / "unsloth_zoo").mkdir()
    (site / "unsloth" / "__init__.py").write_text("from unsloth_zoo.loss_utils import gone\n")
    (site / "unsloth_zoo" / "__init__.py").write_text("")
    (site / "unsloth_zoo" / "loss_utils.py").write_text("def here(): pass\n")
    assert structural_line(tmp_path).endswith("incompatible: missing `gone` (import unsloth)")
    (site / "unsloth_zoo" / "loss_utils.py").write_text("def gone(): pass\n")
    assert structural_line(tmp_path).endswith(": compatible")
    assert "n/a: unsloth, unsloth_zoo not installed" in structural_line(tmp_path / "elsewhere")
