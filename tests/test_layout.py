"""Structural rules of the repository, measured on the source with ``ast`` (no import needed).

Run ``python tests/test_layout.py`` for the numbers (largest module, import
cycles, arrows back up); pytest enforces the rules:

* data flows one way: ``matrix`` -> ``probes``/``reports``; ``reports`` ->
  ``probes.checks`` (the registry, the vocabulary and each check's ``verdict``)
  only; ``probes`` -> nothing of the harness;
* a check's ``__init__.py``, ``verdict.py`` and ``render.py`` are stdlib-only
  (plus the registry, its capability types and the vocabulary), because
  ``reports`` imports them;
* no import cycle between modules, counting function-level imports too, nor between rooms (``matrix``'s
  packages, ``reports``, ``probes``);
* a hazard's names appear only inside its check folder (the registry line
  excepted): its folder, id and kernel (the kernel's last name too), and
  what its capabilities declare -- the function its scan target judges, the
  guard module (dotted and as a file name) and the class a guard patches, the
  guard file its mutation target mutates, the training count its renderer
  names. A name two checks share (both record ``num_items_in_batch``) may
  appear in either folder. Generic harness code is every file of ``matrix``,
  ``probes`` and ``reports`` outside the check folders, and ``noxfile.py``;
  the matrix files (``matrix/*.toml``) and backport payloads are data that
  names builds and checks on purpose, and are left out;
* tests are left out of the hazard rule too: a test of one check's detectors,
  verdicts, scan view or mutation target must name what it tests, while the
  tests of generic code (reports, scan, mutation) take checks from the
  registry or use made-up ones; what the rule keeps out of tests/ is runner
  code: no module there is a command (a ``main``, an argument parser), since
  the harness's commands live in its packages, under these rules;
* every capability a check folder declares has its registry type;
* no two harness modules share a name (``matrix`` and ``reports``, packages'
  ``__init__`` and ``__main__`` aside): a name says which room a module is in.
  Check folders repeat the contract's names (``phases``, ``verdict``,
  ``scan`` ...) on purpose and are left out;
* no module over 400 lines (the GPU runner included: it is ``matrix/gpu``);
* ``matrix/`` has at most 12 rooms (top-level modules and packages; data files and ``backports/`` aside),
  each opening with a one-line docstring that says what lives there;
* a check has one spelling, its id: its folder is the id with underscores (``checks.folder_of`` derives
  it, the one place), no harness module derives a folder by hand, and the short label is the renderers'
  alone (``reports/render``);
* every slow test module (an integration test, or a module-scoped fixture) has its place in
  ``tests/conftest.py``'s ``LONGEST_FIRST``, and collection starts with them in that order.
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
MAX_ROOMS = 12
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
                                      or (dst.startswith("probes.checks.") and dst.endswith((".verdict", ".render")))
                                      or (dst.startswith("probes.checks.") and dst.count(".") == 2))
    return False  # probes -> harness


def arrows_back_up(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((s, d) for s, deps in g.items() for d in deps if not allowed(s, d))


def check_folders() -> dict[str, Path]:
    return {p.name: p for p in sorted((ROOT / "probes" / "checks").iterdir())
            if p.is_dir() and (p / "__init__.py").is_file()}


def hazard_names(folder: Path) -> set[str]:
    """The names that identify a check's hazard: its folder, id and kernel (read from its INFO, no import), and the
    names its capabilities declare (imported through the registry: harness-side modules, no torch)."""
    names = {folder.name}
    tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("id", "kernel") and isinstance(node.value, ast.Constant):
            names.add(str(node.value.value))
            if node.arg == "kernel":
                names.add(str(node.value.value).rsplit(".", 1)[-1])
    return names | declared_names(folder.name)


def declared_names(name: str) -> set[str]:
    """What a check's capabilities name: scanned function, guard module and file, patched class, training count
    (``name``: the check's folder)."""
    from probes import checks

    name = name.replace("_", "-")  # the folder as its id (the registry's spelling)
    if name not in checks.REGISTRY:
        return set()
    out: set[str] = set()
    scan = checks.capability(name, "scan")
    if scan is not None:
        out.add(scan.function.split(".")[0])
        if scan.guard is not None:
            out |= {scan.guard.module, scan.guard.basename, scan.guard.owner}
    mutation = checks.capability(name, "mutation")
    if mutation is not None:
        out |= {mutation.guard_module, mutation.guard_module.rsplit(".", 1)[-1], Path(mutation.guard_file).stem}
    render = checks.capability(name, "render")
    if render is not None:
        out.add(render.TRAIN_COUNT)
    return out


def generic_files() -> list[Path]:
    """Generic harness code: every text file of our packages outside the check folders, and the noxfile (matrix
    files, backport payloads, caches and generated output are left out)."""
    folders = set(check_folders().values())
    out = [ROOT / "noxfile.py"]
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*")):
            rel = path.relative_to(ROOT)
            if (not path.is_file() or path.suffix not in (".py", ".json", ".md", ".txt", ".toml")
                    or rel.parts[:2] in (("matrix", "backports"), ("reports", "out"))
                    or (rel.parts[0] == "matrix" and path.suffix == ".toml") or "__pycache__" in rel.parts
                    or folders & set(path.parents)):
                continue
            out.append(path)
    return out


def hazard_leaks() -> list[str]:
    folders = check_folders()
    owners: dict[str, set[Path]] = {}
    for folder in folders.values():
        for word in hazard_names(folder):
            owners.setdefault(word, set()).add(folder)
    registry = ROOT / "probes" / "checks" / "__init__.py"
    ids = {f.replace("_", "-") for f in folders}
    leaks = []
    for path in generic_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if path == registry and line.strip().strip('",') in ids:
                continue  # the registry line
            leaks += [f"{path.relative_to(ROOT)}:{n}: {word!r}" for word in sorted(owners) if word in line]
    # a check folder may name another check's word only where both declare it (a shared name)
    for folder in folders.values():
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            leaks += [f"{path.relative_to(ROOT)}: {word!r} of another check" for word, where in sorted(owners.items())
                      if folder not in where and word in text]
    return leaks


def commands_under_tests() -> list[str]:
    """Modules under tests/ that are commands: a ``main`` or an argument parser (runner code belongs in the
    packages; a test module may still print its own numbers under ``__main__``, as this one does)."""
    out = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path == Path(__file__).resolve() or "static_corpus" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
            out.append(f"{path.relative_to(ROOT)}: def main")
        if any(i.split(".")[0] == "argparse" for i in _imports(path, "tests.module", False)):
            out.append(f"{path.relative_to(ROOT)}: imports argparse")
    return out


def shared_names() -> dict[str, list[str]]:
    """Module base names that more than one harness module (``matrix``, ``reports``) carries."""
    by_name: dict[str, list[str]] = {}
    for name, path in modules().items():
        if name.split(".")[0] in ("matrix", "reports") and path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return {k: sorted(v) for k, v in sorted(by_name.items()) if len(v) > 1}


def largest() -> tuple[int, str]:
    return max((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(ROOT)))
               for p in modules().values())


