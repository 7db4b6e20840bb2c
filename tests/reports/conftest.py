"""The made-up checks of ``cells.py`` declare step renderers, as a registered check does (``render.py``).

Their step payloads copy the shapes of the registered checks' (a guard step
with ``forward.original`` and ``routes``; training steps recording
``num_items_in_batch``), so each borrows that check's renderer; the registry
itself knows neither toy id. A check without a renderer is tested with an id
mapped to nothing (``test_html.py``).
"""

from __future__ import annotations

import pytest

from probes.checks.cpu_ce_masked_nan import render as cpu_render
from probes.checks.fused_ce_masked_nan import render as fused_render
from reports.render import details
from tests.reports.cells import CPU, LOSS

TOY_RENDERERS = {LOSS["id"]: fused_render, CPU["id"]: cpu_render}


@pytest.fixture(autouse=True)
def _toy_renderers(monkeypatch: pytest.MonkeyPatch) -> None:
    real = details.renderer_of
    monkeypatch.setattr(details, "renderer_of", lambda cid: TOY_RENDERERS.get(cid) or real(cid))
