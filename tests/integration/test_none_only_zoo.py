"""A zoo fixed for ``n_items=None`` only is vulnerable on the trainer's route (issue 20, part 4).

zoo's trainer patch hands the kernel ``num_items_in_batch = tensor(0)`` at a fully masked step, not None
(probes/checks/fused_ce_masked_nan/README.md#the-evidence).
``tests/backports/zoo-fix-none-only`` is zoo 2026.9.3 with the label count floored
and a given ``n_items`` divided by as it comes: the old contract. Two real cells, unsloth 2026.10.9 as
released and with the shipped guard backport, against that zoo: both detectors must call it vulnerable
(the runtime one naming the count forms that NaN, the static one the caller's count), the unguarded cell is
``missing`` and ``exposed`` (its training run logs NaN), and the guard activates.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.harness import ROOT, UNSLOTH, explain, run_backport_matrix

pytestmark = pytest.mark.integration
FUSED = "fused-ce-masked-nan"
BACKPORT = ROOT / "tests" / "backports" / "zoo-fix-none-only"
PLAIN, GUARDED = "u__z-none-only", "u-guard__z-none-only"

MATRIX = f"""
schema = 1

[[build]]
name = "u"
package = "unsloth"
source = "pypi"
version = "{UNSLOTH}"

[[build]]
name = "u-guard"
package = "unsloth"
source = "backport"
base = "u"
backport = "unsloth-guard"        # matrix/backports/unsloth-guard: not next to this file, found there

[[build]]
name = "z"
package = "unsloth_zoo"
source = "pypi"
version = "2026.9.3"

[[build]]
name = "z-none-only"
package = "unsloth_zoo"
source = "backport"
base = "z"
backport = "zoo-fix-none-only"    # copied next to this file (a backport path may not leave its folder)

[pairs]
product = false
include = [
  {{ unsloth = "u", zoo = "z-none-only" }},
  {{ unsloth = "u-guard", zoo = "z-none-only" }},
]

[[expect]]
unsloth = "u"
zoo = "z-none-only"
check = "{FUSED}"
state = "missing"
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_backport_matrix(tmp_path_factory.mktemp("none-only"), BACKPORT, MATRIX, "none-only")


def _step(cell: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in cell["checks"][FUSED]["steps"] if s["name"] == name)


@pytest.mark.parametrize("cell_id", [PLAIN, GUARDED])
def test_both_detectors_call_the_none_only_zoo_vulnerable(ran: dict[str, Any], cell_id: str) -> None:
    cell = ran["cells"][cell_id]
    assert cell["error"] is None, cell["error"]
    v = cell["verdicts"][FUSED]
    assert (v["zoo"], v["static"], v["runtime"]) == ("vulnerable", "vulnerable", "vulnerable"), v["zoo_reason"]
    runtime = _step(cell, "runtime")["result"]
    assert "NaN for n_items=0, 0.0, tensor(0) (loss nan, gradients finite); finite for None" in runtime["reason"]
    assert runtime["forms"]["None"]["loss_finite"] and not runtime["forms"]["tensor(0)"]["loss_finite"]
    assert runtime["outcome"]["loss_finite"]  # the None row alone, as the detector used to probe, says finite
    static = cell["checks"][FUSED]["static"]
    assert static["reason"].startswith("the caller's count (parameter 'n_items'"), static
    marker = next(d for d in cell["installed"] if d["name"] in ("unsloth_zoo", "unsloth-zoo"))["backport"]
    assert str(marker["backport"]).endswith("zoo-fix-none-only"), marker


def test_without_a_guard_the_trainers_zero_count_reaches_users(ran: dict[str, Any]) -> None:
    v = ran["cells"][PLAIN]["verdicts"][FUSED]
    assert (v["guard"], v["reach"]) == ("missing", "exposed"), (v["guard_reason"], v["reach_reason"])
    assert v["training"]["outcome"] == "nan-logged", v["training"]
    assert "tensor(0)" in v["training"]["masked_inputs"], v["training"]


def test_with_the_guard_the_training_run_is_clean(ran: dict[str, Any]) -> None:
    v = ran["cells"][GUARDED]["verdicts"][FUSED]
    assert v["training"]["outcome"] == "clean", v["training"]
    assert "tensor(0)" in v["training"]["masked_inputs"], v["training"]  # the same route, now guarded


# The guard short-circuits only the counts this zoo NaNs on (tensor(0), not None, which the zoo floors itself)
# and behaviour test 1 measures both forms, so the guard activates and the run passes.
def test_the_guard_activates_on_the_none_only_zoo(ran: dict[str, Any]) -> None:
    v = ran["cells"][GUARDED]["verdicts"][FUSED]
    assert v["guard"] == "activates", (v["guard_reason"], v["behavior"])


def test_the_run_exits_0(ran: dict[str, Any]) -> None:
    assert ran["proc"].returncode == 0, explain(ran["proc"])
