"""Structural rules of the repository, measured on the source with ``ast`` (no import needed).

Run ``python tests/test_layout.py`` for the numbers (largest module, import
cycles, arrows back up); pytest enforces the rules:

* data flows one way: ``matrix`` -> ``probes``/``reports``; ``reports`` ->
  ``probes.checks`` (the registry, the vocabulary and each check's ``verdict``)
  only; ``probes`` -> nothing of the harness;
* a check's ``__init__.py`` and ``verdict.py`` are stdlib-only (plus the
  registry and vocabulary), because ``reports`` imports them;
* no import cycle between modules, counting function-level imports too;
* a hazard's names (check id, folder, kernel) appear only inside its check
  folder (the registry line excepted);
* no module over 400 lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("matrix", "probes", "reports")
MAX_LINES = 400
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of our packages (backport payloads are data, not code)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("matrix", "backports") or "out" in rel.parts[:2]:
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str, is_pkg: bool) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                mod = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            # `from X import Y`: Y may be a module (X.Y) or a name in X; the caller resolves the longest prefix
            yield from (f"{mod}.{a.name}" for a in node.names)


def graph() -> dict[str, set[str]]:
    """Module -> our modules it imports (anywhere in the file, function-level imports included)."""
    mods = modules()
    g: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for imp in _imports(path, name, path.name == "__init__.py"):
            # the longest prefix that is one of our modules
            parts = imp.split(".")
            for i in range(len(parts), 0, -1):
                cand = ".".join(parts[:i])
                if cand in mods:
                    if cand != name:
                        deps.add(cand)
                    break
        g[name] = deps
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def allowed(src: str, dst: str) -> bool:
    """The one-way data flow: may module ``src`` import module ``dst``?"""
    top_s, top_d = src.split(".", maxsplit=1)[0], dst.split(".", maxsplit=1)[0]
    if top_s in (top_d, "matrix"):
        return True
    if top_s == "reports":
        return top_d == "probes" and (dst in ("probes.checks", "probes.checks.vocabulary")
                                      or (dst.startswith("probes.checks.") and dst.endswith(".verdict"))
                                      or (dst.startswith("probes.checks.") and dst.count(".") == 2))
    return False  # probes -> harness


def arrows_back_up(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((s, d) for s, deps in g.items() for d in deps if not allowed(s, d))


def check_folders() -> dict[str, Path]:
    return {p.name: p for p in sorted((ROOT / "probes" / "checks").iterdir())
            if p.is_dir() and (p / "__init__.py").is_file()}


def hazard_names(folder: Path) -> set[str]:
    """The names that identify a check's hazard: its folder, id and kernel (read from its INFO, no import)."""
    names = {folder.name}
    tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("id", "kernel") and isinstance(node.value, ast.Constant):
            names.add(str(node.value.value))
            if node.arg == "kernel":
                names.add(str(node.value.value).rsplit(".", 1)[-1])
    return names


def hazard_leaks() -> list[str]:
    leaks = []
    files = [*modules().values(), ROOT / "noxfile.py"]
    registry = ROOT / "probes" / "checks" / "__init__.py"
    for name, folder in check_folders().items():
        for word in hazard_names(folder):
            for path in files:
                if folder in path.parents:
                    continue
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    if word in line and not (path == registry and line.strip() == f'"{name}",'):
                        leaks.append(f"{path.relative_to(ROOT)}:{n}: {word!r}")
    return leaks


def largest() -> tuple[int, str]:
    return max((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(ROOT)))
               for p in modules().values())


# ---------------------------------------------------------------- the rules


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_no_arrows_back_up() -> None:
    assert arrows_back_up(graph()) == []


def test_verdict_and_check_info_modules_are_stdlib_only() -> None:
    ours = {"probes", "probes.checks", "probes.checks.vocabulary"}
    bad = {}
    for folder in check_folders().values():
        for f in ("__init__.py", "verdict.py"):
            path = folder / f
            if not path.is_file():
                bad[str(path.relative_to(ROOT))] = ["missing"]
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            tops = set(_imports(path, name, f == "__init__.py"))
            foreign = sorted(i for i in tops if i.split(".")[0] not in STDLIB and i not in ours
                             and not i.startswith("probes.checks.vocabulary.") and i != "probes.checks.CheckInfo")
            if foreign:
                bad[str(path.relative_to(ROOT))] = foreign
    assert bad == {}


def test_a_hazard_is_named_only_inside_its_check_folder() -> None:
    assert hazard_leaks() == []


def test_every_check_folder_is_registered_and_meets_the_contract() -> None:
    from probes import checks

    assert sorted(checks.REGISTRY) == sorted(check_folders())
    assert len(set(checks.ids())) == len(checks.REGISTRY)
    for name in checks.REGISTRY:
        folder = check_folders()[name]
        assert (folder / "phases.py").is_file() and (folder / "verdict.py").is_file(), name


def test_no_module_over_the_size_limit() -> None:
    big = {str(p.relative_to(ROOT)): n for p in modules().values()
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert big == {}


def test_importing_the_harness_starts_nothing_heavy() -> None:
    code = ("import sys, matrix.spec, matrix.pipeline, matrix.cell, reports.model, reports.render;"
            "bad = [m for m in ('torch', 'unsloth', 'unsloth_zoo', 'nox') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


if __name__ == "__main__":
    g = graph()
    lines, path = largest()
    print(f"modules: {len(g)}; largest: {path} ({lines} lines)")
    print(f"import cycles: {len(cycles(g))} {cycles(g)}")
    print(f"arrows back up: {len(arrows_back_up(g))} {arrows_back_up(g)}")
    print(f"hazard names outside their check folder: {len(hazard_leaks())}")
