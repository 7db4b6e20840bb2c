"""Build sources: one module per kind behind ``matrix.sources.interface.BuildSource``.

A source turns a matrix entry into something uv can install (a requirement
string or a local wheel) plus a content digest, because a build's identity is
its content, never only its version. ``SOURCE_KINDS`` maps each ``source =``
value of a matrix file to its class; a new kind is a new module here.
"""

from __future__ import annotations

from matrix.sources.backport import BackportSource
from matrix.sources.git import GitSource
from matrix.sources.interface import BuildSource, Materialized
from matrix.sources.path import PathSource
from matrix.sources.pypi import PypiSource

SOURCE_KINDS: dict[str, type[BuildSource]] = {
    "pypi": PypiSource,
    "path": PathSource,
    "git": GitSource,
    "backport": BackportSource,
}

__all__ = ["SOURCE_KINDS", "BackportSource", "BuildSource", "GitSource", "Materialized", "PathSource",
           "PypiSource"]
