"""A matrix whose axes are not unsloth x zoo: a check subject's packages, source trees, the shipped nanochat file.

The trees come from ``../shared/fixtures/nanochat.bundle`` (a real git bundle
of nanochat: master and three fix PRs), used as any git remote is: offline,
in milliseconds for a ref lookup and about a second for a checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrix import spec
from matrix.errors import BuildError, SpecError
from matrix.sources import BackportSource, GitSource, Materialized
from matrix.spec import trees
from reports.model import axes_of, build_report, column_of, row_of, verdicts

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "fixtures" / "nanochat.bundle"
NANOCHAT = ROOT / "matrix" / "nanochat.toml"


def tree_matrix(tmp_path: Path, builds: str, extra: str = "") -> Path:
    """A matrix file in ``tmp_path`` whose git builds read the bundle (``url`` relative to the file)."""
    link = tmp_path / "nanochat.bundle"
    if not link.exists():
        link.symlink_to(BUNDLE)
    path = tmp_path / "m.toml"
    path.write_text(f"schema = 1\n{builds}\n{extra}", encoding="utf-8")
    return path


def git_build(name: str, ref: str) -> str:
    return f'[[build]]\nname = "{name}"\npackage = "nanochat"\nsource = "git"\nurl = "nanochat.bundle"\nref = "{ref}"\n'


def test_the_shipped_nanochat_matrix_is_builds_times_torch() -> None:
    m = spec.load(NANOCHAT, check_index=False)
    names = ["master", "pr-619", "pr-623", "pr-662", "fix"]
    assert [c.id for c in m.cells] == [f"{n}__torch-{t}" for n in names for t in ("2.9.1", "2.14.1")]
    assert {c.options.torch for c in m.cells} == {"==2.9.1", "==2.14.1"}
    # every build is on the one axis of the nanochat subject, and the cell's checks are that subject's only
    assert all(list(c.roles) == ["nanochat"] for c in m.cells)
    expected = {"master": "missing", "pr-619": "broken", "pr-623": "broken", "pr-662": "broken", "fix": "not-needed"}
    assert {c.id.split("__")[0]: c.expect_map["nanochat-sft-masked-nan"] for c in m.cells} == expected
    assert all(len(c.expect_map) == 1 for c in m.cells)
    fix = m.builds["fix"].source
    assert isinstance(fix, BackportSource) and isinstance(fix.base_source, GitSource)


def test_unsloth_and_nanochat_builds_cannot_share_a_matrix(tmp_path: Path) -> None:
    text = (git_build("master", "refs/heads/master")
            + '[[build]]\nname = "u"\npackage = "unsloth"\nsource = "pypi"\nversion = "2026.10.9"\n')
    with pytest.raises(SpecError) as err:
        spec.load(tree_matrix(tmp_path, text), check_index=False)
    text = str(err.value)
    assert "the builds mix packages no one check is about" in text and "nanochat: master" in text
    assert "unsloth: u" in text


def test_a_missing_ref_names_the_build_and_the_refs_there(tmp_path: Path) -> None:
    path = tree_matrix(tmp_path, git_build("pr", "refs/pull/999/head") + git_build("ok", "refs/pull/619/head"))
    with pytest.raises(SpecError) as err:
        spec.load(path, check_index=False)
    assert len(err.value.problems) == 1
    problem = err.value.problems[0]
    assert problem.startswith("[[build]] #1 'pr': ref 'refs/pull/999/head' is not in nanochat.bundle")
    assert "refs/pull/619/head" in problem  # what is there, to pick from


def test_an_unreadable_remote_is_a_problem_of_its_build(tmp_path: Path) -> None:
    (tmp_path / "broken.bundle").write_bytes(b"not a bundle\n")
    text = git_build("x", "refs/heads/master").replace("nanochat.bundle", "broken.bundle")
    text += git_build("y", "master").replace("nanochat.bundle", "no-such.bundle").replace('"y"', '"y"', 1)
    with pytest.raises(SpecError) as err:
        spec.load(tree_matrix(tmp_path, text), check_index=False)
    got = err.value.problems
    assert got[0].startswith("[[build]] #1 'x': url 'broken.bundle': git cannot read it")
    assert got[1].startswith("[[build]] #2 'y': url 'no-such.bundle': no repository or bundle at")


def test_a_missing_ref_exits_2_from_the_command_line(tmp_path: Path) -> None:
    path = tree_matrix(tmp_path, git_build("gone", "refs/heads/no-such-branch"))
    env = {**os.environ, "SKEWMATRIX_MATRIX": str(path), "SKEWMATRIX_OUT": str(tmp_path / "out")}
    proc = subprocess.run([sys.executable, "-m", "matrix", "cells"], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "'gone': ref 'refs/heads/no-such-branch' is not in nanochat.bundle" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_source_tree_subject_refuses_a_release_or_a_wheel(tmp_path: Path) -> None:
    (tmp_path / "n.whl").write_bytes(b"")
    text = ('[[build]]\nname = "r"\npackage = "nanochat"\nsource = "pypi"\nversion = "0.1.0"\n'
            '[[build]]\nname = "w"\npackage = "nanochat"\nsource = "path"\npath = "n.whl"\n')
    with pytest.raises(SpecError) as err:
        spec.load(tree_matrix(tmp_path, text), check_index=False)
    got = err.value.problems
    assert any(p.startswith("[[build]] #1 'r': nanochat is built from a source tree, not a release") for p in got)
    assert any(p.startswith("[[build]] #2 'w': path 'n.whl' is a file") for p in got)


@pytest.mark.parametrize("in_a_repository", [False, True])
def test_a_backport_of_a_git_tree_is_the_checkout_with_our_patch(tmp_path: Path, in_a_repository: bool) -> None:
    if in_a_repository:  # the default output directory, reports/out, lies inside our own checkout
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    m = spec.load(NANOCHAT, check_index=False)
    made = m.builds["fix"].source.materialize_tree(tmp_path / "fix")
    master = m.builds["master"].source.materialize_tree(tmp_path / "master")
    assert made.tree is not None and master.tree is not None
    ours, theirs = (t / "nanochat" / "gpt.py" for t in (made.tree, master.tree))
    assert "loss_sum / (flat_targets != -1).sum().clamp(min=1)" in ours.read_text(encoding="utf-8")
    assert "loss_sum" not in theirs.read_text(encoding="utf-8")
    assert made.digest != master.digest  # a tree's identity is its content
    assert made.details["commit"] == master.details["commit"] and master.details["commit"].startswith("92d63d4")
    # only gpt.py differs: scripts and pyproject are the base's
    sft = Path("scripts", "chat_sft.py")
    assert (made.tree / sft).read_bytes() == (master.tree / sft).read_bytes()


def test_a_tree_cell_installs_the_trees_own_dependencies_with_the_columns_torch(tmp_path: Path) -> None:
    m = spec.load(NANOCHAT, check_index=False)
    cell = m.cell("pr-662__torch-2.14.1")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyproject.toml").write_text('[project]\nname = "x"\n[project.optional-dependencies]\ncpu = ["a"]\n'
                                         'gpu = ["b"]\n', encoding="utf-8")
    made = {"nanochat": Materialized(requirement="", pin="", digest="d", tree=tree)}
    install, overrides, sources = trees.install_requirements(cell, made)
    assert install == ["--no-sources", "-r", str(tree / "pyproject.toml"), "--extra", "cpu"]
    assert overrides == ["torch==2.14.1"]
    assert sources == ["--no-sources", str(tree / "pyproject.toml"), "--extra", "cpu"]
    # a tree without the extra gets none (uv would refuse an extra the project does not declare)
    (tree / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert trees.install_requirements(cell, made)[0] == ["--no-sources", "-r", str(tree / "pyproject.toml")]


def test_a_tree_without_the_subjects_files_is_a_build_error(tmp_path: Path) -> None:
    from probes import checks

    subject = checks.subject("nanochat_sft_masked_nan")
    (tmp_path / "nanochat").mkdir()
    (tmp_path / "nanochat" / "gpt.py").write_text("", encoding="utf-8")
    with pytest.raises(BuildError, match=r"has no scripts/chat_sft\.py, pyproject\.toml: not a checkout of nanochat"):
        trees.tree_problem(Materialized(requirement="", pin="", digest=None, tree=tmp_path), subject)


def nanochat_cell(name: str, stack: str) -> dict:
    return {"cell_id": f"{name}__{stack}", "builds": {"nanochat": {"name": name, "package": "nanochat",
                                                                   "describe": f"git bundle@{name}"}},
            "stack": {"name": stack, "resolved": {"torch": stack.split("-")[1]}}, "checks": {}, "error": None}


def test_a_tree_cell_is_judged_by_its_subjects_checks_only_and_gridded_by_stack() -> None:
    cell = nanochat_cell("master", "torch-2.9.1")
    assert list(verdicts(cell)) == ["nanochat-sft-masked-nan"]
    assert (row_of(cell), column_of(cell), axes_of(cell)) == ("master", "torch-2.9.1", ("nanochat", "stack"))
    rep = build_report([cell, nanochat_cell("fix", "torch-2.14.1")], matrix="nanochat.toml")
    assert rep["grid"] == {"unsloth": ["master", "fix"], "zoo": ["torch-2.9.1", "torch-2.14.1"],
                           "axes": ["nanochat", "stack"]}
    assert [c["id"] for c in rep["checks"]] == ["nanochat-sft-masked-nan"]  # no unsloth check in its tables


def test_the_advice_for_a_tree_cell_names_its_build_not_an_unsloth_pair() -> None:
    from reports.gate import recommendation

    cell = nanochat_cell("master", "torch-2.9.1")
    cell["verdicts"] = {"nanochat-sft-masked-nan": {"guard": "missing", "guard_reason": "r", "reach": "exposed",
                                                    "symptom": "ga1: logged loss NaN from step 1", "zoo": "vulnerable"}}
    rep = build_report([cell], matrix="nanochat.toml")
    text = recommendation(cell, rep["checks"])
    assert text.startswith("nanochat-sft-masked-nan: EXPOSED: with nanochat master (git bundle@master), ")
    assert "unsloth" not in text and "ga1: logged loss NaN from step 1" in text


def test_the_next_step_for_a_tree_cell_is_about_the_build_not_a_zoo_release() -> None:
    from reports.advice import advice

    cell = nanochat_cell("pr-662", "torch-2.9.1")
    cell["verdicts"] = {"nanochat-sft-masked-nan": {"guard": "broken", "reach": "exposed", "reach_reason": "crash"}}
    check = {"id": "nanochat-sft-masked-nan", "fix_hint": "skip it safely"}
    got = advice(cell, check)
    assert got.next_step.startswith("This build's fix is defective") and "unsloth" not in got.next_step
    cell["verdicts"]["nanochat-sft-masked-nan"]["guard"] = "missing"
    assert "zoo" not in advice(cell, check).next_step


def test_a_remote_ref_is_asked_for_before_the_cell_is_built(tmp_path: Path) -> None:
    # a file:// URL is a remote as far as the harness knows (asked with git ls-remote, like https://)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    url = repo.as_uri()
    found = GitSource(package="nanochat", base_dir=tmp_path, url=url, ref="main")
    gone = GitSource(package="nanochat", base_dir=tmp_path, url=url, ref="refs/pull/1/head")
    down = GitSource(package="nanochat", base_dir=tmp_path, url=(tmp_path / "none").as_uri(), ref="main")
    assert found.local is None and found.remote_ref_problems("b") == []
    assert gone.remote_ref_problems("[[build]] #1 'x'") == [
        f"[[build]] #1 'x': ref 'refs/pull/1/head' is not in {url} (git ls-remote finds no such ref)"]
    (problem,) = down.remote_ref_problems("b")
    assert problem.startswith(f"b: cannot check ref 'main' on {(tmp_path / 'none').as_uri()}: ")
