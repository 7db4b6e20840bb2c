"""The docs name only what exists: every repository path and every ``module.name`` a Markdown document cites.

``tests/test_docs.py`` holds the references between documents to account; this module holds the code they
name. In every Markdown file of the repository (git-ignored folders and the static corpus left out), inside
backticks:

* a path into the repository -- a token whose first folder is one of the repository's own top-level folders
  (``matrix/spec/trees.py``, ``probes/checks/``, ``tests/integration/test_pair_history.py:40``: a ``:line``
  or ``:a-b`` suffix is dropped) -- must be a file or folder here;
* a dotted name under one of our packages (``matrix.envs.envrun.throwaway``, ``probes.checks.folder_of``) must
  be a module, or a name a module binds at its top level (read with ``ast``, nothing imported). A name of two
  parts whose second is no module of the package (``probes.raw_reuse``) is a key of the cell JSON, where the
  probes' own section is called ``probes``, and is left alone.

A token with a placeholder (``<check>``, ``NAME``, ``*``, ``{x}``, ``...``) names a pattern, not a thing, and
is left alone; so are the files the harness writes (``reports/out/...``).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.test_docs import SKIP_DIRS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("matrix", "probes", "reports")
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINE_SUFFIX = re.compile(r":\d+(?:-\d+)?$")
PLACEHOLDER = re.compile(r"[<>*{}]|\.\.\.|…|\b[A-Z]{2,}\b")
DOTTED = re.compile(r"^(?:matrix|probes|reports)(?:\.\w+)+$")
WRITTEN = ("reports/out/",)


def top_folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".git", ".nox", ".venv"))} | {
        ".ci", ".github"}


def markdown_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*.md") if p.is_file()
                  and not SKIP_DIRS & set(p.relative_to(root).parts[:-1]))


@cache
def top_level_names(path: Path) -> frozenset[str]:
    """The names a module binds at its top level (defs, classes, assignments, imports), read with ``ast``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def module_file(dotted: str, root: Path) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def dotted_problem(name: str, root: Path) -> str | None:
    """Why ``name`` names nothing (None when it names a module or a top-level name of one)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        mod = module_file(".".join(parts[:i]), root)
        if mod is None:
            continue
        rest = parts[i:]
        if not rest or rest[0] in top_level_names(mod):
            return None  # an attribute of that name (a method, a field) is for the reader to follow
        return f"{'.'.join(parts[:i])} has no top-level name {rest[0]!r}"
    return f"no module {parts[0]}"


def problems(text: str, where: Path, root: Path = ROOT) -> list[str]:
    tops = top_folders(root)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for m in CODE_SPAN.finditer(line):
            token = m.group(1).strip()
            if " " in token or PLACEHOLDER.search(token) or token.startswith(WRITTEN):
                continue
            if DOTTED.match(token):
                parts = token.split(".")
                if len(parts) == 2 and module_file(token, root) is None and not (root / parts[0] / parts[1]).is_dir():
                    continue  # a JSON key (``probes.steps``), not a module's name
                why = dotted_problem(token, root)
                if why:
                    out.append(f"{n}: `{token}`: {why}")
                continue
            path = LINE_SUFFIX.sub("", token.split("#")[0]).rstrip("/")
            first = path.split("/")[0]
            if "/" in path and first in tops and not (root / path).exists():
                out.append(f"{n}: `{token}` is not a file or folder in the repository")
    return out


# --- the rule on small inputs of our own -------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "matrix" / "envs").mkdir(parents=True)
    (tmp_path / "matrix" / "__init__.py").write_text("")
    (tmp_path / "matrix" / "envs" / "__init__.py").write_text("")
    (tmp_path / "matrix" / "envs" / "envrun.py").write_text("import os\nX = 1\ndef throwaway(): ...\nclass R: ...\n")
    (tmp_path / "docs").mkdir()
    return tmp_path


@pytest.mark.parametrize("line", [
    "the recipe lives in `matrix/spec/trees.py:27`",   # moved away
    "see `matrix/envs/nope.py`",
    "`matrix.envs.envrun.build`",                      # no such function
    "`matrix.cells.cell.cell_digest`",                 # no such module
    "`matrix.nothing.f`",
])
def test_a_name_that_is_not_there_is_found(tree: Path, line: str) -> None:
    assert problems(line, tree / "docs" / "x.md", tree)


@pytest.mark.parametrize("line", [
    "`matrix/envs/envrun.py:10-20` and `matrix/envs/` and `matrix.envs.envrun.throwaway` and `matrix.envs.envrun`",
    "`matrix.envs.envrun.R.method` (a method: the reader follows the class)",
    "`probes/checks/<check>/verdict.py`, `NAME.py`, `matrix/*.toml`, `reports/out/report.json`",  # patterns, outputs
    "`pip install x/y`, `nox -s matrix`, `unsloth/models/rl.py` (another project's file)",
    "`matrix/envs/envrun.py#L3` (an anchor is test_docs.py's), `matrix.raw_reuse` (a JSON key of that name)",
])
def test_a_name_that_is_there_or_a_pattern_passes(tree: Path, line: str) -> None:
    assert problems(line, tree / "docs" / "x.md", tree) == []


# --- the repository -----------------------------------------------------------------------------------------


def test_every_path_and_name_the_docs_cite_exists() -> None:
    found = [f"{p.relative_to(ROOT)}:{msg}" for p in markdown_files()
             for msg in problems(p.read_text(encoding="utf-8"), p)]
    assert found == []
