"""The renderer interface: a report dict in, one string out."""

from __future__ import annotations

from typing import Any, ClassVar


class Renderer:
    """Renders a whole report (``reports.model.build_report``) to text.

    ``filename`` is where ``write_all`` puts the output under the output
    directory; ``None`` for renderers that only print (the terminal).
    """

    filename: ClassVar[str | None] = None

    def render(self, report: dict[str, Any]) -> str:
        raise NotImplementedError


def short_digest(d: str | None) -> str:
    return d[:12] if d else "-"


def fmt_seconds(s: float | None) -> str:
    return "-" if s is None else f"{s:.1f} s"
