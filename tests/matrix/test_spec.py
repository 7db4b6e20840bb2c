"""Matrix file validation: every error names its culprit and suggests a fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from matrix import settings, spec
from matrix.errors import IndexLookupError, SpecError
from tests.matrices import GOOD


class FakeIndex:
    """Versions per project, as an index would list them."""

    def __init__(self, versions: dict[str, list[str]] | None = None, fail: bool = False) -> None:
        self._v = versions or {"unsloth": ["2026.9.3", "2026.10.9"], "unsloth-zoo": ["2026.9.1", "2026.9.3",
                                                                                     "2026.10.9", "2026.10.10"]}
        self.fail = fail

    def versions(self, project: str) -> list[Version]:
        if self.fail:
            raise IndexLookupError(f"{project}: the index http://127.0.0.1:9/simple is unreachable")
        return sorted(Version(v) for v in self._v[project])


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(text, encoding="utf-8")
    return p


def problems(tmp_path: Path, text: str, **kw) -> list[str]:
    with pytest.raises(SpecError) as err:
        spec.load(write(tmp_path, text), index=kw.pop("index", FakeIndex()), **kw)
    assert str(tmp_path / "m.toml") in str(err.value)
    return err.value.problems


def test_good_matrix_expands_full_product_in_order(tmp_path: Path) -> None:
    m = spec.load(write(tmp_path, GOOD), index=FakeIndex())
    assert [c.id for c in m.cells] == ["u1__z1", "u1__z2"]
    assert m.builds["z1"].package == "unsloth-zoo"
    assert m.cells[0].zoo.describe() == "pypi 2026.9.3"


def test_default_matrix_is_six_cells() -> None:
    m = spec.load(spec.DEFAULT_MATRIX, check_index=False)
    assert [c.id for c in m.cells] == [f"{u}__{z}" for u in ("u2026.10.9", "u2026.10.9-guard")
                                      for z in ("z2026.9.3", "z2026.9.3-fix", "z2026.10.9")]


def test_toml_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    (msg,) = problems(tmp_path, 'schema = 1\n[[build]]\nname = "u1\n')
    assert "TOML syntax error" in msg
    assert "line 3" in msg and "column" in msg


def test_unknown_key_names_table_and_suggests(tmp_path: Path) -> None:
    text = GOOD.replace('version = "2026.9.3"', 'verison = "2026.9.3"')
    got = problems(tmp_path, text)
    assert any("[[build]] #2 'z1'" in p and "'verison'" in p and "did you mean 'version'?" in p for p in got)
    # the missing required key is reported too: all problems, not the first
    assert any("[[build]] #2 'z1'" in p and "needs key 'version'" in p for p in got)


def test_unknown_top_level_and_option_keys(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD + '\n[optoins]\n', check_index=False)
    assert any("top level" in p and "'optoins'" in p and "did you mean 'options'?" in p for p in got)
    got = problems(tmp_path, GOOD.replace("schema = 1", 'schema = 1\n[options]\ndevise = "cpu"'), check_index=False)
    assert any("[options]" in p and "'devise'" in p and "'device'" in p for p in got)


def test_bad_option_value_lists_choices(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace("schema = 1", 'schema = 1\n[options]\ncompile = "of"'), check_index=False)
    assert any("compile = 'of'" in p and "on, off, auto" in p and "did you mean 'off'?" in p for p in got)


def test_duplicate_build_names(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace('name = "z2"', 'name = "z1"'), check_index=False)
    assert any("[[build]] #3" in p and "duplicate build name 'z1'" in p and "#2" in p for p in got)


def test_invalid_version(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace('"2026.9.3"', '"2026.9.x"'), check_index=False)
    assert any("'z1'" in p and "'2026.9.x' is not a valid PEP 440 version" in p for p in got)


def test_version_missing_on_index_lists_nearest(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace('"2026.9.3"', '"2026.9.4"'))
    (msg,) = got
    assert "'z1'" in msg and "unsloth-zoo 2026.9.4 does not exist on the index" in msg
    assert "2026.9.3" in msg and "2026.9.1" in msg


def test_unreachable_index_is_a_clean_problem(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD, index=FakeIndex(fail=True))
    assert all("unreachable" in p for p in got) and len(got) == 3


def test_unknown_source_kind_lists_valid_ones(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace('source = "pypi"\nversion = "2026.9.3"', 'source = "pipy"\nversion = "1"'),
                   check_index=False)
    assert any("unknown source kind 'pipy'" in p and "did you mean 'pypi'?" in p and "backport" in p for p in got)


def test_unknown_package(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace('package = "unsloth"', 'package = "unslot"'), check_index=False)
    assert any("package 'unslot'" in p and "did you mean 'unsloth'?" in p for p in got)


def test_wrong_type(tmp_path: Path) -> None:
    got = problems(tmp_path, GOOD.replace('version = "2026.10.9"\n[[build]]\nname = "z1"',
                                          'version = 2026\n[[build]]\nname = "z1"'), check_index=False)
    assert any("'u1'" in p and "'version' must be a string, got int 2026" in p for p in got)


def test_path_source_must_exist(tmp_path: Path) -> None:
    text = GOOD.replace('source = "pypi"\nversion = "2026.9.3"', 'source = "path"\npath = "nowhere/zoo"')
    got = problems(tmp_path, text, check_index=False)
    assert any("'z1'" in p and "path 'nowhere/zoo' does not exist" in p for p in got)


def test_path_source_accepts_dir_and_wheel(tmp_path: Path) -> None:
    (tmp_path / "zoo").mkdir()
    (tmp_path / "z.whl").write_bytes(b"")
    text = GOOD.replace('source = "pypi"\nversion = "2026.9.3"', 'source = "path"\npath = "zoo"')
    text = text.replace('source = "pypi"\nversion = "2026.10.9"\n', 'source = "path"\npath = "z.whl"\n', 1)
    m = spec.load(write(tmp_path, text), check_index=False)
    assert m.builds["z1"].describe() == "path zoo"


def test_backport_base_must_exist_and_match_package(tmp_path: Path) -> None:
    text = GOOD + '[[build]]\nname = "ug"\npackage = "unsloth"\nsource = "backport"\nbase = "z1"\nbackport = "x"\n'
    got = problems(tmp_path, text, check_index=False)
    assert any("'ug'" in p and "base 'z1' is a unsloth-zoo build" in p for p in got)
    text = GOOD + '[[build]]\nname = "ug"\npackage = "unsloth"\nsource = "backport"\nbase = "u2"\nbackport = "x"\n'
    got = problems(tmp_path, text, check_index=False)
    assert any("base 'u2' is not a build in this file" in p and "builds: u1, z1, z2" in p for p in got)


def test_pairs_include_exclude(tmp_path: Path) -> None:
    text = GOOD + '[pairs]\nexclude = [{ unsloth = "u1", zoo = "z2" }]\n'
    assert [c.id for c in spec.load(write(tmp_path, text), check_index=False).cells] == ["u1__z1"]
    text = GOOD + '[pairs]\nproduct = false\ninclude = [{ unsloth = "u1", zoo = "z3" }]\n'
    got = problems(tmp_path, text, check_index=False)
    assert any("zoo = 'z3' is not a build" in p and "builds: u1, z1, z2" in p for p in got)


def test_cell_ids_must_not_collide_under_nox_mapping(tmp_path: Path) -> None:
    text = GOOD.replace('name = "z2"', 'name = "z-1"').replace('name = "z1"', 'name = "z.1"')
    got = problems(tmp_path, text, check_index=False)
    assert any("collide" in p and "'u1__z.1'" in p and "'u1__z-1'" in p for p in got)


def test_missing_file_lists_shipped_matrices(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        spec.load(tmp_path / "nope.toml", check_index=False)
    assert "file not found" in str(err.value) and "default.toml" in str(err.value)


def test_matrix_chosen_by_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    p = write(tmp_path, GOOD)
    monkeypatch.setenv(settings.MATRIX_ENV, str(p))
    assert spec.load(check_index=False).path == p
    monkeypatch.delenv(settings.MATRIX_ENV)
    assert spec.load(check_index=False).path == spec.DEFAULT_MATRIX


def test_gate_fail_on_is_validated(tmp_path: Path) -> None:
    m = spec.load(write(tmp_path, GOOD + '[gate]\nfail_on = ["missing", "error"]\n'), check_index=False)
    assert m.fail_on == ("missing", "error")
    got = problems(tmp_path, GOOD + '[gate]\nfail_on = ["mising"]\n', check_index=False)
    assert any("fail_on entry 'mising'" in p and "did you mean 'missing'?" in p for p in got)


@pytest.mark.parametrize("bad", ["../outside", "/etc", "link/inner"])
def test_path_sources_cannot_escape_the_matrix_directory(tmp_path: Path, bad: str) -> None:
    base = tmp_path / "m"
    base.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "inner").mkdir()
    (base / "link").symlink_to(tmp_path / "outside")
    text = GOOD.replace('source = "pypi"\nversion = "2026.9.3"', f'source = "path"\npath = "{bad}"')
    p = base / "m.toml"
    p.write_text(text)
    with pytest.raises(SpecError) as err:
        spec.load(p, check_index=False)
    assert any(f"path {bad!r}" in x and ("absolute" in x or "leaves" in x) for x in err.value.problems)


def test_pair_options_must_be_a_table(tmp_path: Path) -> None:
    text = GOOD + '[pairs]\nproduct = false\ninclude = [{ unsloth = "u1", zoo = "z1", options = "fast" }]\n'
    got = problems(tmp_path, text, check_index=False)
    assert any("include #1 options: must be a table, got str 'fast'" in p for p in got)


def test_guard_module_per_unsloth_build(tmp_path: Path) -> None:
    text = GOOD.replace('name = "u1"', 'name = "u1"\nguard_module = "unsloth.their_guard"')
    m = spec.load(write(tmp_path, text), index=FakeIndex())
    assert {c.unsloth.guard_module for c in m.cells} == {"unsloth.their_guard"}
    assert {c.zoo.guard_module for c in m.cells} == {None}


@pytest.mark.parametrize(("where", "value"), [("u1", "not a module"), ("u1", "single"), ("z1", "unsloth_zoo.x")])
def test_guard_module_must_be_dotted_and_on_unsloth(tmp_path: Path, where: str, value: str) -> None:
    text = GOOD.replace(f'name = "{where}"', f'name = "{where}"\nguard_module = "{value}"')
    got = problems(tmp_path, text, check_index=False)
    assert any("[[build]] #" in p and f"guard_module = {value!r} must be a dotted module name" in p for p in got), got
