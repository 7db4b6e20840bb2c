"""Shared fixtures. Unit tests are protected from accidental env builds and network.

Every test not marked ``integration`` runs with ``matrix.envs.tools.uv_bin``,
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


# The slow test modules, longest first (as measured; `nox -s tests` lists the slowest tests at its end). The tests
# session runs `pytest -n 2 --dist loadscope --no-loadscope-reorder`: each module runs on one xdist worker, so a
# module-scoped fixture (a whole matrix run) is built once -- plain `--dist load` deals the first quarter of the
# tests out one by one, and each of those fixtures was built on both workers -- and the longest start first, so
# the short modules fill the other worker instead of one long module ending the run alone. (`--dist loadgroup`
# would keep short modules spread, but its group suffix on node ids does nothing under pytest 9.2.)
# tests/test_layout.py checks that every module with an integration test or a module-scoped fixture is listed.
LONGEST_FIRST = (  # seconds on one worker in the last fresh-clone `.ci/run` on a 2-core host (914 tests)
    "tests/integration/test_nanochat_matrix.py",  # 1890 in CI with eight cells (six sampled now); 2 suite-only
    "tests/integration/test_differential_guards.py",  # 992 for twenty-one cells under load; seventeen in CI now
    "tests/integration/test_grpo_matrix.py",  # 797 busy with twelve cells; eleven in CI now
    "tests/integration/test_mutants.py",  # 747 + 286 (nine cells, a sample of 12); seven and 8 now
    "tests/integration/test_gate_pinned.py",  # 530
    "tests/integration/test_default_matrix.py",  # 385
    "tests/faults/test_real_faults.py",  # 210
    "tests/scan/test_confirm_integration.py",  # 130: two boundaries (fused, GRPO), four throwaway envs
    "tests/integration/test_pair_history.py",  # 145 (+ stubbed imports): eight wheels, one uv pip compile; --confirm
    "tests/integration/test_zoo_gate.py",  # 80 warm (one cell 70; two wheel-only runs 5 + 4); 286 cold at load 10+
    "tests/integration/test_exit_codes.py",  # 115
    "tests/integration/test_eval_route.py",  # 100: two cells, one zoo backport at the floor and middle stacks
    "tests/integration/test_train_real.py",  # 70
    "tests/integration/test_none_only_zoo.py",  # 70
    "tests/scan/test_scan_integration.py",  # 55
    "tests/gpu/test_dry_run.py",  # 55
    "tests/integration/test_stubbed_confirm.py",  # 54: two throwaway envs, each imported twice (real, stubbed)
    "tests/integration/test_browser.py",  # 28: five Chromium runs, one an 18-cell report
    "tests/integration/test_stay_put.py",  # 8 (24 on a busy host): two tiny uv venvs, one with torch; one pinned probe
    "tests/integration/test_pair_calls_wheels.py",  # 14: thirteen wheels read (downloaded once, cached), no env
    "tests/integration/test_install.py",  # 10: a venv, the harness installed from a copy of the clone
    "tests/integration/test_cache_install.py",  # 5: three tiny envs, a private uv cache
    "tests/probes/test_static_releases.py",
    "tests/test_workflow.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all-cells", action="store_true", default=False,
                     help="build every cell of the integration matrices that CI samples (nanochat, differential "
                          "guards, GRPO, mutants: each module's REPEATS or SAMPLE says what CI leaves out)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {m: i for i, m in enumerate(LONGEST_FIRST)}

    def module_of(item: pytest.Item) -> str:
        path = Path(str(item.path)).resolve()
        return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)

    items.sort(key=lambda item: rank.get(module_of(item), len(rank)))  # stable: collection order within a module


@pytest.fixture(autouse=True)
def _protect(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("integration"):
        return

    def no_uv() -> str:
        raise AssertionError("a unit test tried to run uv; mark it integration")

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a unit test tried to reach the network; mark it integration")

    import urllib.request

    from matrix.envs import tools

    tools._uv_bin.cache_clear()
    monkeypatch.setattr(tools, "uv_bin", no_uv)
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    # The index client speaks httpx: its real transport is off too (httpx.MockTransport stays usable).
    import httpx

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", no_network)


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
