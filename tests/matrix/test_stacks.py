"""The trainer stack as a matrix axis: `[[stack]]` tables, transformers/trl options, ids, expectations, [gate]."""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix import settings, spec
from matrix.errors import SpecError
from matrix.spec import stacks
from tests.matrices import GOOD, ONE_CELL

TWO_STACKS = """
[[stack]]
name = "floor"
transformers = "4.52.4"
trl = "0.18.2"
[[stack]]
name = "newest"
transformers = "==5.17.0"
trl = ">=1.15,<1.16"
torch = "2.14.1"
"""


def load(tmp_path: Path, text: str) -> spec.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(text, encoding="utf-8")
    return spec.load(p, check_index=False)


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load(tmp_path, text)
    assert str(tmp_path / "m.toml") in str(err.value)
    assert err.value.return_code == 2
    return err.value.problems


# ---------------------------------------------------------------- crossing and ids


def test_stacks_cross_every_pair_pair_major(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD + TWO_STACKS)
    assert [c.id for c in m.cells] == ["u1__z1__floor", "u1__z1__newest", "u1__z2__floor", "u1__z2__newest"]
    assert [s.name for s in m.stacks] == ["floor", "newest"]
    floor = m.cell("u1__z1__floor")
    assert floor.stack is not None and floor.stack.as_dict == {"transformers": "4.52.4", "trl": "0.18.2"}
    assert (floor.options.transformers, floor.options.trl, floor.options.torch) == ("4.52.4", "0.18.2", "")
    newest = m.cell("u1__z2__newest")
    assert (newest.options.transformers, newest.options.trl, newest.options.torch) == \
        ("==5.17.0", ">=1.15,<1.16", "2.14.1")


def test_a_file_without_stacks_keeps_pair_ids(tmp_path: Path) -> None:
    m = load(tmp_path, GOOD)
    assert [c.id for c in m.cells] == ["u1__z1", "u1__z2"]
    assert all(c.stack is None for c in m.cells) and m.stacks == ()


def test_stack_values_replace_options_and_pair_options(tmp_path: Path) -> None:
    options = '[options]\ntransformers = "4.55.4"\ntrl = "0.20.0"\ntorch = "2.12.1"'
    text = GOOD.replace("schema = 1", f"schema = 1\n{options}")
    text += '[pairs]\ninclude = [{ unsloth = "u1", zoo = "z2", options = { trl = "0.21.0", timeout = 60 } }]\n'
    text += '[[stack]]\nname = "tf"\ntransformers = "4.57.6"\n[[stack]]\nname = "free"\ntorch = ""\n'
    m = load(tmp_path, text)
    tf, free = m.cell("u1__z2__tf"), m.cell("u1__z2__free")
    assert (tf.options.transformers, tf.options.trl, tf.options.torch, tf.options.timeout) == \
        ("4.57.6", "0.21.0", "2.12.1", 60)
    # "" in a stack: the resolver picks, whatever [options] says
    assert (free.options.transformers, free.options.torch) == ("4.55.4", "")
    assert m.cell("u1__z1__tf").options.trl == "0.20.0"


def test_stack_names_that_collide_under_nox_mapping(tmp_path: Path) -> None:
    got = problems(tmp_path, ONE_CELL + '[[stack]]\nname = "a.1"\n[[stack]]\nname = "a-1"\n')
    assert any("collide" in p and "'u1__z1__a.1'" in p and "'u1__z1__a-1'" in p and "stacks" in p for p in got), got
    got = problems(tmp_path, ONE_CELL + '[[stack]]\nname = "Floor"\n[[stack]]\nname = "floor"\n')
    assert any("collide" in p and "'u1__z1__floor'" in p for p in got), got


def test_ids_that_are_equal_are_reported(tmp_path: Path) -> None:
    # a zoo build named "z1__s" with stack "t" and build "z1" with stack "s__t" give one id
    text = GOOD.replace('name = "z2"', 'name = "z1__s"') + '[[stack]]\nname = "t"\n[[stack]]\nname = "s__t"\n'
    got = problems(tmp_path, text)
    assert any("share the id" in p and "'u1__z1__s__t'" in p for p in got), got


# ---------------------------------------------------------------- bad [[stack]] tables


