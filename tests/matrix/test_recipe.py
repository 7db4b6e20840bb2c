"""The install recipe (issue #31.1): one owner for building an env, and its digest inside every cell digest."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from matrix import spec
from matrix.cells import cell as cell_mod
from matrix.envs import recipe
from matrix.envs.recipe import Recipe
from matrix.sources import Materialized
from matrix.spec import trees
from tests.matrices import ONE_CELL

ROOT = Path(__file__).resolve().parents[2]


def one_cell(tmp_path: Path) -> spec.Cell:
    p = tmp_path / "m.toml"
    p.write_text(ONE_CELL, encoding="utf-8")
    (c,) = spec.load(p, check_index=False).cells
    return c


def made() -> dict[str, Materialized]:
    return {"unsloth": Materialized("unsloth==2026.10.9", "unsloth==2026.10.9", None),
            "zoo": Materialized("unsloth-zoo==2026.9.3", "unsloth-zoo==2026.9.3", None)}


def stored(tmp_path: Path, digest: str) -> Path:
    """A completed cell result on disk, as a previous run left it."""
    path = tmp_path / "out" / "cells" / "u1__z1" / "cell.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"cell_digest": digest, "error": None, "checks": {}}), encoding="utf-8")
    return path


def test_a_change_to_the_recipe_code_makes_a_stored_cell_stale(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    c = one_cell(tmp_path)
    path = stored(tmp_path, cell_mod.cell_digest(c, made()))
    assert cell_mod.reusable(path, cell_mod.cell_digest(c, made())) is not None  # unchanged: reused
    monkeypatch.setattr(recipe, "RECIPE_VERSION", recipe.RECIPE_VERSION + 1)  # how envs are built changed
    assert cell_mod.reusable(path, cell_mod.cell_digest(c, made())) is None


def test_a_change_to_a_recipe_field_makes_a_stored_cell_stale(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    c = one_cell(tmp_path)
    path = stored(tmp_path, cell_mod.cell_digest(c, made()))
    real = trees.recipe_of
    monkeypatch.setattr(trees, "recipe_of", lambda cell, m: dataclasses.replace(real(cell, m), link_mode="copy"))
    assert cell_mod.reusable(path, cell_mod.cell_digest(c, made())) is None


def test_the_recipe_digest_counts_every_field_and_no_path_of_this_run() -> None:
    base = Recipe(python="3.11", requirements=("/a/build/unsloth/unsloth-1-py3-none-any.whl",),
                  overrides=("unsloth @ file:///a/x.whl",))
    moved = Recipe(python="3.11", requirements=("/b/elsewhere/unsloth/unsloth-1-py3-none-any.whl",),
                   overrides=("unsloth @ file:///b/elsewhere/x.whl",))
    assert base.digest() == moved.digest()  # the same wheel in another output directory
    other = dataclasses.replace(moved, overrides=("unsloth @ file:///b/elsewhere/y.whl",))
    assert other.digest() != base.digest()  # another wheel
    changed = {f.name: dataclasses.replace(base, **{f.name: value}) for f, value in zip(
        dataclasses.fields(Recipe), ("3.12", ("other==1",), ("o==1",), ("pyproject.toml",), "https://x/whl",
                                     True, "copy", True, True), strict=True)}
    assert set(changed) == {f.name for f in dataclasses.fields(Recipe)}  # a new field needs a line here
    digests = {name: r.digest() for name, r in changed.items()}
    assert base.digest() not in digests.values() and len(set(digests.values())) == len(digests)


def test_a_cells_recipe_pins_its_builds_by_override_and_installs_that(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    how = trees.recipe_of(one_cell(tmp_path), made())
    assert how.requirements == ("unsloth==2026.10.9", "unsloth-zoo==2026.9.3")
    assert how.overrides == ("unsloth==2026.10.9", "unsloth-zoo==2026.9.3") and how.python == "3.11"
    monkeypatch.setattr(recipe, "uv_bin", lambda: "uv")
    seen: list[list[str]] = []
    monkeypatch.setattr(recipe, "run_tool", lambda argv, **_: seen.append(argv) or recipe.Ran(argv, 0))
    assert recipe.apply(how, Path("/e/bin/python"), tmp_path, 60).ok
    assert seen == [["uv", "pip", "install", "--python", "/e/bin/python", "unsloth==2026.10.9",
                     "unsloth-zoo==2026.9.3", "--overrides", str(tmp_path / "overrides.txt")]]
    assert (tmp_path / "overrides.txt").read_text().splitlines() == list(how.overrides)


def test_an_offline_target_recipe_uses_the_given_installer(tmp_path: Path) -> None:
    how = Recipe(python="3.12", requirements=("/w/a.whl",), offline=True, no_deps=True)
    argv = recipe.install_argv(how, Path("/py"), None, installer=["/py", "-m", "pip", "install"],
                               target=tmp_path / "site")
    assert argv == ["/py", "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(tmp_path / "site"),
                    "/w/a.whl"]


def test_no_env_is_built_outside_the_recipe() -> None:
    """Nothing but ``matrix.envs.recipe`` spells an install command (the GPU runner only names which installer
    its machine has); every builder of an env hands a Recipe to ``recipe.apply``."""
    spelled = set()
    for path in sorted((ROOT / "matrix").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "backports" not in path.parts and re.search(r'"pip", "install"|"--overrides"', text):
            spelled.add(path.relative_to(ROOT).as_posix())
    assert spelled == {"matrix/envs/recipe.py", "matrix/gpu/interpreter.py"}
    for rel in ("matrix/cells/install.py", "matrix/cli/pinned.py", "matrix/mutation/survivors.py",
                "matrix/gpu/interpreter.py", "matrix/envs/envrun.py"):
        assert re.search(r"\bapply\(", (ROOT / rel).read_text(encoding="utf-8")), rel
    assert "recipe.venv_python(" in (ROOT / "noxfile.py").read_text(encoding="utf-8")


def test_a_lock_reads_as_pins_by_normalized_name() -> None:
    lock = "\n".join(["# a comment", "--extra-index-url https://example.invalid/simple", "",
                      "Unsloth_Zoo==2026.9.3", "torch==2.9.1+cpu ; sys_platform == 'linux'",
                      "transformers[torch]==4.52.4", "unsloth @ file:///tmp/x/unsloth-2026.10.9-py3-none-any.whl",
                      "trl==0.18.2    # via unsloth"])
    assert recipe.read_pins(lock) == {"unsloth-zoo": "2026.9.3", "torch": "2.9.1+cpu", "transformers": "4.52.4",
                                      "unsloth": None, "trl": "0.18.2"}


@pytest.mark.parametrize("line", ["torch>=2.0", "not a requirement ==", "torch==2.9.1,==2.9.2"])
def test_a_lock_line_that_pins_nothing_is_no_answer(line: str) -> None:
    with pytest.raises(ValueError, match="line 2"):
        recipe.read_pins(f"unsloth==2026.10.9\n{line}\n")


def test_drift_names_each_package_the_env_holds_otherwise_than_the_index() -> None:
    env = [{"name": "unsloth_zoo", "version": "2026.9.3"}, {"name": "torch", "version": "2.9.1"},
           {"name": "unsloth", "version": "2026.10.9"}, {"name": "six", "version": "1.16.0"}]
    same = {"unsloth-zoo": "2026.9.3", "torch": "2.9.1", "unsloth": None, "six": "1.16"}  # 1.16 == 1.16.0
    assert recipe.drift(same, env) == []
    moved = {"unsloth-zoo": "2026.9.4", "torch": "2.9.1", "unsloth": None, "trl": "0.18.2"}
    assert recipe.drift(moved, env) == ["six 1.16.0: in the env, not in what the index resolves",
                                        "trl: the index resolves 0.18.2, the env has none",
                                        "unsloth-zoo: the env has 2026.9.3, the index resolves 2026.9.4"]


def test_an_install_from_the_cache_is_uvs_offline_mode_and_the_pins_question_carries_the_overrides(
        tmp_path: Path) -> None:
    how = Recipe(requirements=("unsloth==2026.10.9",), overrides=("unsloth==2026.10.9", "torch==2.9.1"))
    python = tmp_path / "env" / "bin" / "python"
    assert "--offline" in recipe.install_argv(how, python, None, from_cache=True)
    assert "--offline" not in recipe.install_argv(how, python, None)
    argv = recipe.index_pins_argv(how, python, tmp_path)
    assert argv[argv.index("--python") + 1] == str(python) and "--offline" not in argv
    assert (tmp_path / "overrides.txt").read_text().splitlines() == ["unsloth==2026.10.9", "torch==2.9.1"]
    assert (tmp_path / "index.in").read_text().splitlines() == ["unsloth==2026.10.9"]
