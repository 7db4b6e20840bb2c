"""The command line: bad input is a usage line and exit 2; the gate's exit codes with expected states;
the tests session's Chromium; progress lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrix import cli, settings, spec
from matrix.cells import runs
from matrix.cli import sessions
from matrix.errors import EXIT_GATE, EXIT_HARNESS, EXIT_OK, SkewmatrixError, gate_code, run_code
from reports.gate import evaluate
from tests.matrices import GOOD

ROOT = Path(__file__).resolve().parent.parent
BAD = 'schema = 1\n[[build]]\nname = "u"\npackage = "unslot"\nsource = "pypi"\nverison = "1"\n'


@pytest.mark.parametrize("argv", [["-m", "nox", "-s", "matrix"], ["-m", "nox", "--list"], ["-m", "matrix", "cells"],
                                  ["-m", "matrix", "report"]])
def test_bad_matrix_file_exits_2_with_every_problem(tmp_path: Path, argv: list[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    env = {**os.environ, "SKEWMATRIX_MATRIX": str(bad), "SKEWMATRIX_OUT": str(tmp_path / "out")}
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    assert "Traceback" not in text
    assert f"{bad}: 3 problem(s)" in text
    assert "unknown key 'verison' (did you mean 'version'?)" in text
    assert "package 'unslot' is not a package any check is about (did you mean 'unsloth'?); valid: unsloth, " \
           "unsloth-zoo, nanochat" in text


def test_bad_shard_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "SKEWMATRIX_SHARD": "3/2"}
    env.pop("SKEWMATRIX_MATRIX", None)
    proc = subprocess.run([sys.executable, "-m", "nox", "--list"], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "shard '3/2': K must be between 1 and N" in proc.stderr


# ---------------------------------------------------------------- the gate: expected states (strict xfail)


FUSED, CPU, GRPO, PAIR = "fused-ce-masked-nan", "cpu-ce-masked-nan", "grpo-normalizer-nan", "pair-compat"
FAILING = ["broken", "error", "missing"]


def entry(cell_id: str, states: dict[str, str], expect: dict[str, str] | None = None,
          failing: list[str] = FAILING) -> dict:
    """A report entry as reports.model.build_report lays it out (schema skewmatrix.report/2)."""
    verdicts = {c: {"guard": s, "gate_fail": s in failing} for c, s in states.items()}
    return {"cell_id": cell_id, "verdicts": verdicts, "expect": expect or {},
            "gate_fail": any(v["gate_fail"] for v in verdicts.values())}


def report(*entries: dict, failing: list[str] = FAILING) -> dict:
    return {"gate": {"failing_states": failing}, "cells": list(entries)}


def kinds(rep: dict) -> dict[tuple[str, str], str]:
    return {(c.cell_id, c.check): c.kind for c in evaluate(rep).checks}


def test_every_cell_passing_or_as_expected_exits_0() -> None:
    rep = report(entry("u__z1", {FUSED: "missing", CPU: "not-needed"}, {FUSED: "missing"}),
                 entry("u__z2", {FUSED: "not-needed", CPU: "not-needed"}))
    assert kinds(rep) == {("u__z1", FUSED): "xfail", ("u__z1", CPU): "pass",
                          ("u__z2", FUSED): "pass", ("u__z2", CPU): "pass"}
    outcome = evaluate(rep)
    assert run_code(outcome) == EXIT_OK and outcome.cell_kind("u__z1") == "xfail"
    assert outcome.lines() == [f"u__z1 {FUSED}: missing (XFAIL: expected)"]


def test_an_unexpected_failing_state_exits_1() -> None:
    rep = report(entry("u__z1", {FUSED: "broken"}))
    assert kinds(rep) == {("u__z1", FUSED): "fail"}
    assert run_code(evaluate(rep)) == EXIT_GATE
    assert evaluate(rep).lines() == [f"u__z1 {FUSED}: broken (FAIL: fails the gate)"]


def test_another_failing_state_than_the_expected_one_fails() -> None:
    rep = report(entry("u__z1", {FUSED: "broken"}, {FUSED: "missing"}))
    assert kinds(rep) == {("u__z1", FUSED): "fail"}
    assert "(FAIL: expected missing)" in evaluate(rep).lines()[0]
    # Strict: a passing state other than the expected passing one is a change too.
    assert kinds(report(entry("u__z1", {FUSED: "activates"}, {FUSED: "not-needed"}))) == {("u__z1", FUSED): "fail"}


def test_an_expected_failure_that_no_longer_happens_is_an_xpass_and_exits_1() -> None:
    rep = report(entry("u__z1", {FUSED: "not-needed"}, {FUSED: "missing"}))
    outcome = evaluate(rep)
    assert kinds(rep) == {("u__z1", FUSED): "xpass"} and run_code(outcome) == EXIT_GATE
    assert "XPASS: expected missing, which no longer happens; the expectation is stale" in outcome.lines()[0]


def test_an_expectation_for_a_check_without_a_verdict_fails() -> None:
    rep = report(entry("u__z1", {FUSED: "not-needed"}, {CPU: "missing"}))
    assert kinds(rep) == {("u__z1", FUSED): "pass", ("u__z1", CPU): "fail"}


def test_the_reports_failing_states_are_honoured() -> None:
    # [gate] fail_on = ["missing"]: an error cell passes, a broken one too.
    rep = report(entry("u__z1", {FUSED: "error"}, failing=["missing"]),
                 entry("u__z2", {FUSED: "broken"}, failing=["missing"]), failing=["missing"])
    assert run_code(evaluate(rep)) == EXIT_OK
    assert "failing states: missing" in evaluate(rep).summary()


def test_gate_and_pinned_give_2_for_an_unexpected_error_cell() -> None:
    assert gate_code(evaluate(report(entry("c__z", {FUSED: "error"})))) == EXIT_HARNESS
    assert gate_code(evaluate(report(entry("c__z", {FUSED: "missing"})))) == EXIT_GATE
    assert gate_code(evaluate(report(entry("c__z", {FUSED: "error"}, {FUSED: "error"})))) == EXIT_OK


def _run_of(text: str, tmp_path: Path) -> runs.Run:
    path = tmp_path / "m.toml"
    path.write_text(text, encoding="utf-8")
    return runs.Run(matrix_path=path, out=tmp_path / "out")


def test_exit_zero_opts_out_and_says_what_the_gate_would_have_said(tmp_path: Path) -> None:
    from matrix.cells import pipeline

    run = _run_of(GOOD, tmp_path)
    rep = report(entry("u1__z1", {FUSED: "missing"}), entry("u1__z2", {FUSED: "not-needed"}))
    lines: list[str] = []
    assert pipeline.judge(rep, run, log=lines.append) == EXIT_GATE
    assert lines[-1].startswith("exit 1")
    lines.clear()
    assert pipeline.judge(rep, run, exit_zero=True, log=lines.append) == EXIT_OK
    assert lines[-1] == "exit 0 (--exit-zero; the gate alone would exit 1)"
    assert f"  u1__z1 {FUSED}: missing (FAIL: fails the gate)" in lines


def test_judge_uses_the_matrix_files_current_expectations(tmp_path: Path) -> None:
    from matrix.cells import pipeline

    text = GOOD + f'[[expect]]\nzoo = "z1"\ncheck = "{FUSED}"\nstate = "missing"\n'
    run = _run_of(text, tmp_path)
    # a reused cell result written before the expectation was added
    rep = report(entry("u1__z1", {FUSED: "missing"}), entry("u1__z2", {FUSED: "not-needed"}))
    assert pipeline.judge(rep, run, log=lambda _: None) == EXIT_OK
    assert rep["cells"][0]["expect"] == {FUSED: "missing"}


# ---------------------------------------------------------------- [[expect]] in a matrix file


def load(extra: str, tmp_path: Path) -> spec.Matrix:
    return spec.from_dict(spec.tomllib.loads(GOOD + extra), tmp_path / "m.toml", check_index=False)


def test_expect_file_wide_per_pair_and_per_check(tmp_path: Path) -> None:
    m = load('[[expect]]\nstate = "not-needed"\n'                        # file-wide, every check
             f'[[expect]]\nunsloth = "u1"\nzoo = "z1"\ncheck = "{FUSED}"\nstate = "missing"\n', tmp_path)
    got = {c.id: c.expect_map for c in m.cells}
    assert got == {"u1__z1": {FUSED: "missing", CPU: "not-needed", GRPO: "not-needed", PAIR: "not-needed"},
                   "u1__z2": {FUSED: "not-needed", CPU: "not-needed", GRPO: "not-needed", PAIR: "not-needed"}}


def test_no_expect_means_no_expectations(tmp_path: Path) -> None:
    assert all(c.expect == () for c in load("", tmp_path).cells)


def test_default_matrix_declares_its_demonstration_cells() -> None:
    m = spec.load(spec.DEFAULT_MATRIX, check_index=False)
    got = {c.id: c.expect_map for c in m.cells if c.expect}
    # the CPU kernel's missing cells are latent (a warning that passes), so only the fused one is an XFAIL
    assert got == {"u2026.10.9__z2026.9.3": {FUSED: "missing"}}


def test_bad_expect_tables_are_all_reported_with_suggestions(tmp_path: Path) -> None:
    bad = ('[[expect]]\nunsloth = "u2"\nstate = "missing"\n'
           '[[expect]]\nzoo = "z1"\ncheck = "fused-ce-masked-nam"\nstate = "mising"\n'
           '[[expect]]\nzoo = "z2"\n'
           '[[expect]]\nzoo = "u1"\nstate = "missing"\nwhy = "x"\n')
    with pytest.raises(spec.SpecError) as err:
        load(bad, tmp_path)
    problems = err.value.problems
    assert "[[expect]] #1: unsloth = 'u2' is not a unsloth build in this file (did you mean 'u1'?); " \
           "unsloth builds: u1" in problems
    assert f"[[expect]] #2: check = 'fused-ce-masked-nam' is not a registered check (did you mean '{FUSED}'?); " \
           f"checks: {FUSED}, {CPU}, {GRPO}, {PAIR}" in problems
    assert any(p.startswith("[[expect]] #2: state = 'mising' is not a guard state (did you mean 'missing'?)")
               for p in problems)
    assert any(p.startswith("[[expect]] #3: missing required key 'state'") for p in problems)
    assert any(p.startswith("[[expect]] #4: unknown key 'why'") for p in problems)
    assert "[[expect]] #4: zoo = 'u1' is not a unsloth_zoo build in this file (did you mean 'z1'?); " \
           "zoo builds: z1, z2" in problems
    assert len(problems) == 6


# ---------------------------------------------------------------- arguments: one tree, exit 2 on bad input


@pytest.mark.parametrize("name", [n for n in cli.COMMANDS if n not in cli.PASSTHROUGH])
def test_every_command_rejects_unknown_arguments_with_a_usage_line(name: str, capsys: pytest.CaptureFixture) -> None:
    assert cli.session_main(name, ["--hlep"]) == EXIT_HARNESS
    err = capsys.readouterr().err
    assert err.startswith(f"usage: nox -s {name} --")
    # gate and pinned complain first about what they require; the rest name the stray argument
    assert "unrecognized arguments: --hlep" in err or " required" in err


@pytest.mark.parametrize("name", [n for n in cli.COMMANDS if n not in cli.PASSTHROUGH])
def test_every_help_lists_the_exit_codes(name: str, capsys: pytest.CaptureFixture) -> None:
    assert cli.session_main(name, ["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "exit codes:" in out and "  0  " in out and "  2  " in out


def test_console_script_and_module_share_the_tree(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for name in ("scan", "gate", "pinned", "report", "cells", "validate", "matrix", "mutation", "bench"):
        assert f"    {name}" in out
    assert cli.main(["nonsense"]) == EXIT_HARNESS
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'skewmatrix = "matrix.cli:main"' in pyproject


def test_harness_errors_become_2_without_a_traceback(capsys: pytest.CaptureFixture) -> None:
    def boom() -> int:
        raise SkewmatrixError("matrix.toml: something is wrong")

    assert cli.guarded(boom) == EXIT_HARNESS
    err = capsys.readouterr().err
    assert err == "skewmatrix: matrix.toml: something is wrong\n"

    def bug() -> int:
        raise KeyError("oops")

    assert cli.guarded(bug) == EXIT_HARNESS
    err = capsys.readouterr().err
    assert "internal error: KeyError: 'oops' (rerun with --debug" in err and "Traceback" not in err
    assert cli.guarded(bug, debug=True) == EXIT_HARNESS
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "raised"), [
    (["scan", "--zoo", ">=>1"], "ScanError"),
    (["mutation", "--sample", "0"], "MutationError"),
    (["bench", "scan", "--workers", "1", "--zoo", ">=>1"], "ScanError"),
])
def test_debug_shows_the_traceback_of_every_command(argv: list[str], raised: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    """The commands with parsers of their own raise; only ``guarded`` maps, so ``--debug`` reaches them too."""
    out = ["--out", str(tmp_path)]
    assert cli.main([*argv, *out]) == EXIT_HARNESS
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith(f"skewmatrix {argv[0]}: ")
    assert cli.main(["--debug", *argv, *out]) == EXIT_HARNESS
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and raised in err


def test_noxfile_cell_listing_exits_through_the_one_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    monkeypatch.setenv("SKEWMATRIX_MATRIX", str(bad))
    with pytest.raises(SystemExit) as exit_:
        cli.run_or_exit()
    assert exit_.value.code == 2 and "problem(s) in the matrix file" in capsys.readouterr().err
    monkeypatch.setenv(settings.DEBUG_ENV, "1")
    with pytest.raises(SystemExit):
        cli.run_or_exit()
    assert "Traceback" in capsys.readouterr().err


def test_checks_lists_each_capability_or_why_not(capsys: pytest.CaptureFixture) -> None:
    from probes import checks

    assert cli.main(["checks"]) == EXIT_OK
    out = capsys.readouterr().out.splitlines()
    for name in checks.REGISTRY:
        at = out.index(f"{checks.info(name).id}: {checks.info(name).title}")
        for i, kind in enumerate(checks.CAPABILITIES, 1):
            declared = checks.capability(name, kind) is not None
            assert out[at + i] == f"  {kind}: " + ("declared" if declared else checks.lacks(name, kind))
        trains = {PAIR: f"n/a: check {PAIR} has no Step(training=True)",  # grpo: also through unsloth's trainer
                  "grpo-normalizer-nan": "step train, unsloth_train"}.get(checks.info(name).id, "step train")
        assert out[at + len(checks.CAPABILITIES) + 1] == f"  training: {trains}"  # the skew checks train
    assert "  gpu: n/a: check cpu-ce-masked-nan declares no GPU measurement (no gpu.py in " \
           "probes/checks/cpu_ce_masked_nan/)" in out


def test_gate_and_pinned_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    env_out = {"SKEWMATRIX_OUT": str(tmp_path)}
    old = {k: os.environ.get(k) for k in env_out}
    os.environ.update(env_out)
    try:
        assert cli.main(["gate", "--unsloth", "not-a-version"]) == EXIT_HARNESS
        assert "--unsloth 'not-a-version': not a version" in capsys.readouterr().err
        assert cli.main(["pinned", "--python", str(tmp_path / "nope")]) == EXIT_HARNESS
        assert "no such file" in capsys.readouterr().err
        assert cli.main(["pinned"]) == EXIT_HARNESS  # neither --python nor -r
        assert cli.main(["gate", "--unsloth", "2026.10.9", "--below", "99"]) == EXIT_HARNESS
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.mark.parametrize(("argv", "want"), [
    (["-s", "matrix"], ["matrix"]),
    (["-s", "cell(a__b)", "report", "--", "-s", "x"], ["cell(a__b)", "report"]),
    (["--session=gate", "-R"], ["gate"]),
    (["-R", "--", "--force"], ["matrix"]),          # no -s: nox.options.sessions
    (["-k", "cell"], None),                          # selected some other way: unknown
])
def test_requested_sessions(argv: list[str], want: list[str] | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOXSESSION", raising=False)
    assert sessions.requested_sessions(argv, ["matrix"]) == want


def test_unknown_session_argument_stops_nox_before_any_env(tmp_path: Path) -> None:
    env = {**os.environ, "SKEWMATRIX_OUT": str(tmp_path / "out")}
    env.pop("SKEWMATRIX_MATRIX", None)
    proc = subprocess.run([sys.executable, "-m", "nox", "--envdir", str(tmp_path / "nox"), "-s", "matrix", "--",
                           "--hlep"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "usage: nox -s matrix --" in proc.stderr and "unrecognized arguments: --hlep" in proc.stderr
    assert not (tmp_path / "nox" / "cell-u2026-10-9__z2026-9-3").exists()  # no env was built


# ---------------------------------------------------------------- the tests session's Chromium


class FakeHost:
    def __init__(self, *, root: bool, installs: bool = True, apt: bool = True) -> None:
        self.root, self.installs, self.apt = root, installs, apt
        self.ran: list[list[str]] = []
        self.installed = False

    def which(self, name: str) -> str | None:
        if name == "apt-get":
            return "/usr/bin/apt-get" if self.apt else None
        return f"/usr/bin/{name}" if self.installed and name == "chromium" else None

    def run(self, argv: list[str]) -> None:
        self.ran.append(argv)
        if argv[:2] == ["apt-get", "install"]:
            if not self.installs:
                raise RuntimeError("apt-get exited 100")
            self.installed = True


def test_chromium_present_runs_nothing() -> None:
    host = FakeHost(root=True)
    host.installed = True
    got = sessions.ensure_chromium(host.run, which=host.which, euid=lambda: 0, log=lambda _: None)
    assert got == "/usr/bin/chromium"
    assert host.ran == []


def test_chromium_missing_as_root_is_installed_after_apt_update() -> None:
    host = FakeHost(root=True)
    got = sessions.ensure_chromium(host.run, which=host.which, euid=lambda: 0, log=lambda _: None)
    assert got == "/usr/bin/chromium"
    assert host.ran[0] == ["apt-get", "update", "-qq"]
    assert host.ran[1][:2] == ["apt-get", "install"] and host.ran[1][-1] == "chromium"


def test_chromium_missing_without_root_names_the_one_command() -> None:
    host = FakeHost(root=False)
    with pytest.raises(SkewmatrixError, match=r"install it with: sudo apt-get update && sudo apt-get install -y "
                                              r"chromium$") as err:
        sessions.ensure_chromium(host.run, which=host.which, euid=lambda: 1000, log=lambda _: None)
    assert host.ran == [] and err.value.return_code == EXIT_HARNESS


# ---------------------------------------------------------------- progress lines


def test_cell_line_and_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    from matrix.cells.progress import cell_line

    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    line = cell_line(3, 6, "u__z", {FUSED: "missing", CPU: "not-needed"}, "xfail", 31.24)
    assert line == f"[3/6] cell u__z → {FUSED}: missing, {CPU}: not-needed XFAIL (31.2 s)"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\033[31mFAIL\033[0m" in cell_line(1, 1, "u__z", {FUSED: "broken"}, "fail", 1.0)
    monkeypatch.delenv("FORCE_COLOR")
    # captured output is not a terminal: no colour
    assert "\033[" not in cell_line(1, 1, "u__z", {FUSED: "broken"}, "fail", 1.0)


def test_a_long_step_says_it_is_still_running() -> None:
    import time

    from matrix.cells.progress import ticking

    said: list[str] = []
    with ticking(said.append, "installing", every=0.05):
        time.sleep(0.18)
    assert len(said) >= 2 and all(s.startswith("still installing… ") and s.endswith(" s") for s in said)


def test_finished_cells_are_counted_across_processes(tmp_path: Path) -> None:
    from matrix.cells.progress import next_k

    assert [next_k(tmp_path, "run1") for _ in range(3)] == [1, 2, 3]
    assert next_k(tmp_path, "run2") == 1


def test_chromium_install_failure_names_the_command() -> None:
    host = FakeHost(root=True, installs=False)
    with pytest.raises(SkewmatrixError, match=r"installing chromium with apt-get failed \(apt-get exited 100\); "
                                              r"install it by hand: sudo apt-get"):
        sessions.ensure_chromium(host.run, which=host.which, euid=lambda: 0, log=lambda _: None)
    assert host.ran[0] == ["apt-get", "update", "-qq"]


def test_passthrough_commands_get_their_arguments_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    """scan, mutation and bench parse their own options: even a leading --help reaches them."""
    from matrix import scan

    seen: list[list[str]] = []
    monkeypatch.setattr(scan, "main", lambda argv, out: seen.append(argv) or 0)
    assert cli.main(["scan", "--help"]) == 0
    assert cli.session_main("scan", ["--zoo", ">=2026.9", "--offline"]) == 0
    assert seen == [["--help"], ["--zoo", ">=2026.9", "--offline"]]
    assert cli.session_main("bench", ["--hlep"]) == EXIT_HARNESS


def test_noxfile_declares_the_harness_dependencies() -> None:
    """`pipx run nox` / `uvx nox` load the noxfile in nox's own env: its inline metadata must name what
    pyproject.toml does, or the README's first command fails on a fresh machine."""
    import nox.project

    script = nox.project.load_toml(str(ROOT / "noxfile.py"))["dependencies"]
    project = nox.project.load_toml(str(ROOT / "pyproject.toml"))["project"]["dependencies"]
    assert sorted(script) == sorted(project)