@pytest.mark.parametrize(("table", "expected"), [
    ('name = "s"\ntransfomers = "4.52.4"', ["[[stack]] #1 's'", "unknown key 'transfomers'",
                                            "did you mean 'transformers'?", "valid keys: name, torch"]),
    ('transformers = "4.52.4"', ["[[stack]] #1", "missing required key 'name'"]),
    ('name = "-bad"', ["[[stack]] #1 '-bad'", "name '-bad' must be 1-48 characters"]),
    ('name = 3', ["[[stack]] #1", "'name' must be a string, got int 3"]),
    ('name = "s"\ntrl = 18', ["[[stack]] #1 's'", "'trl' must be a string, got int 18"]),
    ('name = "s"\ntransformers = "4.52.x"', ["[[stack]] #1 's'", "transformers = '4.52.x'",
                                             "not a valid PEP 440 version"]),
    ('name = "s"\ntrl = "latest"', ["[[stack]] #1 's'", "trl = 'latest'", "not a PEP 508 version specifier"]),
    ('name = "s"\ntorch = "==2.12 --index-url http://x"', ["torch = ", "command-line option"]),
    ('name = "s"\ntrl = "==0.18.2\\n--index-url http://x"', ["trl = ", "newline or control character"]),
    ('name = "s"\ntransformers = "@ https://x/t.whl"', ["transformers = ", "not a PEP 508 version specifier"]),
])
def test_bad_stack_tables_name_table_key_and_value(tmp_path: Path, table: str, expected: list[str]) -> None:
    got = problems(tmp_path, f"{ONE_CELL}[[stack]]\n{table}\n")
    assert any(all(e in p for e in expected) for p in got), got


def test_duplicate_stack_names(tmp_path: Path) -> None:
    got = problems(tmp_path, ONE_CELL + '[[stack]]\nname = "s"\n[[stack]]\nname = "s"\ntrl = "0.18.2"\n')
    assert any("[[stack]] #2 's'" in p and "duplicate stack name 's'" in p and "#1" in p for p in got), got


def test_every_stack_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = ONE_CELL + '[[stack]]\nname = "a"\ntrl = "x y"\n[[stack]]\nname = "b"\ntorh = "2.12.1"\n'
    text = text.replace("schema = 1", 'schema = 1\n[options]\ntransformers = "5.x"')
    got = problems(tmp_path, text)
    assert any("[[stack]] #1 'a'" in p for p in got) and any("'torh'" in p and "'torch'" in p for p in got)
    assert any("[options]: transformers = '5.x'" in p for p in got), got


@pytest.mark.parametrize(("text", "expected"), [
    ("stack = []\n", "'stack' is an empty array"),
    ('stack = "floor"\n', "top level: 'stack' must be an array"),
    ("stack = [1]\n", "[[stack]] #1: must be a table, got int"),
])
def test_stack_must_be_an_array_of_tables(tmp_path: Path, text: str, expected: str) -> None:
    got = problems(tmp_path, text + ONE_CELL.replace("schema = 1\n", "schema = 1\n", 1))
    assert any(expected in p for p in got), got


# ---------------------------------------------------------------- transformers / trl options


@pytest.mark.parametrize("key", ["transformers", "trl"])
def test_trainer_options_are_validated_like_torch(tmp_path: Path, key: str) -> None:
    ok = load(tmp_path, GOOD.replace("schema = 1", f'schema = 1\n[options]\n{key} = " >=1.0,<2 "'))
    assert {getattr(c.options, key) for c in ok.cells} == {">=1.0,<2"}
    got = problems(tmp_path, GOOD.replace("schema = 1", f'schema = 1\n[options]\n{key} = "1.0 --pre"'))
    assert any(f"[options]: {key} = '1.0 --pre' contains a command-line option" in p for p in got), got
    text = GOOD + f'[pairs]\ninclude = [{{ unsloth = "u1", zoo = "z1", options = {{ {key} = "abc" }} }}]\n'
    got = problems(tmp_path, text)
    assert any(f"[pairs] include #1 options: {key} = 'abc'" in p for p in got), got


def test_override_lines() -> None:
    assert stacks.requirement_line("transformers", "4.52.4") == "transformers==4.52.4"
    assert stacks.requirement_line("trl", " ==0.18.2 ") == "trl==0.18.2"
    assert stacks.requirement_line("trl", ">=0.18,<0.19") == "trl>=0.18,<0.19"
    assert stacks.requirement_line("torch", "~=2.12.0") == "torch~=2.12.0"
    assert stacks.requirement_line("torch", "") is None
    opts = spec.CellOptions(torch="!=2.13.0", transformers="5.17.0", trl="")
    assert stacks.requirement_lines(opts) == ["torch!=2.13.0", "transformers==5.17.0"]
    assert stacks.requested(opts) == {"torch": "!=2.13.0", "transformers": "5.17.0", "trl": None}


