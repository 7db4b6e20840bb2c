"""The zoo gate's static reading: a candidate unsloth_zoo (a wheel or a source tree, read directly) judged
against every unsloth release whose declared zoo requirement admits it, and each check's static detector run
on it, both beside the previous zoo release.

* Structural: the registry's pair reader (``readers.pair_target``) turns the candidate's source into its
  symbol table; every unsloth release of the window (the history's, or every release) whose plain-install
  requirement admits the candidate's version is judged against it and against the previous release (read
  through the history's readers and cache). A pair that worked with the previous release (``compatible`` or
  ``degraded``) and is ``incompatible`` with the candidate is a *regression*.
* Hazards: every check with a scan target (``probes.checks.with_capability("scan")``) has its static detector
  run on the candidate's files (the members the scan would read of a release), against the previous
  release's verdict from the scan. A fix the candidate reverts (``fixed`` -> ``vulnerable``) is a finding.

The command around it (arguments, cells, output, exit code) is ``matrix.cli.zoo_gate``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from matrix.scan.history import metadata_caps, readers
from matrix.scan.history.candidate_tree import read_candidate, version_of
from probes import checks

WORKED = ("compatible", "degraded")


def valid(version: str | None) -> bool:
    try:
        Version(version or "")
    except InvalidVersion:
        return False
    return True


def candidate_version(sources: dict[str, str], metadata: str | None, package: str) -> str | None:
    """The candidate's version: its core metadata's, else ``__version__`` in its package's ``__init__.py``
    (a checkout whose ``pyproject.toml`` declares the version dynamic); None when neither is a version."""
    found = version_of(metadata)
    if valid(found):
        return found
    try:
        tree = ast.parse(sources.get(f"{package}/__init__.py", ""))
    except SyntaxError:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__"
                                                  for t in node.targets)
                and isinstance(node.value, ast.Constant) and valid(str(node.value.value))):
            return str(node.value.value)
    return None


def read_zoo_candidate(path: Path) -> tuple[dict[str, str], str | None, str | None]:
    """``(sources, metadata, version)`` of a candidate zoo at ``path`` (a wheel file or a directory)."""
    _, t = readers.pair_target()
    sources, metadata = read_candidate(path, t.referred)
    return sources, metadata, candidate_version(sources, metadata, t.referred)


def previous_release(versions: list[str], candidate: str | None, same_is_previous: bool) -> str | None:
    """The release the candidate is compared with: the published release of the candidate's own version when
    the candidate is another build of it (``same_is_previous``: a wheel, a tree, a backport), else the newest
    release below the candidate's version (``versions``: the non-yanked releases)."""
    if not valid(candidate):
        return max(versions, key=Version) if versions else None
    assert candidate is not None
    if same_is_previous and candidate in versions:
        return candidate
    lower = [v for v in versions if Version(v) < Version(candidate)]
    return max(lower, key=Version) if lower else None


def index_for(offline: bool, cache: Path | None) -> tuple[Any, Path]:
    from matrix.index import IndexClient
    from matrix.scan.cache import ScanIndex
    from matrix.settings import scan_cache_dir

    cache = cache or scan_cache_dir()
    return ScanIndex(IndexClient(), cache=cache, offline=offline), cache


def zoo_versions(offline: bool = False, cache: Path | None = None) -> list[str]:
    """Every non-yanked zoo release on the index, ascending."""
    index, _ = index_for(offline, cache)
    _, t = readers.pair_target()
    listed = readers.listed(index, t.referred)
    return [r.version for r in listed if not r.release.yanked and r.release.pick() is not None]


def unsloth_rows(spec: str, everything: bool, log: Callable[[str], Any], workers: int = 6, offline: bool = False,
                 cache: Path | None = None) -> list[dict[str, Any]]:
    """``[{version, refs, error, plain, floor}]`` for the unsloth releases of the window (``spec`` selects them
    instead; ``everything``: every release), each read once through the history's readers."""
    from matrix.scan.fetch import Fetcher

    index, cache = index_for(offline, cache)
    _, t = readers.pair_target()
    chosen = readers.window(readers.listed(index, t.referrer), spec, everything)
    w = readers.want(t.referrer, t.references, readers.reader_key(t))
    got = readers.read_all([(u, w) for u in chosen], Fetcher(cache, index.client.http), workers, log)
    rows = []
    for u, g in zip(chosen, got, strict=True):
        side = metadata_caps.unsloth_side(g.get("metadata")) if "error" not in g else {"plain": None, "floor": None}
        rows.append({"version": u.version, "refs": g.get("analysis"), "error": g.get("error"),
                     "plain": side["plain"], "floor": side["floor"]})
    return rows


