"""The documented JSON schemas of the cell result and the report, and their validation.

Each check folder may carry ``schema.json``: the shape of its steps' results,
by step name; ``validate_cell`` applies it to that check's section.

``validate_report`` needs the optional ``jsonschema`` package (a test
dependency); the harness itself does not validate on the hot path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CELL_SCHEMA_FILE = HERE / "cell.schema.json"
REPORT_SCHEMA_FILE = HERE / "report.schema.json"


def _validator(schema_file: Path) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    schemas = [json.loads(p.read_text(encoding="utf-8")) for p in (CELL_SCHEMA_FILE, REPORT_SCHEMA_FILE)]
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    return jsonschema.Draft202012Validator(json.loads(schema_file.read_text(encoding="utf-8")), registry=registry)


def validate_report(report: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` if ``report`` does not match report.schema.json."""
    _validator(REPORT_SCHEMA_FILE).validate(report)


def validate_cell(cell: dict[str, Any]) -> None:
    """The cell schema, then each check's step results against that check's own fragment."""
    import jsonschema

    from probes import checks

    _validator(CELL_SCHEMA_FILE).validate(cell)
    for check_id, section in (cell.get("checks") or {}).items():
        fragment_file = Path(checks.__file__).parent / str(checks.folder_of(check_id)) / "schema.json"
        fragment = json.loads(fragment_file.read_text(encoding="utf-8")) if fragment_file.is_file() else {}
        for step in section["steps"]:
            if step["status"] == "ok" and step["name"] in fragment:
                jsonschema.Draft202012Validator(fragment[step["name"]]).validate(step["result"])
