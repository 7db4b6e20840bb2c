"""Shared fixtures. Unit tests are protected from accidental env builds and network.

Every test not marked ``integration`` runs with ``matrix.tools.uv_bin``,
``urllib.request.urlopen`` and ``httpx.HTTPTransport.handle_request`` replaced
by functions that fail the test, the way cibuildwheel's ``mock_protection``
keeps unit tests from starting builds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _protect(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("integration"):
        return

    def no_uv() -> str:
        raise AssertionError("a unit test tried to run uv; mark it integration")

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test tried to reach the network; mark it integration")

    import urllib.request

    from matrix import tools

    tools.uv_bin.cache_clear()
    monkeypatch.setattr(tools, "uv_bin", no_uv)
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    # The index client speaks httpx: its real transport is off too (httpx.MockTransport stays usable).
    import httpx

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", no_network)


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
