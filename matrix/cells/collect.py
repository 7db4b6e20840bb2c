"""Reading cell results back: ``<out>/cells/*/cell.json`` files, refused by name when untrustworthy.

A result is never silently dropped: a truncated, corrupt, foreign-schema or
unclassifiable file raises :class:`ResultFileError` naming it, with the remedy
(rerun that cell).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matrix.errors import SkewmatrixError
from matrix.spec import axes
from reports.model import CELL_SCHEMA, verdicts

REQUIRED = {"cell_id": str, "builds": dict, "steps": list}


class ResultFileError(SkewmatrixError):
    """A cell result file cannot be trusted."""


def load_cell(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResultFileError(f"{path}: unreadable cell result ({exc}); rerun that cell") from exc
    if not isinstance(data, dict) or data.get("schema") != CELL_SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultFileError(f"{path}: schema {got!r} is not {CELL_SCHEMA!r}; rerun that cell "
                              "(docs/commands.md#output-and-schemas)")
    for key, kind in REQUIRED.items():
        if not isinstance(data.get(key), kind):
            raise ResultFileError(f"{path}: cell result lacks {key!r} (a {kind.__name__}); rerun that cell")
    roles = list(data["builds"])
    if axes.subject_of(roles) is None:  # one build per axis of a registered check's subject
        raise ResultFileError(f"{path}: builds {roles} are not the packages of any check ({axes.subjects_text()}); "
                              "rerun that cell")
    for role, build in data["builds"].items():
        if not isinstance(build, dict) or not isinstance(build.get("name"), str):
            raise ResultFileError(f"{path}: builds.{role}.name missing; rerun that cell")
    if not isinstance(data.get("checks") or {}, dict):
        raise ResultFileError(f"{path}: 'checks' is not an object; rerun that cell")
    try:
        verdicts(data)  # every check must be able to classify what it finds
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise ResultFileError(f"{path}: malformed cell result ({type(exc).__name__}: {exc}); rerun that cell") from exc
    return data


def load_cells(out_dir: Path, only: list[str] | None = None) -> list[dict[str, Any]]:
    cells = []
    for path in sorted((out_dir / "cells").glob("*/cell.json")):
        if only is not None and path.parent.name not in only:
            continue
        cells.append(load_cell(path))
    return cells


def fixed_since_zoo(out_dir: Path) -> tuple[str | None, str | None, str | None]:
    """``(fixed_since, confirmed_by, check id)`` of a scan in ``out_dir`` (``scan.json``): the first fixed zoo
    release after the last vulnerable one, whether the runtime detector confirmed it, and the check it is
    about; ``(None, None, None)`` when there is no readable scan."""
    path = out_dir / "scan.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None, None
    timeline = data.get("timeline") if isinstance(data, dict) else None
    value = timeline.get("fixed_since") if isinstance(timeline, dict) else None
    if not isinstance(value, str):
        return None, None, None
    how = timeline.get("fixed_since_confirmed_by")
    check = data.get("check")
    return value, how if isinstance(how, str) else "static-only", check if isinstance(check, str) else None

