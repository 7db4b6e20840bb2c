"""Matrix values that leave the harness: checked before they reach a requirements file or a build.

A ``torch`` value (or any version value) is written into the requirements and
overrides files uv reads, so it must be one PEP 440 version or PEP 508
specifier set and nothing else (uv would honour an injected option line). A
backport's anchors are checked against its base wheel when that wheel is
already cached, so a stale anchor is reported at load time, not mid-build.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from matrix.errors import BackportError, IndexLookupError
from matrix.index import IndexClient, nearest_versions
from matrix.sources import BackportSource, GitSource, PathSource, PypiSource
from matrix.sources.backport import wheel_cache
from matrix.sources.backport_build import anchor_problems, load_manifest

# Anything but printable text: a newline would start a new line of the requirements or overrides file.
CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def requirement_value_problem(where: str, key: str, value: str, package: str) -> str | None:
    """Why ``value`` cannot go into a requirements or overrides line for ``package``, or None.

    The value must be a PEP 440 version (``2.12.1``, pinned with ``==``) or a PEP 508 version specifier set
    (``>=2.12,<2.13``), parsed with ``packaging``. A newline, an option (``--index-url ...``), a direct URL
    (``@ https://...``) or markers are refused: uv would honour them from the file.
    """
    shown = f"{where}: {key} = {value!r}"
    if CONTROL_RE.search(value):
        return (f"{shown} contains a newline or control character; it would start another line of the "
                f"requirements/overrides file (e.g. an injected --index-url). Give one specifier, e.g. '==2.12.1'")
    text = value.strip()
    if not text:
        return None  # no constraint: the resolver picks
    if text.startswith("-") or " -" in f" {text}":
        return f"{shown} contains a command-line option; only a version specifier is allowed, e.g. '==2.12.1'"
    if text[0].isdigit():
        try:
            Version(text)
        except InvalidVersion:
            return f"{shown} is not a valid PEP 440 version (e.g. '2.12.1')"
        return None
    try:
        spec = SpecifierSet(text)
        Requirement(f"{package}{spec}")
    except (InvalidSpecifier, InvalidRequirement) as exc:
        return (f"{shown} is not a PEP 508 version specifier set ({exc}); use e.g. '==2.12.1' or '>=2.12,<2.13' "
                "(no URL, markers or options)")
    return None



def cached_anchor_problems(src: BackportSource, name: str, where: str) -> list[str]:
    """Anchors of a backport that do not fit its PyPI base, when that base wheel is already cached (no download);
    otherwise the build reports them, as before."""
    if not isinstance(src.base_source, PypiSource):
        return []
    stem = f"{canonicalize_name(src.package).replace('-', '_')}-{src.base_source.version}-"
    cached = sorted(p for p in wheel_cache().glob(f"{stem}*.whl") if p.name.endswith("-none-any.whl"))
    if not cached:
        return []
    try:
        manifest = load_manifest(src.directory)
    except BackportError:
        return []  # reported by the source's own problems()
    return [f"{where}: {p}" for p in anchor_problems(manifest, cached[0], name)]


def index_problems(build: Any, where: str, index: IndexClient) -> list[str]:
    """Does this PyPI build's version exist on the index, and this git build's ref on its remote? (no problem
    for other sources; a remote that cannot be asked is a "cannot check" problem, which a cell only warns of)"""
    src = build.source
    base = getattr(src, "base_source", None)
    git = src if isinstance(src, GitSource) else base if isinstance(base, GitSource) else None
    if git is not None:
        return git.remote_ref_problems(where)
    if not isinstance(src, PypiSource) and isinstance(base, PypiSource):
        src = base  # a backport of a release: the base must exist
    if not isinstance(src, PypiSource):
        return []
    try:
        available = index.versions(build.package)
    except IndexLookupError as exc:
        return [f"{where}: cannot check version {src.version!r}: {exc}"]
    wanted = Version(src.version)
    if wanted in available:
        return []
    near = ", ".join(str(v) for v in nearest_versions(wanted, available))
    return [f"{where}: {build.package} {src.version} does not exist on the index; nearest releases: {near or 'none'}"]


# An unsloth build may name the guard protocol module the probes load (``guard_module``): a dotted name only.
GUARD_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def guard_module_problems(where: str, value: Any, package: Any) -> list[str]:
    if value is None or (isinstance(value, str) and GUARD_MODULE_RE.fullmatch(value) and package == "unsloth"):
        return []
    return [f"{where}: guard_module = {value!r} must be a dotted module name (e.g. 'unsloth.my_guard') "
            "on an unsloth build"]


def tree_problems(builds: dict[str, Any], first_seen: dict[str, int], subject: Any) -> list[str]:
    """A subject that is a source tree (``Subject.tree``) is built from a checkout: a git ref, a directory,
    or a backport of one; a release on the index or a wheel is not such a tree."""
    if not subject.is_tree:
        return []
    out = []
    for name, b in builds.items():
        where = f"[[build]] #{first_seen[name]} {name!r}"
        src = getattr(b.source, "base_source", None) or b.source
        if isinstance(src, PypiSource):
            out.append(f"{where}: {b.package} is built from a source tree, not a release on the index: give "
                       'source = "git" (url and ref) or source = "path" (a checkout\'s directory)')
        elif isinstance(src, PathSource) and src.resolved.is_file():
            out.append(f"{where}: path {src.path!r} is a file; {b.package} is built from a source tree: give the "
                       "checkout's directory")
    return out
