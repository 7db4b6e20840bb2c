"""The one table of settings: every ``SKEWMATRIX_*`` variable listed once, read through one reader, shown in the
docs as the table renders it, and named nowhere else in the harness's code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from matrix import settings

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"SKEWMATRIX_[A-Z_]+")  # a string that is exactly this is a variable's name, used as a key


def code_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module's code (docstrings left out: prose may name a variable)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_every_setting_is_listed_once_with_its_words() -> None:
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names))
    assert all(n.startswith("SKEWMATRIX_") and s.meaning and s.default for n, s in zip(names, settings.SETTINGS,
                                                                                       strict=True))


def test_the_one_reader_strips_and_refuses_a_name_not_in_the_table() -> None:
    assert settings.value(settings.OUT_ENV, {settings.OUT_ENV: "  /x \n"}) == "/x"
    assert settings.value(settings.OUT_ENV, {}) == ""
    with pytest.raises(KeyError):
        settings.value("SKEWMATRIX_NOT_A_SETTING", {})


def test_the_docs_show_the_table_as_it_renders() -> None:
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert settings.markdown_table() in text
    assert "## Settings" in text


def test_no_module_but_the_table_names_a_setting_in_its_code() -> None:
    """A variable read (or written, or dropped) anywhere else is a second table; the probes get none of them.
    Words for a person (a help text, an error naming the variable to set) may name one."""
    files = [ROOT / "noxfile.py", *sorted(p for pkg in ("matrix", "probes", "reports")
                                          for p in (ROOT / pkg).rglob("*.py") if "backports" not in p.parts)]
    found = [f"{p.relative_to(ROOT)}:{n}: {text}" for p in files if p != ROOT / "matrix" / "settings.py"
             for n, text in code_strings(p) if NAME.fullmatch(text)]
    assert found == []
