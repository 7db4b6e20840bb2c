"""What got installed into a cell env: every distribution, version and digest.

Read straight from the env's ``*.dist-info`` folders (no import, no pip):
name, version, the installer's ``direct_url.json`` (local wheels and
backports), the wheel tags, and ``tree_sha256`` -- a digest of the
distribution's RECORD rows (each the sha256 of one installed file), so a
digest of the installed tree that does not depend on where the env lives
(see ``tree_digest``). For the packages under test
and torch installed from the index, ``wheel_sha256`` is the index's sha256
of the exact wheel file (matched by the WHEEL tags).
"""

from __future__ import annotations

import hashlib
import json
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.tags import parse_tag
from packaging.utils import canonicalize_name, parse_wheel_filename

from matrix.errors import IndexLookupError
from matrix.index import IndexClient

LOOKUP_WHEELS = {"unsloth", "unsloth-zoo", "torch"}


def site_packages(env_dir: Path) -> Path:
    found = sorted(env_dir.glob("lib/python3*/site-packages"))
    if not found:
        found = sorted(env_dir.glob("Lib/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {env_dir}")
    return found[0]


def tree_digest(record: Path) -> str:
    """sha256 over the RECORD rows of files inside site-packages.

    Rows for files outside it (``../../../bin/...``: console scripts whose
    shebang names the env) are left out, so the same distribution installed
    in two envs has the same digest; so are the rows of RECORD itself and of
    the installer's own files, which name no content.
    """
    rows = []
    for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
        path = line.split(",", 1)[0]
        if not path or path.startswith("../") or path.endswith(("/RECORD", "/INSTALLER", "/REQUESTED",
                                                                  "/direct_url.json", "/uv_cache.json")):
            continue
        if path.endswith(".pyc"):
            continue
        rows.append(line)
    return hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()


def read_dist(dist_info: Path) -> dict[str, Any]:
    meta = Parser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8", errors="replace"),
                             headersonly=True)
    entry: dict[str, Any] = {"name": meta["Name"], "version": meta["Version"]}
    record = dist_info / "RECORD"
    entry["tree_sha256"] = tree_digest(record) if record.is_file() else None
    wheel = dist_info / "WHEEL"
    if wheel.is_file():
        tags = set()
        for line in wheel.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Tag:"):
                tags.update(str(t) for t in parse_tag(line.split(":", 1)[1].strip()))
        entry["tags"] = sorted(tags)
    direct = dist_info / "direct_url.json"
    if direct.is_file():
        try:
            entry["direct_url"] = json.loads(direct.read_text(encoding="utf-8")).get("url")
        except ValueError:
            entry["direct_url"] = "unreadable"
    marker = dist_info / "SKEWMATRIX_BACKPORT.json"
    if marker.is_file():
        entry["backport"] = json.loads(marker.read_text(encoding="utf-8"))
    return entry


def installed(env_dir: Path, index: IndexClient | None = None) -> list[dict[str, Any]]:
    sp = site_packages(env_dir)
    dists = [read_dist(d) for d in sorted(sp.glob("*.dist-info")) if (d / "METADATA").is_file()]
    index = index or IndexClient()
    for d in dists:
        if canonicalize_name(d["name"]) in LOOKUP_WHEELS and "direct_url" not in d:
            d["wheel_sha256"], d["wheel_file"] = _index_sha(index, d)
    return sorted(dists, key=lambda d: canonicalize_name(d["name"]))


def _index_sha(index: IndexClient, dist: dict[str, Any]) -> tuple[str | None, str | None]:
    try:
        files = index.files(dist["name"])
    except IndexLookupError:
        return None, None
    want = set(dist.get("tags", []))
    for f in files:
        if not f.filename.endswith(".whl"):
            continue
        _, ver, _, tags = parse_wheel_filename(f.filename)
        if str(ver) == dist["version"] and {str(t) for t in tags} == want:
            return f.sha256, f.filename
    return None, None


