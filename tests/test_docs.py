"""The documents live here: every reference to a document names one that is in the repository.

Read from every ``.py``, ``.md`` and ``.toml`` file of the repository (git-ignored folders left out),
a reference is:

* a path to a Markdown file: a token ending in ``.md`` that has a folder in it (``docs/design.md``,
  ``../README.md``), or whose name is in capitals (``README.md``, ``DESIGN.md``), with an optional
  ``#anchor``; lower-case bare names (``report.md``, ``scan.md``) are files the harness writes, not
  documents;
* a relative Markdown link ``[text](target)`` in a ``.md`` file, ``#anchor`` alone meaning the same file;
* a named section, ``README, "Exit codes"``: a document in capitals and a heading of it in quotes;
* a numbered section, ``DESIGN.md section 4`` or ``section 4 of DESIGN.md``: always refused, since no
  document here numbers its sections (name the heading instead: ``docs/design.md#the-gate``).

A path resolves from the referring file's folder or from the repository root (a Markdown link from its
file's folder only, as GitHub renders it), and must stay inside the repository; an anchor must be the
GitHub anchor of a heading of the target (headings inside fenced code do not count). The README and the
check READMEs have a shape of their own, checked below.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUFFIXES = (".py", ".md", ".toml")
# git-ignored or generated folders (.gitignore), and fixtures that are inputs, not our prose
SKIP_DIRS = {".git", ".venv", ".nox", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "out",
             "unsloth_compiled_cache", "static_corpus"}

MD_PATH = re.compile(r"(?<![\w/.$<>{}-])((?:\.\.?/)*(?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]+))?(?![\w/])")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
# a document named without its suffix, as a named section cites it; a capitalised constant in code is not one
DOC_STEMS = "README|DESIGN|STYLE|CONTRIBUTING|CHANGELOG|ARCHITECTURE|HACKING|NOTES|INSTALL|SECURITY"
NAMED_SECTION = re.compile(rf"\b({DOC_STEMS}|[A-Z][A-Z_-]+\.md),\s*[\"']([^\"']+)[\"']")
NUMBERED_SECTION = re.compile(rf"\b(?:{DOC_STEMS}|[A-Z][A-Z_-]+\.md),?\s+sections?\s+\d"
                              r"|\bsections?\s+\d+[a-z]?\s+of\s+\S+\.md")
# Markdown files the harness or a test writes, named in prose or code: outputs, not documents
WRITTEN_PREFIXES = ("reports/out/", "OUT/")
WRITTEN = {"cais/mmlu/README.md"}  # the dataset card tests/probes/test_nanochat_fixtures.py reads from a tmp dir
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def doc_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file()
                  and not SKIP_DIRS & set(p.relative_to(root).parts[:-1]))


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (``-`` and ``_`` kept), spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")


def headings(text: str) -> list[str]:
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (m := HEADING.match(line)):
            out.append(m.group(1))
    return out


def resolve(ref: str, where: Path, root: Path, bases: tuple[str, ...] = ("here", "root")) -> Path | None:
    """The file or folder ``ref`` names, from ``where``'s folder or the root; None if neither inside the root."""
    for base in [where.parent] * ("here" in bases) + [root] * ("root" in bases):
        target = (base / ref).resolve()
        if target.exists() and target.is_relative_to(root):
            return target
    return None


def is_document_path(token: str) -> bool:
    if token in WRITTEN or token.startswith(WRITTEN_PREFIXES):
        return False
    name = Path(token).name
    return "/" in token or name[:-3].isupper()


def problems(text: str, where: Path, root: Path = ROOT) -> list[str]:
    """Every reference in ``text`` (the content of ``where``) that does not resolve, with the reason."""
    out: list[str] = []

    def check(ref: str, frag: str | None, n: int, link: bool = False) -> None:
        # a Markdown link resolves from its file only (as GitHub renders it); a path in prose from the root too
        target = where if not ref else resolve(ref, where, root, ("here",) if link else ("here", "root"))
        if target is None:
            out.append(f"{n}: {ref!r} is not a file in the repository")
        elif frag and target.suffix == ".md":
            body = text if target == where else target.read_text(encoding="utf-8")
            if frag not in {anchor(h) for h in headings(body)}:
                out.append(f"{n}: {ref or where.name}#{frag}: no such heading")

    is_md = where.suffix == ".md"
    for n, line in enumerate(text.splitlines(), 1):
        if NUMBERED_SECTION.search(line):
            out.append(f"{n}: a numbered section of a document: {line.strip()!r}")
        for m in MD_PATH.finditer(line):
            if is_document_path(m.group(1)):
                check(m.group(1), m.group(2), n)
        for m in NAMED_SECTION.finditer(line):
            doc = resolve(f"{m.group(1)}.md", where, root)
            if doc is None:
                out.append(f"{n}: {m.group(1)}.md is not a file in the repository")
            elif anchor(m.group(2)) not in {anchor(h) for h in headings(doc.read_text(encoding="utf-8"))}:
                out.append(f"{n}: {m.group(1)}.md has no section {m.group(2)!r}")
        if is_md:
            for m in MD_LINK.finditer(line):
                link = m.group(1)
                if re.match(r"[a-z]+:", link):
                    continue  # https:, mailto:
                ref, _, frag = link.partition("#")
                check(ref, frag or None, n, link=True)
    return out


