"""The zoo gate (``nox -s gate -- --zoo SOURCE``): its arguments and ``--help``, the structural judgment of a
candidate zoo against unsloth trees written here (the pair reader's real references and symbol tables), the
previous release it is compared with, and the verdict's opening lines and exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from matrix import cli, errors
from matrix.cli import zoo_gate
from matrix.scan.history import readers, zoo_candidate

ZOO = {  # the previous zoo release: defines what every unsloth below imports
    "unsloth_zoo/__init__.py": "__version__ = '2026.9.1'\n",
    "unsloth_zoo/utils.py": "def Version(v):\n    return v\n",
    "unsloth_zoo/rl_replacements.py": "RL_REPLACEMENTS = {}\nsanitize_logprob = None\n",
}
# the candidate: sanitize_logprob removed
DROPPED = {**ZOO, "unsloth_zoo/rl_replacements.py": "RL_REPLACEMENTS = {}\n"}
OLD = {  # an unsloth that imports only what both zoos define
    "unsloth/__init__.py": "from unsloth_zoo.utils import Version\nfrom .models import rl\n",
    "unsloth/models/__init__.py": "",
    "unsloth/models/rl.py": "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS\n",
}
# an unsloth whose import-time module imports the name the candidate drops
NEW = {**OLD, "unsloth/models/rl.py": "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS, sanitize_logprob\n"}
# an unsloth that imports a name no zoo here defines: broken before the candidate too
BROKEN = {**OLD, "unsloth/models/rl.py": "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS, grpo_accumulate\n"}


def urow(version: str, files: dict[str, str], plain: str | None = ">=2026.9.1") -> dict[str, Any]:
    _, t = readers.pair_target()
    return {"version": version, "refs": t.references(files), "error": None, "plain": plain,
            "floor": plain[2:] if plain else None}


def table(files: dict[str, str]) -> dict[str, Any]:
    _, t = readers.pair_target()
    return t.definitions(files)


def previous(files: dict[str, str] = ZOO, version: str = "2026.9.1") -> dict[str, Any]:
    return {"version": version, "table": table(files), "error": None}


# ---------------------------------------------------------------- arguments and --help


def test_gate_help_names_zoo_and_renders_its_exit_codes_from_the_table(capsys: pytest.CaptureFixture) -> None:
    assert cli.session_main("gate", ["--help"]) == errors.EXIT_OK
    out = capsys.readouterr().out
    assert "--zoo SOURCE" in out and "--cells N" in out and "--against SPEC" in out
    epilog = errors.epilog("gate")
    assert out.rstrip().endswith(epilog)  # the epilog is matrix.errors' table, verbatim, last
    col = errors.group_of("gate")
    for row in errors.TABLE:  # and the table says what `gate --zoo` means for each code
        assert "`gate --zoo`" in row.meanings[col]
    assert "`gate --zoo`: a regression" in " ".join(epilog.split())


def test_unsloth_and_zoo_are_mutually_exclusive_and_one_is_required(capsys: pytest.CaptureFixture) -> None:
    assert cli.session_main("gate", ["--unsloth", "2026.10.9", "--zoo", "2026.10.9"]) == errors.EXIT_HARNESS
    assert "argument --zoo: not allowed with argument --unsloth" in capsys.readouterr().err
    assert cli.session_main("gate", ["--cells", "0"]) == errors.EXIT_HARNESS
    assert "one of the arguments --unsloth --zoo is required" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "needle"), [
    (["--zoo", "not-a-version"], "--zoo 'not-a-version': not a version, an existing path, or git+URL@REF"),
    (["--zoo", "2026.10.9", "--cells", "11"], "--cells 11: must be between 0 and 10"),
    (["--zoo", "2026.10.9", "--against", "2026.10"], "--against '2026.10': not a PEP 440 specifier set"),
    (["--zoo", "2026.10.9", "--backport", "zoo-fix@2026.9.3"], "--backport belongs to --unsloth"),
])
def test_bad_zoo_gate_input_is_named_and_exits_2(argv: list[str], needle: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("SKEWMATRIX_OUT", str(tmp_path))
    assert cli.main(["gate", *argv]) == errors.EXIT_HARNESS
    assert needle in capsys.readouterr().err


# ---------------------------------------------------------------- the candidate and the previous release


def test_a_checkouts_version_comes_from_its_package_when_its_metadata_has_none(tmp_path: Path) -> None:
    tree = tmp_path / "zoo"
    for member, text in {**ZOO, "pyproject.toml": '[project]\nname = "unsloth_zoo"\ndynamic = ["version"]\n'
                         }.items():
        (tree / member).parent.mkdir(parents=True, exist_ok=True)
        (tree / member).write_text(text, encoding="utf-8")
    sources, _, version = zoo_candidate.read_zoo_candidate(tree)
    assert sources == ZOO and version == "2026.9.1"
    assert zoo_candidate.candidate_version({}, None, "unsloth_zoo") is None


def test_the_previous_release_is_the_same_version_for_a_rebuild_else_the_one_below() -> None:
    versions = ["2026.9.1", "2026.10.8", "2026.10.9"]
    assert zoo_candidate.previous_release(versions, "2026.10.9", same_is_previous=True) == "2026.10.9"
    assert zoo_candidate.previous_release(versions, "2026.10.9", same_is_previous=False) == "2026.10.8"
    assert zoo_candidate.previous_release(versions, "2026.11.1.dev0", same_is_previous=True) == "2026.10.9"
    assert zoo_candidate.previous_release(versions, "2026.9.1", same_is_previous=False) is None
    assert zoo_candidate.previous_release(versions, None, same_is_previous=True) == "2026.10.9"


# ---------------------------------------------------------------- structural


def test_a_dropped_name_is_a_regression_for_the_releases_that_import_it() -> None:
    rows = [urow("2026.9.5", OLD), urow("2026.9.6", NEW), urow("2026.9.7", NEW),
            urow("2026.9.8", BROKEN), urow("2026.9.9", NEW, plain=">=2026.9.2")]
    got = zoo_candidate.judge_structural(rows, table(DROPPED), "2026.9.1", previous())
    assert got["judged"] == 5
    by = {e["unsloth"]: e for e in got["admitted"]}
    assert list(by) == ["2026.9.5", "2026.9.6", "2026.9.7", "2026.9.8"]  # 2026.9.9's floor refuses 2026.9.1
    assert {v: (e["candidate"], e["previous"], e["regression"]) for v, e in by.items()} == {
        "2026.9.5": ("compatible", "compatible", False),
        "2026.9.6": ("incompatible", "compatible", True),
        "2026.9.7": ("incompatible", "compatible", True),
        "2026.9.8": ("incompatible", "incompatible", False),  # broken with the previous zoo already
    }
    missing = by["2026.9.6"]["breaks"][0]
    assert (missing["name"], missing["breaks"]) == ("unsloth_zoo.rl_replacements.sanitize_logprob", "import")
    assert missing["where"]["file"] == "unsloth/models/rl.py"
    code, head = zoo_gate.decide(got, [], None, "unsloth_zoo 2026.9.1 (path x.whl)", "2026.9.1")
    assert code == errors.EXIT_GATE
    assert head[0] == "gate --zoo: FAIL: unsloth_zoo 2026.9.1 (path x.whl)"
    assert head[1] == ("regression: unsloth 2026.9.6 … 2026.9.7 (2): worked with zoo 2026.9.1, incompatible with "
                       "the candidate: missing `unsloth_zoo.rl_replacements.sanitize_logprob` (import unsloth fails)")
    assert head[-1] == "gate: exit 1 (fail)" and len(head) <= 10


def test_an_unreadable_release_is_no_verdict_and_an_unchanged_zoo_passes() -> None:
    rows = [urow("2026.9.5", OLD), urow("2026.9.6", NEW)]
    same = zoo_candidate.judge_structural(rows, table(ZOO), "2026.9.1", previous())
    assert [e["candidate"] for e in same["admitted"]] == ["compatible", "compatible"]
    code, head = zoo_gate.decide(same, [], None, "c", "2026.9.1")
    assert (code, head[0]) == (errors.EXIT_OK, "gate --zoo: PASS: c")
    unread = [{**rows[1], "refs": None, "error": "unsloth-2026.9.6.whl: connection reset"}]
    got = zoo_candidate.judge_structural(unread, table(DROPPED), "2026.9.1", previous())
    assert got["admitted"][0]["unresolved"] and not got["admitted"][0]["regression"]
    code, head = zoo_gate.decide(got, [], None, "c", "2026.9.1")
    assert code == errors.EXIT_HARNESS and head[0].startswith("gate --zoo: NO VERDICT")


# ---------------------------------------------------------------- hazards, cells and the exit code


def hazard(check: str, before: str, now: str) -> dict[str, Any]:
    return {"check": check, "candidate": now, "previous": before, "reason": f"line 7: {now}", "line": 7,
            "reverted": before == "fixed" and now == "vulnerable", "unresolved": before == "fixed" and now == "unknown"}


def test_a_reverted_fix_fails_and_a_cell_error_does_not_hide_it() -> None:
    clean = zoo_candidate.judge_structural([urow("2026.9.5", OLD)], table(ZOO), "2026.9.1", previous())
    haz = [hazard("kernel-a", "fixed", "vulnerable"), hazard("kernel-b", "vulnerable", "vulnerable")]
    error_cell = {"ids": ["u2026.9.5__candidate"], "code": errors.EXIT_HARNESS, "lines": [], "headline": "error"}
    code, head = zoo_gate.decide(clean, haz, error_cell, "c", "2026.9.1")
    assert code == errors.EXIT_GATE and head[0] == "gate --zoo: FAIL: c"
    assert head[1] == "reverted fix: kernel-a: zoo 2026.9.1 is fixed, the candidate vulnerable: line 7: vulnerable"
    assert "hazards: kernel-a fixed -> vulnerable; kernel-b vulnerable -> vulnerable" in head
    # a check that was vulnerable before stays a finding of the cells, not a reverted fix
    code, _ = zoo_gate.decide(clean, haz[1:], None, "c", "2026.9.1")
    assert code == errors.EXIT_OK
    code, head = zoo_gate.decide(clean, [hazard("kernel-a", "fixed", "unknown")], None, "c", "2026.9.1")
    assert code == errors.EXIT_HARNESS and "could not be judged" in head[1]
    failing_cell = {**error_cell, "code": errors.EXIT_GATE}
    assert zoo_gate.decide(clean, [], failing_cell, "c", "2026.9.1")[0] == errors.EXIT_GATE


def test_the_cells_matrix_crosses_the_newest_releases_with_the_candidate(tmp_path: Path) -> None:
    from matrix import spec

    path = tmp_path / "gate.toml"
    path.write_text(zoo_gate.matrix_text({"source": "pypi", "version": "2026.10.9"}, ["2026.10.8", "2026.10.9"]))
    cells = spec.load(path, check_index=False).cells
    assert [c.id for c in cells] == ["u2026.10.8__candidate", "u2026.10.9__candidate"]


def test_release_spans_are_runs_of_the_judged_order() -> None:
    judged = ["2026.9.1", "2026.9.2", "2026.9.10", "2026.10.1", "2026.10.2"]
    assert zoo_gate.spans(["2026.10.2", "2026.9.1", "2026.9.2", "2026.9.10"], judged) == \
        "2026.9.1 … 2026.9.10 (3), 2026.10.2"


def test_every_scanned_check_of_the_zoo_judges_the_candidates_own_files() -> None:
    from probes import checks

    # a candidate without any kernel file: each scanned check of zoo's subject reads its members of the
    # candidate (no previous release: nothing to compare), the pair check is the structural part, not a hazard
    got = zoo_candidate.hazards(ZOO, None)
    pair_check, t = readers.pair_target()
    expected = [checks.info(n).id for n in checks.with_capability("scan")
                if t.referred in checks.subject(n).axes and checks.info(n).id != pair_check]
    assert [h["check"] for h in got if "na" not in h] == expected and expected
    assert all(h["candidate"] == "absent" and h["previous"] is None and not h["reverted"] for h in got if "na" not in h)
    assert pair_check not in [h["check"] for h in got]