# ---------------------------------------------------------------- the rules


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def room_of(module: str) -> str:
    """The room a module lives in: ``matrix.cells.cell`` -> ``matrix.cells``; ``reports.*`` and ``probes.*`` are
    one room each (a check folder importing the generic probe machinery is its contract, not a cycle)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "matrix" and len(parts) > 1 else parts[0]


def room_graph(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the other rooms its modules import (a module-level graph folded by :func:`room_of`)."""
    out: dict[str, set[str]] = {}
    for module, deps in g.items():
        here = room_of(module)
        out.setdefault(here, set()).update(room_of(d) for d in deps if room_of(d) != here)
    return out


def test_no_cycle_between_rooms() -> None:
    """A cycle of packages is a cycle all the same, even when no two modules import each other: a command's own
    module importing the CLI package, which imports every command, was three of them."""
    assert cycles(room_graph(graph())) == []


def test_a_cycle_between_rooms_is_seen_where_no_module_cycle_is() -> None:
    g = {"matrix.a.x": {"matrix.b.y"}, "matrix.b.y": set(), "matrix.b": {"matrix.a.z"}, "matrix.a.z": set()}
    assert cycles(g) == [] and cycles(room_graph(g)) != []


def test_no_arrows_back_up() -> None:
    assert arrows_back_up(graph()) == []


def test_verdict_and_check_info_modules_are_stdlib_only() -> None:
    ours = {"probes", "probes.checks", "probes.checks.vocabulary", "probes.checks.capabilities",
            "probes.checks.judging"}
    bad = {}
    shared = ROOT / "probes" / "checks" / "judging.py"  # the verdicts' shared opening: stdlib and vocabulary only
    foreign = sorted(i for i in _imports(shared, "probes.checks.judging", False)
                     if i.split(".")[0] not in STDLIB and not i.startswith("probes.checks.vocabulary"))
    if foreign:
        bad[str(shared.relative_to(ROOT))] = foreign
    for folder in check_folders().values():
        for f in ("__init__.py", "verdict.py", "render.py"):
            path = folder / f
            if not path.is_file():
                if f != "render.py":  # optional: a check may declare no step renderer
                    bad[str(path.relative_to(ROOT))] = ["missing"]
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            tops = set(_imports(path, name, f == "__init__.py"))
            foreign = sorted(i for i in tops if i.split(".")[0] not in STDLIB and i not in ours
                             and not i.startswith(("probes.checks.vocabulary.", "probes.checks.capabilities.",
                                                   "probes.checks.judging."))
                             and i != "probes.checks.CheckInfo")
            if foreign:
                bad[str(path.relative_to(ROOT))] = foreign
    assert bad == {}


def test_a_hazard_is_named_only_inside_its_check_folder() -> None:
    assert hazard_leaks() == []


def test_every_check_folder_is_registered_and_meets_the_contract() -> None:
    from probes import checks

    assert sorted(checks.folder(c) for c in checks.REGISTRY) == sorted(check_folders())
    assert checks.ids() == list(checks.REGISTRY)  # each folder's INFO.id is the id the registry names it by
    for name in checks.REGISTRY:
        folder = check_folders()[checks.folder(name)]
        assert (folder / "phases.py").is_file() and (folder / "verdict.py").is_file(), name


