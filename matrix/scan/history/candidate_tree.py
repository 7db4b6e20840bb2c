"""The gate's structural verdict for a candidate that is not a release: a source tree (a checkout, an unpacked
wheel, a git ref's checkout) or a wheel file, read directly, judged against the zoo releases a user can get.

Like the PyPI path (``structural``), the candidate's references into zoo (the registry's pair reader) are
resolved against every zoo release at or above its declared floor and the newest one, and the gate fails on
``incompatible`` with any release a plain install can pick. The floor comes from the candidate's own
metadata: a wheel's or an unpacked wheel's ``METADATA`` (an sdist's ``PKG-INFO``), else ``pyproject.toml``'s
``[project] dependencies``; with none readable (dynamic dependencies), only the newest zoo is judged, and
the log says so. Zoo releases are read through the history's readers (one analysis per release digest, in
the scan's cache).
"""

from __future__ import annotations

import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from matrix.scan.history import grid, metadata_caps, readers

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

METADATA_NAMES = ("METADATA", "PKG-INFO")


def package_root(tree: Path, package: str) -> Path | None:
    """Where ``package`` sits in a tree: ``tree/package``, ``tree/src/package``, or the tree itself."""
    for root in (tree / package, tree / "src" / package):
        if (root / "__init__.py").is_file():
            return root
    return tree if tree.name == package and (tree / "__init__.py").is_file() else None


def tree_sources(tree: Path, package: str) -> dict[str, str]:
    """``{wheel member: text}`` of the package's ``.py`` files in a tree (members as a wheel names them)."""
    root = package_root(tree, package)
    if root is None:
        return {}
    return {f"{package}/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def pyproject_metadata(pyproject: Path) -> str | None:
    """Core metadata made from ``[project]``: a ``Requires-Dist`` line per dependency (per extra, with its
    marker); None when the dependencies are dynamic or the file is unreadable."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project") or {}
    except (OSError, ValueError):
        return None
    if "dependencies" in (project.get("dynamic") or []):
        return None
    lines = [f"Name: {project.get('name', '')}", f"Version: {project.get('version', '')}"]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies") or []]
    for extra, deps in (project.get("optional-dependencies") or {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for d in deps:
            try:
                req = Requirement(d)
            except InvalidRequirement:
                continue
            marker = f'({req.marker}) and extra == "{extra}"' if req.marker else f'extra == "{extra}"'
            req.marker = None
            lines.append(f"Requires-Dist: {req}; {marker}")
    return "Metadata-Version: 2.1\n" + "\n".join(lines) + "\n"


def tree_metadata(tree: Path) -> str | None:
    """The tree's core metadata: an unpacked wheel's ``*.dist-info/METADATA`` or an sdist's ``PKG-INFO``, else
    made from ``pyproject.toml``."""
    for found in [*sorted(tree.glob("*.dist-info/METADATA")), tree / "PKG-INFO"]:
        if found.is_file():
            return found.read_text(encoding="utf-8", errors="replace")
    pyproject = tree / "pyproject.toml"
    return pyproject_metadata(pyproject) if pyproject.is_file() else None


def wheel_contents(wheel: Path, package: str) -> tuple[dict[str, str], str | None]:
    """A wheel file's package sources and its core metadata."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sources = {n: zf.read(n).decode("utf-8", "replace") for n in names
                   if n.startswith(package + "/") and n.endswith(".py")}
        meta = next((n for n in names if n.endswith(".dist-info/METADATA")), None)
        return sources, zf.read(meta).decode("utf-8", "replace") if meta else None


def read_candidate(path: Path, package: str) -> tuple[dict[str, str], str | None]:
    """``(sources, metadata)`` of a candidate path: a wheel file or a directory."""
    if path.is_file():
        return wheel_contents(path, package)
    return tree_sources(path, package), tree_metadata(path)


def version_of(metadata: str | None) -> str:
    for line in (metadata or "").splitlines():
        if line.startswith("Version:") and line.split(":", 1)[1].strip():
            return line.split(":", 1)[1].strip()
    return "candidate"


def _ge(a: str, b: str) -> bool:
    try:
        return Version(a) >= Version(b)
    except InvalidVersion:
        return False


