"""The backport builder: a base wheel plus our edits, repacked as a new wheel.

A backport lives in ``matrix/backports/<name>/`` with a ``backport.toml``::

    package = "unsloth"                 # distribution being patched
    summary = "one line"
    [[add]]                             # copy a file into the unpacked wheel
    src = "files/guard.py"              # relative to the backport dir
    dest = "unsloth/guard.py"           # relative to the wheel root
    [[insert]]                          # anchored insertion
    file = "unsloth/__init__.py"        # relative to the wheel root
    anchor = '^regex$'                  # must match exactly one line
    where = "after"                     # or "before"
    text = "lines to insert\\n"         # or text_file = "files/snippet.py"
    [[patch]]                           # a unified diff, applied -p1 at the wheel root
    file = "patches/fix.diff"

The rebuilt wheel keeps the base file name and version (that is the point:
only content tells it apart), gets a fresh RECORD, and carries a
``SKEWMATRIX_BACKPORT.json`` in its dist-info naming the backport and the
base digest. Repacking is deterministic (sorted entries, fixed timestamps),
so the same base and edits give the same digest. Every path is confined to
its base directory: ``..``, absolute paths and symlinks out are refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.envs.tools import run_tool
from matrix.errors import BackportError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST = "backport.toml"
EDIT_KEYS = {
    "add": {"src", "dest"},
    "insert": {"file", "anchor", "where", "text", "text_file"},
    "patch": {"file"},
}
TOP_KEYS = {"package", "summary", *EDIT_KEYS}
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def confined(base: Path, rel: str, what: str, label: str) -> Path:
    """``base / rel`` if it stays inside ``base`` (symlinks resolved), else a BackportError."""
    if not rel or Path(rel).is_absolute():
        raise BackportError(f"{label}: {what} {rel!r} must be a relative path inside {base}")
    target = (base / rel).resolve()
    root = base.resolve()
    if target != root and root not in target.parents:
        raise BackportError(f"{label}: {what} {rel!r} escapes {base} (resolves to {target})")
    return target


@dataclass(frozen=True)
class Manifest:
    name: str
    directory: Path
    package: str
    summary: str
    data: dict[str, Any]


def load_manifest(directory: Path) -> Manifest:
    label = f"backport {directory.name}"
    path = directory / MANIFEST
    if not path.is_file():
        raise BackportError(f"{label}: no {MANIFEST} in {directory}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BackportError(f"{path}: invalid TOML: {exc}") from exc
    problems = [f"unknown key {k!r} (valid: {', '.join(sorted(TOP_KEYS))})" for k in data if k not in TOP_KEYS]
    if not isinstance(data.get("package"), str):
        problems.append("'package' (the distribution being patched) is required")
    for kind, keys in EDIT_KEYS.items():
        entries = data.get(kind, [])
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            problems.append(f"[[{kind}]] must be an array of tables")
            continue
        for i, e in enumerate(entries, 1):
            problems += [f"[[{kind}]] #{i}: unknown key {k!r} (valid: {', '.join(sorted(keys))})"
                         for k in e if k not in keys]
            problems += [f"[[{kind}]] #{i}: {k!r} must be a string" for k, v in e.items() if not isinstance(v, str)]
    if problems:
        raise BackportError(f"{path}:\n" + "\n".join(f"  - {p}" for p in problems))
    return Manifest(directory.name, directory, data["package"], data.get("summary", ""), data)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def unpack(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            target = confined(dest, info.filename, "wheel member", f"wheel {wheel.name}")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))


def pack(root: Path, wheel: Path) -> None:
    """Zip ``root`` into ``wheel`` with a regenerated RECORD, deterministically."""
    dist_infos = [p for p in root.iterdir() if p.is_dir() and p.name.endswith(".dist-info")]
    if len(dist_infos) != 1:
        raise BackportError(f"{wheel.name}: expected one .dist-info directory, found {len(dist_infos)}")
    record_rel = f"{dist_infos[0].name}/RECORD"
    files = sorted(p for p in root.rglob("*") if p.is_file())
    rows = []
    wheel.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in files:
            rel = p.relative_to(root).as_posix()
            if rel == record_rel:
                continue
            data = p.read_bytes()
            rows.append(f"{rel},{_record_hash(data)},{len(data)}")
            info = zipfile.ZipInfo(rel, ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
        rows.append(f"{record_rel},,")
        info = zipfile.ZipInfo(record_rel, ZIP_DATE)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, "\n".join(rows) + "\n")


def apply_insert(root: Path, manifest: Manifest, entry: dict[str, str], label: str) -> None:
    target = confined(root, entry["file"], "file", label)
    if not target.is_file():
        raise BackportError(f"{label}: file {entry['file']!r} is not in the base wheel")
    where = entry.get("where", "after")
    if where not in ("after", "before"):
        raise BackportError(f"{label}: where = {where!r}; valid: 'after', 'before'")
    if "text" in entry:
        text = entry["text"]
    elif "text_file" in entry:
        text = confined(manifest.directory, entry["text_file"], "text_file", label).read_text(encoding="utf-8")
    else:
        raise BackportError(f"{label}: give 'text' or 'text_file'")
    if not text.endswith("\n"):
        text += "\n"
    lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
    at = anchor_line(lines, entry, label) + (1 if where == "after" else 0)
    lines[at:at] = [text]
    target.write_text("".join(lines), encoding="utf-8")


def anchor_line(lines: list[str], entry: dict[str, str], label: str) -> int:
    """Index of the one line ``entry``'s anchor matches; ``BackportError`` when it matches none or several."""
    try:
        pattern = re.compile(entry.get("anchor", ""))
    except re.error as exc:
        raise BackportError(f"{label}: anchor {entry.get('anchor')!r} is not a valid regex: {exc}") from exc
    hits = [i for i, line in enumerate(lines) if pattern.search(line.rstrip("\r\n"))]
    if len(hits) != 1:
        where_hits = ", ".join(str(i + 1) for i in hits[:10])
        what = "matches no line" if not hits else f"matches {len(hits)} lines ({where_hits})"
        raise BackportError(
            f"{label}: anchor {pattern.pattern!r} {what} in {entry['file']}; an anchor must match exactly one line"
        )
    return hits[0]