def breaking(pair: dict[str, Any]) -> list[dict[str, Any]]:
    """The missing names that make a pair fail (``import unsloth`` or the model-load route), read with
    ``.get`` so that results of an older reader still render."""
    return [m for m in pair.get("missing", []) if m.get("breaks") in ("import", "model-load")]


def judge_structural(rows: list[dict[str, Any]], table: dict[str, Any], version: str | None,
                     previous: dict[str, Any] | None) -> dict[str, Any]:
    """The candidate's symbol ``table`` (version ``version``) and the ``previous`` zoo row (``{version, table,
    error}``) against the unsloth ``rows`` whose plain requirement admits ``version`` (every row when the
    version is unknown). One entry per admitted release: ``{unsloth, candidate, previous, breaks, lost,
    regression, unresolved}``; each pair is judged whole (every missing name kept, not the history's cut)."""
    _, t = readers.pair_target()
    admitted = [u for u in rows if not valid(version) or metadata_caps.admits(u["plain"], version or "")]
    cand = t.prepare(table)
    prev = t.prepare(previous["table"]) if previous and previous.get("table") is not None else None
    out = []
    for u in admitted:
        if u.get("refs") is None:
            c: dict[str, Any] = {"verdict": "unknown", "reason": u.get("error") or "not read", "missing": []}
        else:
            c = t.judge(u["refs"], cand)
        before = None if previous is None else "unknown" if prev is None or u.get("refs") is None else \
            t.judge(u["refs"], prev)["verdict"]
        regression = c["verdict"] == "incompatible" and (before in WORKED or before is None)
        # no verdict: the release could not be read, or the candidate cannot be judged where the previous zoo
        # could, or it breaks a pair whose previous verdict is unknown
        unresolved = u.get("refs") is None or (c["verdict"] == "unknown" and before != "unknown") or (
            c["verdict"] == "incompatible" and before == "unknown")
        out.append({"unsloth": u["version"], "floor": u["floor"], "candidate": c["verdict"], "previous": before,
                    "breaks": [{k: m.get(k) for k in ("name", "breaks", "detail", "key", "signature")} | {
                        "where": (m.get("where") or [{}])[0]} for m in breaking(c)],
                    "lost": [m.get("name") for m in c.get("missing", []) if m not in breaking(c)][:8],
                    "reason": c.get("reason") or "", "regression": regression, "unresolved": unresolved})
    return {"judged": len(rows), "admitted": out}


def candidate_members(sources: dict[str, str], s: Any) -> dict[str, str]:
    """The members of the candidate the scan would read for scanned check ``s`` (``matrix.scan.zoo_want``)."""
    from matrix.scan import zoo

    w = zoo.zoo_want(s)
    names = sorted(n for n in sources if w.name(n))
    if w.closure is not None:
        return w.closure(names, sources.__getitem__)
    return {n: sources[n] for n in names if w.keep(n, sources[n])}


def hazards(sources: dict[str, str], previous: str | None, offline: bool = False,
            cache: Path | None = None) -> list[dict[str, Any]]:
    """Per registered check of the zoo's subject: ``{check, candidate, previous, reason, reverted,
    unresolved}``, or ``{check, na}`` for a check without a scan target."""
    from matrix import scan
    from matrix.scan.terms import Extract

    pair_check, t = readers.pair_target()
    out: list[dict[str, Any]] = []
    names = checks.with_capability("scan")
    for name in checks.REGISTRY:
        cid = checks.info(name).id
        if t.referred not in checks.subject(name).axes or cid == pair_check:
            continue  # another subject's check (a source tree), or the pair check (the structural part)
        if name not in names:
            out.append({"check": cid, "na": checks.lacks(name, "scan")})
            continue
        s = scan.Scanned(name, cid, checks.capability(name, "scan"))
        got = scan.classify_zoo(Extract("candidate", None, "local", candidate_members(sources, s)), s)
        before = None
        if previous:
            doc = scan.run(scan.ScanOptions(zoo=f"=={previous}", skip_unsloth=True, offline=offline, check=cid),
                           cache=cache, log=lambda _m: None)
            before = next((z["verdict"] for z in doc["zoo"] if z["version"] == previous), None)
        out.append({"check": cid, "candidate": got["verdict"], "previous": before, "reason": got["reason"],
                    "line": got.get("evidence_line"),
                    "reverted": before == "fixed" and got["verdict"] == "vulnerable",
                    "unresolved": before == "fixed" and got["verdict"] == "unknown"})
    return out