# --- the rule on small inputs of our own -------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# Design\n\n## The gate\n\n```toml\n# not a heading\n```\n")
    (tmp_path / "README.md").write_text("# x\n\n## Exit codes\n")
    (tmp_path / "pkg").mkdir()
    return tmp_path


@pytest.mark.parametrize("line", [
    "# Raw zoo import needs both (DESIGN.md section 7).",               # the old references, as they were
    '"""The end-to-end training probe (DESIGN.md section 5b): does a real run log NaN?',
    "# (DESIGN section 3); what the stack changes is the reach beside the state:",
    "as argued in section 4 of README.md",
    "see DESIGN.md",                                                    # a document that is not here
    "see ../shared/fixtures/README.md",                                 # one outside the repository
    "see docs/nope.md",
    "see docs/design.md#the-gates",                                     # a heading that is not there
    "see docs/design.md#not-a-heading",                                 # a comment inside fenced code
    """"(README, 'Cell JSON schema versions')\"""",                    # a named section that is not there
    '# (README, "Writing a matrix file").',
])
def test_a_reference_to_a_missing_document_or_section_is_found(tree: Path, line: str) -> None:
    assert problems(line, tree / "pkg" / "mod.py", tree)


@pytest.mark.parametrize("line", [
    "see docs/design.md#the-gate and ../docs/design.md",
    "# The exit codes of every command (README, \"Exit codes\").",
    "written to reports/out/report.md and mutation.md",                # harness output, not a document
    "python -m pip install nox uv",
])
def test_a_reference_that_resolves_passes(tree: Path, line: str) -> None:
    assert problems(line, tree / "pkg" / "mod.py", tree) == []


def test_markdown_links_resolve_from_the_file_and_anchors_from_the_target(tree: Path) -> None:
    where = tree / "docs" / "page.md"
    assert problems("[d](design.md#the-gate) [r](../README.md#exit-codes) [u](https://x.org/a.md)", where, tree) == []
    assert problems("## Exit codes\n[top](#exit-codes)", tree / "README.md", tree) == []
    assert len(problems("[d](design.md#gate) [r](README.md) [t](#nowhere)", where, tree)) == 3


def test_anchor_is_githubs() -> None:
    assert anchor("What `nox -s matrix` does in a cell") == "what-nox--s-matrix-does-in-a-cell"
    assert anchor("Check `fused-ce-masked-nan`") == "check-fused-ce-masked-nan"
    assert anchor("The guard protocol") == "the-guard-protocol"


# --- the repository -----------------------------------------------------------------------------------------


def test_every_reference_in_the_repository_resolves() -> None:
    """This module is left out: its examples above are wrong on purpose."""
    found = [f"{p.relative_to(ROOT)}:{msg}" for p in doc_files() if p != Path(__file__).resolve()
             for msg in problems(p.read_text(encoding="utf-8"), p)]
    assert found == []


def test_the_scan_reads_the_files_that_carry_references() -> None:
    files = {str(p.relative_to(ROOT)) for p in doc_files()}
    assert {"README.md", "docs/design.md", "noxfile.py", "matrix/stacks.toml",
            "probes/checks/vocabulary.py", "tests/test_docs.py"} <= files
    assert not any(f.startswith((".venv/", "reports/out/")) for f in files)


README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """The body of ``## title``, up to the next heading of level two."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, title
    return m.group(1)


def test_readme_is_short_and_keeps_its_quick_start_and_exit_codes() -> None:
    assert len(README.splitlines()) <= 350
    quick = section(README, "Quick start")
    assert "python -m pip install nox uv && nox -s matrix" in quick
    assert re.search(r"^nox -s tests\b", quick, re.M)
    codes = section(README, "Exit codes")
    assert {"| 0 |", "| 1 |", "| 2 |"} <= set(re.findall(r"^\| \d \|", codes, re.M))


def test_readme_links_every_check_readme_and_each_has_the_sections_a_reader_needs() -> None:
    from probes import checks

    listed = section(README, "Checks")
    for name in checks.REGISTRY:
        path = ROOT / "probes" / "checks" / checks.folder(name) / "README.md"
        assert f"(probes/checks/{checks.folder(name)}/README.md)" in listed, name
        assert f"`{checks.info(name).id}`" in listed, name
        heads = " / ".join(headings(path.read_text(encoding="utf-8"))).lower()
        for word in ("hazard", "evidence", "states", "run it"):
            assert word in heads, (name, word)


def test_the_nanochat_table_lives_in_its_check_readme() -> None:
    """The measured row per ref moved with the check: every ref of the bundle and our fix, with its verdict."""
    lines = (ROOT / "probes" / "checks" / "nanochat_sft_masked_nan" / "README.md").read_text(encoding="utf-8")
    lines = lines.split("\n| ref (commit) |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    rows = {line.split("|")[1].strip().split(" ")[0]: line.split("|")[-2].strip() for line in lines}
    assert rows == {"master": "`missing`, exposed", "pr-619": "`broken`, exposed", "pr-623": "`broken`, exposed",
                    "pr-662": "`broken`, exposed", "fix": "`not-needed`"}
