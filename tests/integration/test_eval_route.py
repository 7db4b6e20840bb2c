"""Evaluation is a route too (issue 27, item 5): a kernel that only the evaluation reaches with a bad count.

``tests/backports/zoo-fix-zero-only`` is zoo 2026.9.3 whose fused CE floors a count it is given (tensor(0) ->
0.0) but divides by a zero label count when the count is None (NaN). Training never sends None: zoo's trainer
patch counts the shifted labels of each optimizer step, tensor(0) at a fully masked one. ``trainer.evaluate()``
does on transformers before 4.57, whose ``prediction_step`` computes no count (4.57 counts the shifted labels of
the eval batch). One pair, unsloth 2026.10.9 as released against that zoo, at two stacks:

* floor (transformers 4.52.4, TRL 0.18.2): training clean, the fully masked eval batch hands zoo's entry None and
  it answers NaN, so ``eval_loss`` is NaN through this check's kernel: ``missing``, reach ``exposed``;
* middle (transformers 4.57.6, TRL 0.24.0): the eval batch hands it tensor(0): finite; reach ``latent``.

zoo 2026.9.3 cannot be installed with TRL 1.15 (datasets ranges), so the middle stack stands for the newest here;
the newest stack's evaluation is covered with zoo 2026.10.9 in ``test_gate_pinned.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.harness import ROOT, UNSLOTH, explain, run_backport_matrix

pytestmark = pytest.mark.integration
FUSED = "fused-ce-masked-nan"
BACKPORT = ROOT / "tests" / "backports" / "zoo-fix-zero-only"
FLOOR, MIDDLE = "u__z-zero-only__floor", "u__z-zero-only__middle"

MATRIX = f"""
schema = 1

[[build]]
name = "u"
package = "unsloth"
source = "pypi"
version = "{UNSLOTH}"

[[build]]
name = "z"
package = "unsloth_zoo"
source = "pypi"
version = "2026.9.3"

[[build]]
name = "z-zero-only"
package = "unsloth_zoo"
source = "backport"
base = "z"
backport = "zoo-fix-zero-only"    # copied next to this file (a backport path may not leave its folder)

[pairs]
product = false
include = [{{ unsloth = "u", zoo = "z-zero-only" }}]

[[stack]]
name = "floor"
transformers = "4.52.4"
trl = "0.18.2"

[[stack]]
name = "middle"
transformers = "4.57.6"
trl = "0.24.0"

[[expect]]
zoo = "z-zero-only"
stack = "floor"
check = "{FUSED}"
state = "missing"
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_backport_matrix(tmp_path_factory.mktemp("zero-only"), BACKPORT, MATRIX, "zero-only")


def _evaluation(cell: dict[str, Any]) -> dict[str, Any]:
    train = next(s for s in cell["checks"][FUSED]["steps"] if s["name"] == "train")
    assert train["status"] == "ok", train
    return train["result"]["evaluation"]


@pytest.mark.parametrize("cell_id", [FLOOR, MIDDLE])
def test_the_zoo_is_vulnerable_unguarded_and_its_training_is_clean(ran: dict[str, Any], cell_id: str) -> None:
    cell = ran["cells"][cell_id]
    assert cell["error"] is None, cell["error"]
    v = cell["verdicts"][FUSED]
    assert (v["zoo"], v["static"], v["runtime"], v["guard"]) == ("vulnerable", "vulnerable", "vulnerable", "missing")
    # the trainer's tensor(0) at a fully masked step is floored by this zoo: a clean run
    assert v["training"]["outcome"] == "clean" and "tensor(0)" in v["training"]["masked_inputs"], v["training"]


def test_on_the_floor_the_evaluation_hands_the_kernel_none_and_it_is_exposed(ran: dict[str, Any]) -> None:
    cell = ran["cells"][FLOOR]
    assert cell["stack"]["resolved"]["transformers"] == "4.52.4"
    ev = _evaluation(cell)
    assert (ev["outcome"], ev["source"], ev["eval_loss"]) == ("nan-logged", "kernel", "nan"), ev["symptom"]
    first, masked, last = ev["batches"]
    assert masked["labels_left"] == 0 and masked["kernel_calls"] == [{"n_items": "None", "raw_loss": "nan"}]
    assert isinstance(first["loss"], float) and isinstance(last["loss"], float)
    v = cell["verdicts"][FUSED]
    assert v["reach"] == "exposed" and "its evaluation (trainer.evaluate()) shows it" in v["reach_reason"]
    assert v["training"]["label"] == "clean, evaluation eval_loss nan"
    assert (v["gate_fail"], v["gate_warn"]) == (True, False)


def test_on_the_middle_stack_the_evaluation_sends_a_count_and_stays_latent(ran: dict[str, Any]) -> None:
    cell = ran["cells"][MIDDLE]
    ev = _evaluation(cell)
    assert (ev["outcome"], ev["source"], ev["masked_inputs"]) == ("clean", None, ["tensor(0)"]), ev["symptom"]
    assert ev["batches"][1]["kernel_calls"] == [{"n_items": "tensor(0)", "raw_loss": 0.0}]
    v = cell["verdicts"][FUSED]
    assert v["reach"] == "latent" and (v["gate_fail"], v["gate_warn"]) == (False, True)
    assert "evaluation (trainer.evaluate()) sent num_items_in_batch=tensor(0)" in v["reach_reason"]


def test_the_run_exits_0(ran: dict[str, Any]) -> None:
    # the floor cell's failure is declared in the matrix (XFAIL); the middle cell's latent reach is a warning
    assert ran["proc"].returncode == 0, explain(ran["proc"])
