"""``report.json``: the report itself, schema ``reports/report.schema.json``."""

from __future__ import annotations

import json as _json
from typing import Any, ClassVar

from reports.render.base import Renderer


class JsonRenderer(Renderer):
    filename: ClassVar[str | None] = "report.json"

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        return _json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"