def anchor_problems(manifest: Manifest, base_wheel: Path, build_name: str) -> list[str]:
    """Every ``[[insert]]`` of ``manifest`` whose file or anchor does not fit ``base_wheel``, read in place.

    The spec loader calls this when the base wheel is already cached, so a stale anchor is reported when
    the matrix is validated rather than when the cell is built (which still checks, as ``apply_insert``).
    """
    label = f"backport {manifest.name} (build {build_name})"
    problems = []
    try:
        with zipfile.ZipFile(base_wheel) as zf:
            names = set(zf.namelist())
            for i, entry in enumerate(manifest.data.get("insert", []), 1):
                where = f"{label} [[insert]] #{i}"
                if entry.get("file") not in names:
                    problems.append(f"{where}: file {entry.get('file')!r} is not in the base wheel {base_wheel.name}")
                    continue
                lines = zf.read(entry["file"]).decode("utf-8", errors="replace").splitlines(keepends=True)
                try:
                    anchor_line(lines, entry, where)
                except BackportError as exc:
                    problems.append(f"{exc} (base wheel {base_wheel.name})")
    except (OSError, zipfile.BadZipFile):
        return []  # an unreadable cache entry: the build downloads and checks it again
    return problems


def apply_patch(root: Path, manifest: Manifest, entry: dict[str, str], label: str) -> None:
    diff = confined(manifest.directory, entry["file"], "patch file", label)
    if not diff.is_file():
        raise BackportError(f"{label}: patch file {entry['file']!r} not found in {manifest.directory}")
    # git apply works outside a repository and refuses paths that leave the tree. Inside one (the default
    # output directory is in our checkout) it reads a git-style diff's paths from the repository's top and
    # skips, with exit 0, those outside the current directory: all of them. Keep it from finding one.
    res = run_tool(["git", "apply", "-p1", "--whitespace=nowarn", str(diff)], cwd=root,
                   env={"GIT_CEILING_DIRECTORIES": str(root.resolve().parent)})
    if not res.ok:
        raise BackportError(f"{label}: patch {entry['file']} does not apply:\n{res.tail()}")


def apply_edits(root: Path, manifest: Manifest, label: str) -> None:
    """The backport's ``[[add]]``, ``[[insert]]`` and ``[[patch]]`` edits, in that order, on the tree at ``root``
    (an unpacked wheel, or a source tree for a subject that is one)."""
    for i, entry in enumerate(manifest.data.get("add", []), 1):
        src = confined(manifest.directory, entry.get("src", ""), "src", f"{label} [[add]] #{i}")
        if not src.is_file():
            raise BackportError(f"{label} [[add]] #{i}: src {entry.get('src')!r} not found in {manifest.directory}")
        dest = confined(root, entry.get("dest", ""), "dest", f"{label} [[add]] #{i}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src.read_bytes())
    for i, entry in enumerate(manifest.data.get("insert", []), 1):
        apply_insert(root, manifest, entry, f"{label} [[insert]] #{i}")
    for i, entry in enumerate(manifest.data.get("patch", []), 1):
        apply_patch(root, manifest, entry, f"{label} [[patch]] #{i}")


def build_backport(manifest: Manifest, base_wheel: Path, base_digest: str | None, out_dir: Path,
                   build_name: str) -> Path:
    """Apply ``manifest`` to ``base_wheel``; return the new wheel under ``out_dir``."""
    label = f"backport {manifest.name} (build {build_name})"
    root = out_dir / "unpacked"
    if root.exists():
        import shutil

        shutil.rmtree(root)
    root.mkdir(parents=True)
    unpack(base_wheel, root)
    apply_edits(root, manifest, label)
    dist_info = next(p for p in root.iterdir() if p.name.endswith(".dist-info"))
    marker = {"backport": manifest.name, "summary": manifest.summary, "base_wheel": base_wheel.name,
              "base_sha256": base_digest}
    (dist_info / "SKEWMATRIX_BACKPORT.json").write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
    wheel = out_dir / "wheel" / base_wheel.name
    if wheel.exists():
        wheel.unlink()
    pack(root, wheel)
    return wheel