def test_resolved_versions_from_the_installed_list() -> None:
    installed = [{"name": "Transformers", "version": "4.52.4"}, {"name": "torch", "version": "2.14.1"},
                 {"name": "unsloth_zoo", "version": "2026.10.9"}]
    assert stacks.resolved(installed) == {"torch": "2.14.1", "transformers": "4.52.4", "trl": None}


# ---------------------------------------------------------------- [[expect]] with stack, [gate] strict


def test_expect_may_name_a_stack(tmp_path: Path) -> None:
    text = GOOD + TWO_STACKS + ('[[expect]]\nzoo = "z1"\nstate = "missing"\n'
                                '[[expect]]\nzoo = "z1"\nstack = "newest"\nstate = "error"\n')
    m = load(tmp_path, text)
    states = {c.id: set(c.expect_map.values()) for c in m.cells}
    assert states == {"u1__z1__floor": {"missing"}, "u1__z1__newest": {"error"},
                      "u1__z2__floor": set(), "u1__z2__newest": set()}


def test_expect_stack_must_be_a_stack_of_the_file(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD + TWO_STACKS + '[[expect]]\nstack = "newst"\nstate = "missing"\n')
    assert any("[[expect]] #1: stack = 'newst' is not a [[stack]] in this file" in p
               and "did you mean 'newest'?" in p and "stacks: floor, newest" in p for p in got), got
    got = problems(tmp_path, GOOD + '[[expect]]\nstack = "floor"\nstate = "missing"\n')
    assert any("stack = 'floor'" in p and "this file has no [[stack]] tables" in p for p in got), got
    got = problems(tmp_path, GOOD + TWO_STACKS + '[[expect]]\nstack = 1\nstate = "missing"\n')
    assert any("'stack' must be a string, got int 1" in p for p in got), got


def test_gate_strict(tmp_path: Path) -> None:
    assert load(tmp_path, GOOD).strict is False
    assert load(tmp_path, GOOD + "[gate]\nstrict = true\n").strict is True
    assert load(tmp_path, GOOD + '[gate]\nstrict = false\nfail_on = ["missing"]\n').strict is False
    got = problems(tmp_path, GOOD + '[gate]\nstrict = "yes"\n')
    assert any("[gate]: 'strict' must be a boolean, got str 'yes'" in p for p in got), got
    got = problems(tmp_path, GOOD + "[gate]\nstrct = true\n")
    assert any("[gate]: unknown key 'strct'" in p and "did you mean 'strict'?" in p for p in got), got


# ---------------------------------------------------------------- the shipped stacks matrix


def test_shipped_stacks_matrix() -> None:
    m = spec.load(spec.REPO_ROOT / "matrix" / "stacks.toml", check_index=False)
    assert [c.id for c in m.cells] == [f"u2026.10.9__{z}__{s}" for z in ("z2026.10.9", "z2026.9.3", "z2026.9.7")
                                      for s in ("floor", "middle", "newest", "count-after-mask")]
    by = {s.name: s.as_dict for s in m.stacks}
    assert by["floor"] == {"transformers": "4.52.4", "trl": "0.18.2"}
    assert by["newest"] == {"transformers": "5.17.0", "trl": "1.15.0"}
    assert set(m.cell("u2026.10.9__z2026.9.3__newest").expect_map.values()) == {"error"}
    assert by["count-after-mask"] == {"trl": "1.9.0"}  # the first TRL that counts after the truncation mask
    assert set(m.cell("u2026.10.9__z2026.9.7__count-after-mask").expect_map.values()) == {"error"}


@pytest.mark.parametrize("strict", [True, False])
def test_gate_strict_reaches_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strict: bool) -> None:
    from matrix.cells import pipeline, runs
    from matrix.cells.cell import write_json_atomic
    from tests.reports.cells import make_cell

    m = tmp_path / "m.toml"
    m.write_text(ONE_CELL + f"[gate]\nstrict = {str(strict).lower()}\n", encoding="utf-8")
    monkeypatch.setenv(settings.MATRIX_ENV, str(m))
    monkeypatch.delenv("SKEWMATRIX_SHARD", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out = tmp_path / "out"
    write_json_atomic(out / "cells" / "u1__z1" / "cell.json", make_cell("u1__z1"))
    rep = pipeline.report(runs.from_environ(out=out), log=lambda _: None)
    assert rep["gate"]["strict"] is strict
