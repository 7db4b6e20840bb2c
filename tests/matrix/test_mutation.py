"""The mutation session's harness side (matrix/mutation.py) and the mutant generator it drives.

The generator is stdlib only (``ast``), so it runs here on small sources
written for the test; running mutants needs a cell env and is covered by
``nox -s mutation`` itself.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from matrix import cli, mutation
from matrix.envs import envrun
from matrix.mutation import survivors
from matrix.sources import BackportSource, Materialized, PypiSource
from matrix.spec import REPO_ROOT
from probes.checks.fused_ce_masked_nan import mutation_ops as mutate
from probes.checks.fused_ce_masked_nan.mutation import TARGET

GUARD = REPO_ROOT / TARGET.guard_file
EQUIVALENTS = REPO_ROOT / TARGET.equivalents

SOURCE = '''"""A tiny guard-like module."""

LIMIT = 3


def empty(n, labels):
    """Docstring: never mutated."""
    if n is not None and n != 0:
        return False
    return not any(x != -100 for x in labels)


def scaled(x):
    y = x * 2
    return y + 1
'''


def test_generator_makes_compilable_distinct_mutants_with_unique_ids() -> None:
    mutants = mutate.generate(SOURCE)
    ids = [m.id for m in mutants]
    assert len(ids) == len(set(ids))
    assert all(m.source != SOURCE for m in mutants)
    for m in mutants:
        ast.parse(m.source)
    # Reasoned expectations for this source: `is not` -> `is`, `!=` -> `==` twice, and `and` -> `or`.
    ops = {m.operator for m in mutants}
    assert {"cmp", "bool", "not", "const", "negate", "delete", "arith"} <= ops
    cmps = [m for m in mutants if m.operator == "cmp"]
    assert len(cmps) == 3
    # Module level: only the value of the constant assignment, 3 -> 4 and 3 -> 0.
    module_level = [m for m in mutants if m.scope == "<module>"]
    assert sorted(m.after for m in module_level) == ["LIMIT = 0", "LIMIT = 4"]


def test_docstrings_and_log_messages_are_not_mutated() -> None:
    src = SOURCE + '\n\ndef warn(logger):\n    logger.warning("text %s", 1)\n    return 2\n'
    mutants = mutate.generate(src)
    assert not any("Docstring" in m.before or "tiny guard" in m.before for m in mutants)
    assert not any("text %s" in m.before for m in mutants)
    # the logging call is not deleted either; the return is
    warn = [m for m in mutants if m.scope == "warn"]
    assert {m.before for m in warn if m.operator == "delete"} == {"return 2"}


def test_ids_survive_an_unrelated_edit() -> None:
    before = {m.id for m in mutate.generate(SOURCE)}
    edited = SOURCE.replace('LIMIT = 3\n', 'LIMIT = 3\n\n\ndef unrelated():\n    return 7\n')
    after = {m.id for m in mutate.generate(edited)}
    assert before <= after
    assert len(after - before) == 3  # `return 7`: deleted, 7 -> 8, 7 -> 0


def test_out_of_scope_function_is_left_alone() -> None:
    src = SOURCE + "\n\ndef install_at_import():\n    return True\n"
    assert not any(m.scope == "install_at_import" for m in mutate.generate(src))


def test_sample_is_deterministic_and_sized() -> None:
    mutants = mutate.generate(SOURCE)
    a, b = mutate.sample(mutants, 5), mutate.sample(list(reversed(mutants)), 5)
    assert len(a) == 5
    assert {m.id for m in a} == {m.id for m in b}
    assert mutate.sample(mutants, None) == mutants
    assert mutate.sample(mutants, 10_000) == mutants


def test_the_real_guard_generates_mutants() -> None:
    mutants = mutate.generate(GUARD.read_text(encoding="utf-8"))
    assert len(mutants) > 100
    assert not any(m.scope == "install_at_import" for m in mutants)


# ---------------------------------------------------------------- scoring


def _m(mid: str, status: str, killed_by: str | None = None) -> dict[str, Any]:
    return {"id": mid, "operator": "cmp", "scope": "f", "line": 1, "before": "a == b", "after": "a != b",
            "status": status, "killed_by": killed_by, "reason": ""}


def test_score_excludes_equivalents_and_counts_timeouts_as_killed() -> None:
    doc = {"generated": 5, "mutants": [_m("a", "killed", "02-after"), _m("b", "killed", "14-n-items-zero"),
                                       _m("c", "timeout"), _m("d", "survived"), _m("e", "survived")]}
    eq = {"e": mutation.Equivalent("e", "same result for every input")}
    s = mutation.score(doc, eq, 0.9)
    assert (s.ran, s.killed, s.equivalent) == (5, 3, 1)
    assert s.score == pytest.approx(3 / 4)
    assert not s.passed
    assert [x["id"] for x in s.survivors] == ["d"]
    assert s.killed_by == {"02-after": 1, "14-n-items-zero": 1, "timeout": 1}
    assert s.strict_score == pytest.approx(3 / 4)
    unreachable = {"e": mutation.Equivalent("e", "only without the fused loss", "unreachable")}
    s = mutation.score(doc, unreachable, 0.9)
    assert s.score == pytest.approx(3 / 4) and s.strict_score == pytest.approx(3 / 5)
    assert s.stale_equivalents == []


def test_score_flags_stale_equivalence_entries() -> None:
    doc = {"generated": 2, "all_ids": ["a", "b"], "mutants": [_m("a", "killed", "03-dense"), _m("b", "survived")]}
    eq = {"a": mutation.Equivalent("a", "x"), "gone": mutation.Equivalent("gone", "y")}
    s = mutation.score(doc, eq, 0.9)
    assert s.stale_equivalents == ["gone", "a"]
    assert s.score == 0.0


def test_score_meets_bar_at_exactly_the_bar() -> None:
    doc = {"mutants": [_m(str(i), "killed", "02-after") for i in range(9)] + [_m("s", "survived")]}
    assert mutation.score(doc, {}, 0.9).passed


def test_score_rejects_an_unknown_status() -> None:
    with pytest.raises(mutation.MutationError, match="unknown status 'weird'"):
        mutation.score({"mutants": [_m("a", "weird")]}, {}, 0.9)


def test_equivalents_file_problems_are_all_reported(tmp_path: Path) -> None:
    p = tmp_path / "eq.toml"
    p.write_text('[[equivalent]]\nid = "a"\n\n'
                 '[[equivalent]]\nid = "a"\nwhy = "x"\nnote = 1\nkind = "maybe"\n\n[other]\n', encoding="utf-8")
    with pytest.raises(mutation.MutationError) as err:
        mutation.load_equivalents(p)
    text = str(err.value)
    assert "5 problem(s)" in text
    assert "kind 'maybe'" in text
    assert "unknown top-level key(s) ['other']" in text
    assert "'why' must give a one-line argument" in text
    assert "listed twice" in text
    assert "unknown key(s) ['note']" in text


def test_shipped_equivalents_file_loads_and_names_real_mutants() -> None:
    eq = mutation.load_equivalents(EQUIVALENTS)
    ids = {m.id for m in mutate.generate(GUARD.read_text(encoding="utf-8"))}
    assert set(eq) <= ids, sorted(set(eq) - ids)


def test_markdown_lists_survivors_and_equivalents() -> None:
    doc = {"generated": 3, "mutants": [_m("a", "killed", "02-after"), _m("b", "survived"), _m("c", "survived")]}
    s = mutation.score(doc, {"c": mutation.Equivalent("c", "only a log line differs")}, 0.9)
    text = mutation.render_markdown(s, {"guard_file": "g.py", "guard_module": "m", "unsloth": "1", "zoo": "2",
                                        "env": "/e", "seconds": 3.0})
    assert "**50.0%** of non-equivalent mutants killed (1/2); bar 90%: below." in text
    assert "| `b` | 1 | `a == b` | `a != b` |" in text
    assert "| `c` | equivalent | `a != b` | only a log line differs |" in text


# ---------------------------------------------------------------- command line


def test_bad_input_exits_2_before_any_env_is_built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["mutation", "--guard-file", str(tmp_path / "missing.py"), "--out", str(tmp_path)]) == 2
    assert "--guard-file" in capsys.readouterr().err
    guard = tmp_path / "g.py"
    guard.write_text(SOURCE, encoding="utf-8")
    assert cli.main(["mutation", "--guard-file", str(guard), "--sample", "0", "--out", str(tmp_path)]) == 2
    assert cli.main(["mutation", "--guard-file", str(guard), "--check", "nope", "--out", str(tmp_path)]) == 2
    assert "valid:" in capsys.readouterr().err
    assert cli.main(["mutation", "--no-such-option"]) == 2


def test_main_scores_a_runner_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("", encoding="utf-8")
    doc = {"generated": 2, "mutants": [_m("a", "killed", "02-after"), _m("b", "killed", "07-mask")]}
    seen: dict[str, Any] = {}

    def fake_runner(python: Path, module: str, out: Path, guard: Path, name: str, sample: int | None,
                    only: list[str] | None = None) -> dict:
        seen.update(python=python, module=module, sample=sample, name=name, only=only)
        return doc

    monkeypatch.setattr(mutation, "run_runner", fake_runner)
    out = tmp_path / "out"
    rc = mutation.main(["--env", str(env), "--out", str(out), "--sample", "7", "--no-survivor-passes",
                        "--equivalents", str(_empty_equivalents(tmp_path))], tmp_path)
    assert rc == 0
    assert seen["module"].endswith(".mutate") and seen["sample"] == 7 and seen["name"] == "unsloth.fused_ce_guard"
    written = json.loads((out / "mutation.json").read_text(encoding="utf-8"))
    assert written["passed"] is True and written["score"]["killed"] == 2
    assert "mutation score 100.0%" in capsys.readouterr().out
    doc["mutants"].append(_m("c", "survived"))
    assert mutation.main(["--env", str(env), "--out", str(out), "--no-survivor-passes", "--equivalents",
                          str(_empty_equivalents(tmp_path))], tmp_path) == 1
    # --no-survivor-passes: the vulnerable pass alone is on record
    assert [p["zoo"] for p in json.loads((out / "mutation.json").read_text())["meta"]["passes"]] == ["2026.9.3"]


def _fake_env(path: Path) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("", encoding="utf-8")
    return path


NONE_ONLY = "tests/backports/zoo-fix-none-only"


def test_survivors_run_again_on_each_survivor_zoo_in_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env, fixed, none_only = (_fake_env(tmp_path / n) for n in ("env", "fixed", "none-only"))
    calls: list[tuple[str, list[str] | None]] = []

    def fake_runner(python: Path, module: str, out: Path, guard: Path, name: str, sample: int | None,
                    only: list[str] | None = None) -> dict:
        where = python.parent.parent.name
        calls.append((where, only))
        if only is None:
            return {"mutants": [_m("a", "killed", "02-after"), _m("b", "survived"), _m("c", "survived"),
                                _m("d", "survived"), _m("e", "survived"), _m("f", "survived")]}
        # the fixed zoo kills b; the one-form zoo kills c and d (d is listed unreachable); f survives both
        dies = {"fixed": {"b": "13-fixed-zoo"}, "none-only": {"c": "12-uninstall", "d": "14-n-items-zero"}}[where]
        return {"mutants": [_m(i, "killed", dies[i]) if i in dies else _m(i, "survived") for i in only]}

    monkeypatch.setattr(mutation, "run_runner", fake_runner)
    eq = tmp_path / "eq.toml"
    eq.write_text('[[equivalent]]\nid = "d"\nkind = "unreachable"\nwhy = "only on a one-form zoo"\n\n'
                  '[[equivalent]]\nid = "e"\nwhy = "the same for every input"\n', encoding="utf-8")
    out = tmp_path / "out"
    rc = mutation.main(["--env", str(env), "--out", str(out), "--bar", "0.6", "--equivalents", str(eq),
                        "--survivor-zoo", "2026.10.9", "--survivor-zoo", NONE_ONLY,
                        "--survivor-env", f"2026.10.9={fixed}", "--survivor-env", f"{NONE_ONLY}={none_only}"], tmp_path)
    # e (equivalent) never runs again; d (unreachable) does; each pass takes what the one before left
    assert calls == [("env", None), ("fixed", ["b", "c", "d", "f"]), ("none-only", ["c", "d", "f"])]
    written = json.loads((out / "mutation.json").read_text(encoding="utf-8"))
    by = {m["id"]: (m["status"], m["killed_by"]) for m in written["mutants"]}
    assert by["b"] == ("killed", "13-fixed-zoo (zoo 2026.10.9)")
    assert by["c"] == ("killed", "12-uninstall (zoo zoo-fix-none-only on 2026.9.3)")
    assert by["f"] == ("survived", None)
    passes = written["meta"]["passes"]
    assert [(p["zoo"], p["ran"], p["killed"]) for p in passes] == [
        ("2026.9.3", 6, ["a"]), ("2026.10.9", 4, ["b"]), ("zoo-fix-none-only on 2026.9.3", 3, ["c", "d"])]
    assert passes[2]["env"] == str(none_only) and passes[2]["source"] == f"backport {NONE_ONLY} on pypi 2026.9.3"
    assert [s["id"] for s in written["score"]["survivors"]] == ["f"]
    assert written["score"]["stale_equivalents"] == ["d"]  # listed unreachable, now killed: the list needs a look
    assert rc == 0  # killed a b c over a b c f: 75%
    md = (out / "mutation.md").read_text(encoding="utf-8")
    assert "- survivors run again on unsloth_zoo 2026.10.9, then zoo-fix-none-only on 2026.9.3" in md
    assert f"| 2 | 2026.10.9 (pypi 2026.10.9) | `{fixed}` | 4 | `b` |" in md
    assert (f"| 3 | zoo-fix-none-only on 2026.9.3 (backport {NONE_ONLY} on pypi 2026.9.3) | `{none_only}` | 3 "
            "| `c`, `d` |") in md
    assert "| 12-uninstall (zoo zoo-fix-none-only on 2026.9.3) | 1 |" in md


def test_a_pass_with_nothing_left_builds_no_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _fake_env(tmp_path / "env")
    monkeypatch.setattr(mutation, "run_runner", lambda *a, **k: {"mutants": [_m("a", "killed", "02-after")]})

    def no_build(*args: Any) -> Path:
        raise AssertionError("no survivor left: no env to build")

    monkeypatch.setattr(survivors, "build_env", no_build)
    out = tmp_path / "out"
    assert mutation.main(["--env", str(env), "--out", str(out), "--equivalents",
                          str(_empty_equivalents(tmp_path))], tmp_path) == 0
    passes = json.loads((out / "mutation.json").read_text(encoding="utf-8"))["meta"]["passes"]
    assert [(p["zoo"], p["env"], p["ran"]) for p in passes] == [
        ("2026.9.3", str(env), 1), ("2026.10.9", None, 0), ("zoo-fix-none-only on 2026.9.3", None, 0)]
    assert "| 2 | 2026.10.9 (pypi 2026.10.9) | not built (nothing left to run) | 0 | none |" in (
        out / "mutation.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------- survivor zoos


def test_the_shipped_target_pairs_a_fixed_zoo_and_a_one_form_backport() -> None:
    vulnerable, pairings, given = survivors.parse_pairings(TARGET.zoo, TARGET.survivor_zoos)
    assert isinstance(vulnerable.source, PypiSource) and vulnerable.label == TARGET.zoo
    assert [type(p.source) for p in pairings] == [PypiSource, BackportSource]
    backport = pairings[1].source
    assert isinstance(backport, BackportSource) and backport.directory == REPO_ROOT / NONE_ONLY
    assert backport.base_source == PypiSource(package="unsloth_zoo", base_dir=REPO_ROOT, version=TARGET.zoo)
    assert given == {}


def test_a_backport_takes_the_release_after_the_at() -> None:
    got = survivors.parse_pairing(f"{NONE_ONLY}@2026.9.2", "2026.9.3")
    assert isinstance(got, survivors.ZooPairing)
    assert got.label == "zoo-fix-none-only on 2026.9.2" and got.slug == "zoo-fix-none-only-on-2026.9.2"
    assert got.source.describe() == f"backport {NONE_ONLY} on pypi 2026.9.2"


def test_bad_survivor_zoos_are_all_reported_with_suggestions(tmp_path: Path) -> None:
    with pytest.raises(mutation.MutationError) as err:
        survivors.parse_pairings("2026.9.3", ["2026.10.9", "tests/backports/zoo-fix-none-onyl", "2026.10.9",
                                              "matrix/backports/unsloth-guard", f"{NONE_ONLY}@latest"],
                                 ["2026.10.9", "2026.10.8=/x", f"2026.10.9={tmp_path}"])
    text = str(err.value)
    assert "7 problem(s)" in text, text
    assert f"did you mean {NONE_ONLY!r}?" in text  # the typo
    assert "survivor zoo '2026.10.9' given twice" in text
    assert "patches 'unsloth', but this build is a 'unsloth_zoo' build" in text  # a backport of the other package
    assert "version 'latest' is not a valid PEP 440 version" in text
    assert "--survivor-env '2026.10.9': expected ZOO=DIR" in text
    assert "'2026.10.8' is not a survivor zoo of this run" in text
    assert f"no bin/python in {tmp_path}" in text


def test_a_survivor_env_must_name_a_survivor_zoo_of_the_run(tmp_path: Path) -> None:
    env = _fake_env(tmp_path / "env")
    _, pairings, given = survivors.parse_pairings("2026.9.3", [NONE_ONLY], [f"{NONE_ONLY}={env}"])
    assert [p.label for p in pairings] == ["zoo-fix-none-only on 2026.9.3"]
    assert given == {NONE_ONLY: env}
    assert cli.main(["mutation", "--no-survivor-passes", "--survivor-env", f"{NONE_ONLY}={env}",
                     "--out", str(tmp_path)]) == 2


def test_build_env_installs_the_materialised_zoo_with_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               ) -> None:
    wheel = tmp_path / "unsloth_zoo-2026.9.3-py3-none-any.whl"
    seen: dict[str, Any] = {}

    class Rebuilt(PypiSource):
        def materialize(self, workdir: Path) -> Materialized:
            seen["workdir"] = workdir
            return Materialized(str(wheel), f"unsloth_zoo @ {wheel.as_uri()}", "abc")

    def fake_apply(how: Any, python: Path, workdir: Path, timeout: float) -> Any:
        seen.update(python=python, reqs=list(how.requirements), overrides=list(how.overrides))
        return type("Res", (), {"ok": True})()

    monkeypatch.setattr(envrun, "ensure_env", lambda env_dir, python: env_dir / "bin" / "python")
    monkeypatch.setattr(survivors.recipe, "apply", fake_apply)
    got = survivors.build_env(tmp_path / "env", "2026.10.9", Rebuilt(package="unsloth_zoo", base_dir=tmp_path))
    assert got == seen["python"] == tmp_path / "env" / "bin" / "python"
    assert seen["reqs"] == ["unsloth==2026.10.9", str(wheel)]
    assert seen["overrides"] == ["unsloth==2026.10.9", f"unsloth_zoo @ {wheel.as_uri()}"]
    assert seen["workdir"] == tmp_path / "env" / "skewmatrix-build"


def _empty_equivalents(tmp_path: Path) -> Path:
    p = tmp_path / "none.toml"
    p.write_text("", encoding="utf-8")
    return p


def test_rescore_applies_an_edited_equivalence_list_without_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      ) -> None:
    def no_runner(*args: Any, **kwargs: Any) -> dict:
        raise AssertionError("--rescore must not run mutants")

    monkeypatch.setattr(mutation, "run_runner", no_runner)
    out = tmp_path / "out"
    out.mkdir()
    last = {"meta": {"guard_file": "g.py"}, "generated": 2,
            "mutants": [_m("a", "killed", "02-after"), _m("b", "survived")]}
    (out / "mutation.json").write_text(json.dumps(last), encoding="utf-8")
    eq = tmp_path / "eq.toml"
    eq.write_text('[[equivalent]]\nid = "b"\nwhy = "the same for every input"\n', encoding="utf-8")
    empty = _empty_equivalents(tmp_path)
    assert mutation.main(["--rescore", "--out", str(out), "--equivalents", str(empty)], tmp_path) == 1
    assert mutation.main(["--rescore", "--out", str(out), "--equivalents", str(eq)], tmp_path) == 0
    assert "| `b` | equivalent | `a != b` | the same for every input |" in (out / "mutation.md").read_text(
        encoding="utf-8")
    assert cli.main(["mutation", "--rescore", "--out", str(tmp_path / "none")]) == 2