def zoo_rows(spec: str, log: Callable[[str], Any], workers: int = 6, offline: bool = False,
             cache: Path | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """``([{version, table, error}], newest zoo)`` for the zoo releases ``spec`` selects (``{newest}`` in it
    stands for the newest release), read through the history's readers."""
    from matrix.index import IndexClient
    from matrix.scan.cache import ScanIndex
    from matrix.scan.fetch import Fetcher
    from matrix.settings import scan_cache_dir

    _, t = readers.pair_target()
    cache = cache or scan_cache_dir()
    index = ScanIndex(IndexClient(), cache=cache, offline=offline)
    listed = readers.listed(index, t.referred)
    current = [r.version for r in listed if not r.release.yanked and r.release.pick() is not None]
    newest = max(current, key=Version) if current else None
    chosen = readers.window(listed, spec.format(newest=newest or "0"), everything=True)
    got = readers.read_all([(z, readers.want(t.referred, t.definitions, readers.reader_key(t))) for z in chosen],
                           Fetcher(cache, index.client.http), workers, log)
    return [{"version": z.version, "table": g.get("analysis"), "error": g.get("error")}
            for z, g in zip(chosen, got, strict=True)], newest


def judge_tree(sources: dict[str, str], metadata: str | None, zoo: list[dict[str, Any]],
               label: str = "candidate") -> dict[str, Any]:
    """The candidate's references judged against ``zoo`` rows: ``{floor, plain, pairs, bad, line}``; ``bad`` the
    incompatible pairs a plain install can pick (admitted, at or above the floor)."""
    _, t = readers.pair_target()
    meta = metadata_caps.unsloth_side(metadata)
    row = {"version": label, "refs": t.references(sources), "plain": meta["plain"], "error": None}
    pairs = grid.judge_all(t, [row], zoo)["pairs"]
    floor = meta["floor"]
    admitted = [p for p in pairs if p["admitted"] and (floor is None or _ge(p["zoo"], floor))]
    return {"floor": floor, "plain": meta["plain"], "known": meta["known"], "pairs": pairs, "admitted": admitted,
            "bad": [p for p in admitted if p["verdict"] == "incompatible"], "line": grid.release_line(label, pairs)}


def structural_tree_gate(path: Path, log: Callable[[str], Any] = print, upto: str = "",
                         package: str = "unsloth", **kw: Any) -> bool:
    """True when the candidate at ``path`` (a tree or a wheel) is ``incompatible`` with a zoo release a plain
    install can pick (the gate then fails). ``upto`` caps the zoo releases read (a test's budget)."""
    check_id, _ = readers.pair_target()
    sources, metadata = read_candidate(path, package)
    if not sources:
        log(f"gate: structural ({check_id}): n/a: no {package} package in {path}")
        return False
    floor = metadata_caps.unsloth_side(metadata)["floor"]
    spec = (f">={floor}" if floor else "=={newest}") + (f",<={upto}" if upto else "")
    if not floor:
        log(f"gate: structural ({check_id}): the candidate declares no zoo floor that can be read "
            f"({'no metadata' if metadata is None else 'none in its metadata'}): judged against the newest zoo only")
    zoo, newest = zoo_rows(spec, log=lambda _m: None, **kw)
    label = version_of(metadata)
    got = judge_tree(sources, metadata, zoo, label)
    log(f"gate: structural ({check_id}): candidate {label} ({path.name}), zoo floor {floor or 'none'}, newest zoo "
        f"{newest}; {len(got['admitted'])} admitted zoo release(s), {len(got['bad'])} incompatible")
    for p in got["bad"][:10]:
        breaking = [m for m in p.get("missing", []) if m["breaks"] == "import"]
        names = ", ".join(f"{m['name']} ({m['where'][0]['file']}:{m['where'][0]['line']})" for m in breaking[:5])
        more = f" and {len(breaking) - 5} more" if len(breaking) > 5 else ""
        log(f"gate: structural: zoo {p['zoo']}: incompatible, missing {names}{more}")
    log(f"gate: structural: {got['line']}")
    return bool(got["bad"])


def candidate_path(candidate: dict[str, str], workdir: Path, log: Callable[[str], Any] = print,
                   package: str = "unsloth") -> Path | None:
    """The tree or wheel to read for a gate candidate that is not a PyPI release: a path candidate's copy
    under ``workdir``, or a git candidate's checkout (fetched into ``workdir/structural``); None when the
    checkout fails (the cell's own build then says why)."""
    if candidate["source"] == "path":
        return workdir / candidate["path"]
    from matrix.errors import BuildError
    from matrix.sources import GitSource

    src = GitSource(package=package, base_dir=Path.cwd(), url=candidate["url"], ref=candidate["ref"])
    shutil.rmtree(workdir / "structural", ignore_errors=True)
    try:
        made = src.materialize_tree(workdir / "structural")
    except BuildError as exc:
        log(f"gate: structural: n/a: cannot check out {candidate['url']}@{candidate['ref']}: {exc}")
        return None
    return made.tree
