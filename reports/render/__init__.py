"""Renderers, one module per format behind ``reports.render.base.Renderer``.

``RENDERERS`` maps a format name to its renderer; ``write_all`` writes every
file format into the output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reports.render.base import Renderer
from reports.render.html import HtmlRenderer
from reports.render.json import JsonRenderer
from reports.render.junit import JunitRenderer
from reports.render.markdown import MarkdownRenderer
from reports.render.summary import SummaryRenderer
from reports.render.terminal import TerminalRenderer

RENDERERS: dict[str, Renderer] = {
    "json": JsonRenderer(),
    "html": HtmlRenderer(),
    "junit": JunitRenderer(),
    "markdown": MarkdownRenderer(),
    "summary": SummaryRenderer(),
    "terminal": TerminalRenderer(),
}


def write_all(report: dict[str, Any], out_dir: Path) -> list[Path]:
    written = []
    for r in RENDERERS.values():
        if r.filename:
            path = out_dir / r.filename
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(r.render(report), encoding="utf-8")
            tmp.replace(path)
            written.append(path)
    return written


__all__ = ["RENDERERS", "Renderer", "write_all"]