def torch_build(dists: list[dict[str, Any]]) -> dict[str, Any] | None:
    for d in dists:
        if canonicalize_name(d["name"]) == "torch":
            local = d["version"].split("+", 1)[1] if "+" in d["version"] else None
            cuda = next((canonicalize_name(x["name"]) for x in dists
                         if canonicalize_name(x["name"]).startswith("nvidia-cuda-runtime")), None)
            return {"version": d["version"], "local": local, "cuda_runtime": cuda}
    return None


# --- The pair under test stays put (issue #30): what a probe process must leave as it found it. ---

def _inside(path: str) -> bool:
    return bool(path) and not path.startswith("../") and not path.endswith(".pyc") and "__pycache__" not in path


def snapshot(env_dir: Path, deep: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The env's installed set as the probes must leave it: per distribution (by canonical name) its name,
    version and ``tree_sha256`` (its RECORD rows); for the distributions named in ``deep`` (the packages under
    test: small) the sha256 of every installed file's content as it is on disk now, so an edit in place shows;
    and ``loose``, the top-level entries of site-packages that no distribution's RECORD owns (a module written
    there). Reads files only, no index. An env without site-packages has nothing to keep: an empty snapshot."""
    try:
        sp = site_packages(env_dir)
    except FileNotFoundError:
        return {"dists": {}, "loose": []}
    dists: dict[str, dict[str, Any]] = {}
    owned: set[str] = set()
    for d in sorted(sp.glob("*.dist-info")):
        if not (d / "METADATA").is_file():
            continue
        meta = Parser().parsestr((d / "METADATA").read_text(encoding="utf-8", errors="replace"), headersonly=True)
        key = canonicalize_name(meta["Name"])
        record = d / "RECORD"
        rows = [line.split(",", 1)[0] for line in record.read_text(encoding="utf-8", errors="replace").splitlines()
                ] if record.is_file() else []
        owned.update(r.split("/", 1)[0] for r in rows if _inside(r))
        owned.add(d.name)
        entry: dict[str, Any] = {"name": meta["Name"], "version": meta["Version"],
                                 "tree_sha256": tree_digest(record) if record.is_file() else None}
        if key in deep:
            entry["files"] = {r: _file_sha(sp / r) for r in rows if _inside(r) and ".dist-info/" not in r}
        dists[key] = entry
    loose = sorted(p.name for p in sp.iterdir() if p.name not in owned and p.name != "__pycache__")
    return {"dists": dists, "loose": loose}


def _file_sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two :func:`snapshot` results, one line each, naming the distribution and the
    versions (``unsloth_zoo 2024.12.1 -> 2025.3.17``); empty when the env stayed put."""
    out = []
    old, new = before["dists"], after["dists"]
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a is None:
            out.append(f"{b['name']} {b['version']} installed (absent before)")
        elif b is None:
            out.append(f"{a['name']} {a['version']} removed")
        elif a["version"] != b["version"]:
            out.append(f"{a['name']} {a['version']} -> {b['version']}")
        elif a["tree_sha256"] != b["tree_sha256"]:
            out.append(f"{a['name']} {a['version']} reinstalled with other files (RECORD digest "
                       f"{str(a['tree_sha256'])[:12]} -> {str(b['tree_sha256'])[:12]})")
        elif "files" in a and "files" in b and a["files"] != b["files"]:
            edited = sorted(p for p in a["files"] if a["files"][p] != b["files"].get(p))
            out.append(f"{a['name']} {a['version']}: installed files changed on disk ({', '.join(edited[:5])}"
                       f"{', ...' if len(edited) > 5 else ''})")
    appeared = sorted(set(after["loose"]) - set(before["loose"]))
    gone = sorted(set(before["loose"]) - set(after["loose"]))
    out += [f"site-packages/{name} appeared" for name in appeared]
    out += [f"site-packages/{name} disappeared" for name in gone]
    return out