def test_every_declared_capability_has_its_registry_type() -> None:
    from probes import checks

    types = {"scan": checks.ScanTarget, "mutation": checks.MutationTarget, "gpu": checks.GpuMeasure,
             "pairs": checks.PairTarget}
    bad = []
    for name in checks.REGISTRY:
        for kind in checks.CAPABILITIES:
            value = checks.capability(name, kind)
            if value is None:
                continue
            if kind == "render":
                ok = isinstance(getattr(value, "TRAIN_COUNT", None), str) and callable(getattr(value, "details", None))
            else:
                ok = isinstance(value, types[kind])
            if not ok:
                bad.append(f"{name}/{kind}")
    assert bad == []


def test_no_command_lives_under_tests() -> None:
    assert commands_under_tests() == []


def test_no_two_harness_modules_share_a_name() -> None:
    assert shared_names() == {}


def test_no_module_over_the_size_limit() -> None:
    big = {str(p.relative_to(ROOT)): n for p in modules().values()
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert big == {}


def rooms() -> dict[str, str]:
    """``matrix/``'s top-level modules and packages -> the first line of each one's docstring (the package's own
    ``__init__`` and ``__main__`` are its door, not rooms)."""
    out = {}
    for p in sorted((ROOT / "matrix").iterdir()):
        if p.name in ("__init__.py", "__main__.py"):
            continue
        init = p / "__init__.py" if p.is_dir() else p
        if (p.is_dir() and init.is_file()) or p.suffix == ".py":
            out[p.name] = (ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or "").split("\n")[0]
    return out


def test_matrix_has_few_rooms_each_saying_what_lives_there() -> None:
    found = rooms()
    assert len(found) <= MAX_ROOMS, sorted(found)
    assert [name for name, line in found.items() if len(line.split()) < 4] == []


def test_a_check_is_spelt_by_its_id() -> None:
    from probes import checks

    assert all(checks.info(c).id == c for c in checks.REGISTRY)  # the registry is keyed by id
    assert all((ROOT / "probes" / "checks" / checks.folder(c)).is_dir() for c in checks.REGISTRY)
    assert all(checks.folder_of(c) == checks.folder(c) for c in checks.REGISTRY)
    assert checks.folder_of(checks.folder(checks.REGISTRY[0])) is None  # a folder name is no id
    leaks = []
    for path in generic_files():
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        if "short_labels" in text and not rel.startswith("reports/render/"):
            leaks.append(f"{rel}: short_labels outside the renderers")
        if rel != "probes/checks/__init__.py" and 'replace("-", "_")' in text:
            leaks.append(f"{rel}: derives a folder by hand")
    assert leaks == []


def test_importing_the_harness_starts_nothing_heavy() -> None:
    code = ("import sys, matrix.spec, matrix.cells.pipeline, matrix.cells.cell, reports.model, reports.render;"
            "bad = [m for m in ('torch', 'unsloth', 'unsloth_zoo', 'nox') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def shared_fixture_modules() -> list[str]:
    """Test modules that define a module- or session-scoped fixture (read with ``ast``)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            scopes = {k.value.value for d in getattr(node, "decorator_list", ()) if isinstance(d, ast.Call)
                      for k in d.keywords if k.arg == "scope" and isinstance(k.value, ast.Constant)}
            if isinstance(node, ast.FunctionDef) and scopes & {"module", "session"}:
                found.append(path.relative_to(ROOT).as_posix())
                break
    return found


def collected_modules(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                           *args], cwd=ROOT, capture_output=True, text=True, check=False)
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert proc.returncode == 0 and ids, proc.stdout[-2000:] + proc.stderr[-2000:]
    return list(dict.fromkeys(i.split("::", 1)[0] for i in ids))


def test_every_slow_module_has_its_place_in_the_order() -> None:
    # A module missing from the list would start after the unit tests, wherever collection put it.
    from tests.conftest import LONGEST_FIRST

    slow = set(shared_fixture_modules()) | set(collected_modules("-m", "integration"))
    assert sorted(slow) == sorted(LONGEST_FIRST)


def test_collection_starts_with_the_longest_modules_in_order() -> None:
    from tests.conftest import LONGEST_FIRST

    modules = collected_modules()
    assert modules[:len(LONGEST_FIRST)] == list(LONGEST_FIRST)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a script, tests/ comes first on the path, and tests/probes shadows probes
    g = graph()
    lines, path = largest()
    print(f"modules: {len(g)}; largest: {path} ({lines} lines)")
    print(f"import cycles: {len(cycles(g))} {cycles(g)}")
    print(f"arrows back up: {len(arrows_back_up(g))} {arrows_back_up(g)}")
    print(f"hazard names outside their check folder: {len(hazard_leaks())} {hazard_leaks()[:10]}")
    print(f"commands under tests/: {commands_under_tests()}")
    print(f"harness module names shared: {shared_names()}")
    print(f"matrix rooms: {len(rooms())} {sorted(rooms())}")
