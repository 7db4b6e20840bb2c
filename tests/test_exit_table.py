"""The exit codes have one owner (``matrix.errors``): its table renders every ``--help`` and the README's section,
and no other module of the harness writes an exit code as a number."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from matrix import cli, errors
from matrix.errors import parse

ROOT = Path(__file__).resolve().parent.parent


def readme_section(text: str, heading: str = "## Exit codes") -> str:
    """The body between ``heading`` and the next ``## `` heading, without the blank lines around it."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).strip("\n") + "\n"


def test_readme_section_is_cut_between_its_heading_and_the_next() -> None:
    text = "# t\n## Before\nx\n## Exit codes\n\n| a |\nnote\n\n## After\ny\n"
    assert readme_section(text) == "| a |\nnote\n"


def test_the_readme_exit_codes_are_the_rendered_table() -> None:
    section = readme_section((ROOT / "README.md").read_text(encoding="utf-8"))
    assert section == errors.markdown(), ("README.md's '## Exit codes' section differs from "
                                         "matrix.errors.markdown(); paste the rendered table:\n" + errors.markdown())


def test_the_markdown_has_one_row_per_code_and_a_column_per_group() -> None:
    lines = errors.markdown().splitlines()
    assert lines[0] == ("| code | matrix, report, cell | gate, pinned | scan | mutation | bench, history, cells, "
                        "checks, validate, gpu-wheelhouse, gpu-check, ci-matrix |")
    assert [line.split(" | ")[0] for line in lines[2:5]] == ["| 0", "| 1", "| 2"]
    # bench and its kind never exit 1: an empty meaning renders as a dash, and the epilog leaves the line out
    assert lines[3].endswith("| — |") and "  1  " not in errors.epilog("bench")


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_every_help_epilog_is_the_commands_column(name: str) -> None:
    col = errors.group_of(name)
    expected = ["exit codes:"] + [f"{r.code} {r.meanings[col]}" for r in errors.TABLE if r.meanings[col]]
    assert " ".join(errors.epilog(name).split()) == " ".join(expected)
    assert all(len(line) <= 100 for line in errors.epilog(name).splitlines())
    assert cli.session_parser(name, f"nox -s {name} --").epilog == errors.epilog(name)


@pytest.mark.parametrize(("name", "argv", "needle"), [
    ("scan", [], "inconsistent"), ("mutation", [], "below the bar"), ("bench", [], "  2  bad input")])
def test_commands_that_parse_their_own_arguments_show_their_column(name: str, argv: list[str], needle: str,
                                                                    capsys: pytest.CaptureFixture) -> None:
    if name == "scan":
        from matrix.scan.command import parser
        p = parser("skewmatrix scan")
    elif name == "mutation":
        from matrix.mutation import _parser
        p = _parser()
    else:
        p = cli._Parser(prog="bench", epilog=errors.epilog("bench"))
    assert parse(p, ["--help"]) == errors.EXIT_OK
    assert needle in capsys.readouterr().out


def test_outcome_to_code_mapping() -> None:
    class Outcome:
        def __init__(self, passed: bool, no_verdict: bool) -> None:
            self.passed, self.no_verdict = passed, no_verdict

    assert [errors.run_code(Outcome(p, n)) for p, n in ((True, False), (False, False), (False, True))] == [0, 1, 1]
    assert [errors.gate_code(Outcome(p, n)) for p, n in ((True, False), (False, False), (False, True))] == [0, 1, 2]
    assert (errors.scan_code(False), errors.scan_code(True)) == (0, 1)
    assert (errors.mutation_code(True), errors.mutation_code(False)) == (0, 1)
    assert errors.cell_code("fail", strict=True, exit_zero=False) == 1
    assert errors.cell_code("xpass", strict=False, exit_zero=False) == 0  # a prerequisite of `nox -s matrix`
    assert errors.cell_code("fail", strict=True, exit_zero=True) == 0
    assert errors.cell_code("xfail", strict=True, exit_zero=False) == 0


def _number_returns(path: Path, root: Path = ROOT) -> list[str]:
    """``return 1``/``return 2``, ``SystemExit(1|2)``, ``sys.exit(1|2)`` and ``EXIT_X = n`` outside
    ``matrix.errors``."""
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        value = None
        if isinstance(node, ast.Return):
            value = node.value
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "SystemExit", "exit") and node.args:
            value = node.args[0]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.startswith("EXIT_")
                                                   for t in node.targets):
            out.append(f"{path.relative_to(root)}:{node.lineno}: defines an exit code")
        if isinstance(value, ast.Constant) and value.value in (1, 2, 130) and not isinstance(value.value, bool):
            out.append(f"{path.relative_to(root)}:{node.lineno}: exit {value.value}")
    return out


def test_no_other_harness_module_writes_an_exit_code() -> None:
    # Functions that return 1 or 2 as a count or an index would show up here too; none of ours do in these places.
    paths = [ROOT / "noxfile.py", *sorted((ROOT / "matrix").rglob("*.py")), *sorted((ROOT / "reports").rglob("*.py"))]
    generated = ROOT / "reports" / "out"  # a run's output (bench's cell envs, unsloth's compiled trainers)
    found = [hit for p in paths if p.name != "errors.py" and "backports" not in p.parts
             and not p.is_relative_to(generated) for hit in _number_returns(p)]
    assert found == []


def test_the_scanner_sees_a_bare_exit_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\ndef f():\n    return 2\nsys.exit(1)\nEXIT_OK = 0\n", encoding="utf-8")
    assert sorted(_number_returns(bad, tmp_path)) == ["bad.py:3: exit 2", "bad.py:4: exit 1",
                                                      "bad.py:5: defines an exit code"]
