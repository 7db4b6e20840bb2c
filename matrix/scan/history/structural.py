"""The structural verdict for the gate and for pinned: one unsloth release against the zoo releases a user
can get, or the pair installed in an env, judged from source by the registry's pair reader."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from matrix.scan.history import readers
from matrix.scan.history.history_run import HistoryOptions, run


def structural_gate(version: str, log: Callable[[str], Any] = print, upto: str = "", **kw: Any) -> bool:
    """Judge unsloth ``version`` against every zoo release at or above its floor and the newest one; True when
    a zoo release a plain install can pick makes the pair ``incompatible`` (the gate then fails). ``upto``
    caps the zoo releases read (a test's budget; the gate reads them all)."""
    quiet = {**kw, "log": lambda _m: None}
    # the candidate's floor first (its metadata, read with the newest zoo), then every zoo at or above it
    bare = {"scan": False, "resolve": False, "plain_pairs": False}  # the gate reads the floor, no plain install
    probe = run(HistoryOptions(unsloth=f"=={version}", zoo="===none", **bare), **quiet)  # no zoo to read
    rows = probe["unsloth"]
    if not rows:
        log(f"gate: structural: no unsloth release {version} on the index")
        return False
    floor, pick = rows[0].get("floor"), rows[0].get("plain_pick")
    zoo = (f">={floor}" if floor else f"=={probe['newest_zoo']}") + (f",<={upto}" if upto else "")
    first = run(HistoryOptions(unsloth=f"=={version}", zoo=zoo, everything=True, **bare), **quiet)
    admitted = [p for p in first["pairs"] if p["admitted"] and (floor is None or _ge(p["zoo"], floor))]
    bad = [p for p in admitted if p["verdict"] == "incompatible"]
    log(f"gate: structural ({first['check']}): unsloth {version}, zoo floor {floor or 'none'}, the newest zoo "
        f"it admits {pick}; {len(admitted)} admitted zoo release(s), {len(bad)} incompatible")
    for p in bad[:10]:
        names = ", ".join(f"{m['name']} ({m['where'][0]['file']}:{m['where'][0]['line']})"
                          for m in p.get("missing", [])[:3] if m["breaks"] == "import")
        log(f"gate: structural: zoo {p['zoo']}: incompatible, missing {names}")
    log(f"gate: structural: {first['lines'][0] if first['lines'] else '-'}")
    return bool(bad)


def _ge(a: str, b: str) -> bool:
    from packaging.version import Version

    return Version(a) >= Version(b)


def _site_package(env_dir: Path, package: str) -> Path | None:
    found = sorted(env_dir.glob(f"lib/python*/site-packages/{package}/__init__.py"))
    return found[0].parent if found else None


def structural_line(env_dir: Path) -> str:
    """``structural: VERDICT (...)`` for the unsloth and zoo installed in ``env_dir``, read without importing."""
    check_id, t = readers.pair_target()
    roots = {p: _site_package(env_dir, p) for p in (t.referrer, t.referred)}
    if None in roots.values():
        missing = [p for p, r in roots.items() if r is None]
        return f"structural ({check_id}): n/a: {', '.join(missing)} not installed in {env_dir}"

    def members(package: str) -> dict[str, str]:
        root = roots[package]
        assert root is not None
        return {f"{package}/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8", errors="replace")
                for p in root.rglob("*.py") if "__pycache__" not in p.parts}

    result = t.judge(t.references(members(t.referrer)), t.prepare(t.definitions(members(t.referred))))
    return f"structural ({check_id}): {t.summary(result)}"
