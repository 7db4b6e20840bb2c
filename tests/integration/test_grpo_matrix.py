"""grpo-normalizer-nan on real PyPI builds: one matrix run, twelve cells (eleven in CI:
``REPEATS``), shared by every test here.

unsloth 2026.10.9 as released, with our reference guard (``matrix/backports/grpo-count-floor``) and with
seven wrong guards a contributor might write (``tests/backports/grpo-*``), against zoo 2026.9.7 (the last
release whose ``grpo_compute_loss`` divides by the bare count), 2026.9.8 (the first that floors it) and
2026.9.7 with its datasets pin loosened (``tests/backports/zoo-loose-datasets``: metadata only, so that TRL
1.13.0 installs with it). zoo 2026.9.7 is below unsloth 2026.10.9's pin: installed with overrides, as every
refused pair is. What the code says (read before the run): both detectors call 9.7 vulnerable and 9.8 fixed;
unsloth hands zoo the count as read, so the plain cell on 9.7 is ``missing``; its reach is latent, because
the only TRL that installs with zoo 2026.9.7 as released is < 1.0 (zoo needs datasets < 4.4, TRL >= 1.0 needs
datasets >= 4.7) and TRL < 1.9 counts the completion tokens before ``mask_truncated_completions``, so the GRPO
run sends a positive count (the steps through unsloth's trainer are n/a there: they run where TRL >= 1.9).
With the loosened pin TRL 1.13.0 sends 0 and the steps through the generated UnslothGRPOTrainer go NaN:
``missing``, reach ``exposed`` through unsloth's own route; the reference guard hands the loss 1 there and
``activates`` with every step finite; it ``no-ops`` on 9.8 (present, and zoo's own floor makes it change
nothing); the plain cell on 9.8 is ``not-needed`` (TRL 1.13.0 sends 0 and zoo's floor takes it). Each wrong
guard is ``broken`` by the suite test its defect breaks, and its reason names the defect. Every suite case
runs on three routes: zoo's module attribute and the two loss functions of the UnslothGRPOTrainer unsloth
generates (its own copies of zoo's source), so the guard that wraps only the module attribute is broken by
the 0 / 0 left on the trainer's routes. The wrong guards' cells turn training off.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from tests.integration.harness import ROOT, UNSLOTH, explain, run_nox, sampled

pytestmark = pytest.mark.integration
GRPO = "grpo-normalizer-nan"
LOOSE = "z2026.9.7-loose"  # zoo 2026.9.7 with its datasets pin loosened (tests/backports/zoo-loose-datasets)
# wrong guard -> (the suite test its defect breaks, words its verdict's reason must carry)
WRONG = {"grpo-floor-dapo-only": ("s1-zero-all-masked", "cispo"),
         "grpo-clamp-completion-length": ("s2-positive-counts", "s2-positive-counts"),
         "grpo-nan-to-zero": ("s4-nan-stays", "s4-nan-stays"),
         "grpo-module-attr-only": ("s1-zero-all-masked",
                                   "UnslothGRPOTrainer's grpo_compute_loss is not finite (loss nan): the guard misses"),
         "grpo-zero-no-graph": ("s1-zero-all-masked", "no autograd graph"),
         "grpo-floor-normaliser": ("s6-fractional-normaliser", "count tensor(1)"),
         "grpo-swallow-runtime-error": ("s7-errors-propagate", "the exception was swallowed")}
# CI leaves out the oldest wrong guard: its suite test (s1) fails for two other wrong guards here, at about a
# minute of a busy host. `pytest --all-cells` builds it.
REPEATS = ("grpo-floor-dapo-only",)


def chosen(config: pytest.Config) -> list[str]:
    """The wrong guards this run builds."""
    return sampled(config, WRONG, REPEATS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "wrong" in metafunc.fixturenames:
        metafunc.parametrize("wrong", chosen(metafunc.config))


def _matrix(wrong: list[str]) -> str:
    builds = [f'[[build]]\nname = "u"\npackage = "unsloth"\nsource = "pypi"\nversion = "{UNSLOTH}"\n',
              '[[build]]\nname = "u-floor"\npackage = "unsloth"\nsource = "backport"\nbase = "u"\n'
              'backport = "grpo-count-floor"\n']
    builds += [f'[[build]]\nname = "u-{w}"\npackage = "unsloth"\nsource = "backport"\nbase = "u"\nbackport = "{w}"\n'
               for w in wrong]
    builds += [f'[[build]]\nname = "z{v}"\npackage = "unsloth_zoo"\nsource = "pypi"\nversion = "{v}"\n'
               for v in ("2026.9.7", "2026.9.8")]
    builds += [f'[[build]]\nname = "{LOOSE}"\npackage = "unsloth_zoo"\nsource = "backport"\nbase = "z2026.9.7"\n'
               'backport = "zoo-loose-datasets"\n']
    off = "options = { train = false }"
    # Training on where the zoo is vulnerable and TRL >= 1.9 installs: the steps through UnslothGRPOTrainer.
    trl = 'options = { trl = "1.13.0" }'
    pairs = ['{ unsloth = "u", zoo = "z2026.9.7" }', f'{{ unsloth = "u", zoo = "{LOOSE}", {trl} }}',
             f'{{ unsloth = "u-floor", zoo = "{LOOSE}", {trl} }}',
             f'{{ unsloth = "u", zoo = "z2026.9.8", {off} }}', f'{{ unsloth = "u-floor", zoo = "z2026.9.8", {off} }}']
    pairs += [f'{{ unsloth = "u-{w}", zoo = "z2026.9.7", {off} }}' for w in wrong]
    # zoo 2026.9.7 and 2026.9.8 carry the fused CE fault too, and none of these builds guards it.
    expects = ['[[expect]]\ncheck = "fused-ce-masked-nan"\nstate = "missing"\n']
    expects += [f'[[expect]]\nunsloth = "u-{w}"\nzoo = "z2026.9.7"\ncheck = "{GRPO}"\nstate = "broken"\n'
               for w in wrong]
    expects += [f'[[expect]]\nunsloth = "u"\nzoo = "{LOOSE}"\ncheck = "{GRPO}"\nstate = "missing"\n']
    return ("schema = 1\n\n" + "\n".join(builds) + "\n[pairs]\nproduct = false\ninclude = [\n  "
            + ",\n  ".join(pairs) + ",\n]\n\n" + "\n".join(expects))


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("grpo")
    wrong = chosen(request.config)
    for w in (*wrong, "zoo-loose-datasets"):
        shutil.copytree(ROOT / "tests" / "backports" / w, tmp / w)
    matrix = tmp / "grpo.toml"
    matrix.write_text(_matrix(wrong), encoding="utf-8")
    out = tmp / "out"
    proc = run_nox(tmp / "nox", "-s", "matrix", out=out, matrix=matrix)
    report_path = out / "report.json"
    assert report_path.is_file(), explain(proc)
    report = json.loads(report_path.read_text())
    cells = {c["cell_id"]: c for c in report["cells"]}
    return {"proc": proc, "cells": cells, "out": out}


def verdict(ran: dict[str, Any], cell: str) -> dict[str, Any]:
    c = ran["cells"][cell]
    assert GRPO in (c.get("verdicts") or {}), f"{cell}: no {GRPO} verdict; {c.get('error') or c.get('status')}"
    return c["verdicts"][GRPO]  # type: ignore[no-any-return]


def test_the_run_meets_its_expectations(ran: dict[str, Any]) -> None:
    assert ran["proc"].returncode == 0, explain(ran["proc"])


@pytest.mark.parametrize(("cell", "zoo"), [("u__z2026.9.7", "vulnerable"), ("u__z2026.9.8", "fixed")])
def test_both_detectors_agree_at_the_boundary(ran: dict[str, Any], cell: str, zoo: str) -> None:
    v = verdict(ran, cell)
    assert (v["zoo"], v["static"], v["runtime"]) == (zoo, zoo, zoo), v
    if zoo == "vulnerable":
        assert "dapo (count tensor(0.))" in v["zoo_reason"] and "kl goes NaN" in v["zoo_reason"]


def test_plain_unsloth_on_the_vulnerable_zoo_is_missing_and_latent_on_its_stack(ran: dict[str, Any]) -> None:
    v = verdict(ran, "u__z2026.9.7")
    assert v["guard"] == "missing", v
    train = v["training"]
    assert train["outcome"] == "clean" and train["kernel_calls"] > 0, train
    assert all(m != "tensor(0)" for m in train["masked_inputs"]) and train["masked_inputs"], train
    assert v["reach"] == "latent" and "TRL 0." in v["reach_reason"], v["reach_reason"]
    assert not v["gate_fail"] and v["gate_warn"]


@pytest.mark.parametrize(("cell", "state"), [(f"u-floor__{LOOSE}", "activates"), ("u-floor__z2026.9.8", "no-ops"),
                                             ("u__z2026.9.8", "not-needed")])
def test_the_reference_guard(ran: dict[str, Any], cell: str, state: str) -> None:
    v = verdict(ran, cell)
    assert v["guard"] == state, v
    if state != "not-needed":
        assert v["behavior"]["failed"] == 0 and v["behavior"]["passed"] == 7, v["behavior"]
        assert "unsloth's hand-off changes the count" in v["guard_reason"]
    if state == "activates":  # the floor sits in the compute_loss unsloth copies: it reaches the generated trainer
        assert "on 3 route(s)" in v["guard_reason"], v["guard_reason"]


def test_a_wrong_guard_is_broken_by_the_test_its_defect_breaks(ran: dict[str, Any], wrong: str) -> None:
    backport, (test, words) = wrong, WRONG[wrong]
    v = verdict(ran, f"u-{backport}__z2026.9.7")
    assert v["guard"] == "broken", v
    assert test in v["behavior"]["failing"], v["behavior"]
    assert words in v["guard_reason"], v["guard_reason"]


def unsloth_steps(ran: dict[str, Any], cell: str) -> dict[str, Any]:
    cell_json = json.loads((ran["out"] / "cells" / cell / "cell.json").read_text())
    step = next(s for s in cell_json["checks"][GRPO]["steps"] if s["name"] == "unsloth_train")
    assert step["status"] == "ok", step
    return step["result"]  # type: ignore[no-any-return]


def test_below_trl_1_9_the_unsloth_steps_are_n_a_and_the_reach_names_its_route(ran: dict[str, Any]) -> None:
    r = unsloth_steps(ran, "u__z2026.9.7")
    assert r["outcome"] == "n/a" and "counts the completion tokens before" in r["reason"], r
    v = verdict(ran, "u__z2026.9.7")
    assert "the reach comes from the check's run with TRL's GRPOTrainer" in v["reach_reason"], v["reach_reason"]


def test_unguarded_vulnerable_zoo_goes_nan_through_unsloths_own_trainer(ran: dict[str, Any]) -> None:
    """zoo 2026.9.7's code with TRL 1.13.0: the trainer sends 0 at every fully truncated step, unsloth hands it
    on as read, and the module's dapo loss divides 0 by 0 (through grpo_accumulated_loss the NaN reaches the
    gradient, so the weights go NaN at step 1 and the next generation's sampling raises)."""
    r = unsloth_steps(ran, f"u__{LOOSE}")
    assert r["versions"]["trl"] == "1.13.0" and r["versions"]["unsloth_zoo"] == "2026.9.7", r["versions"]
    assert r["masked_inputs"] == ["tensor(0)"] and r["handed_inputs"] == ["tensor(0)"], r
    assert r["outcome"] in ("nan-logged", "nan-weights") and r["first_nan_step"] == 1, r["reason"]
    v = verdict(ran, f"u__{LOOSE}")
    assert (v["zoo"], v["guard"], v["reach"]) == ("vulnerable", "missing", "exposed"), v
    assert v["reach_reason"].startswith("through unsloth's own route"), v["reach_reason"]
    assert v["gate_fail"], v


def test_the_guard_keeps_the_steps_through_unsloths_trainer_finite(ran: dict[str, Any]) -> None:
    """The same zoo code and stack as the NaN cell: the trainer sends 0, the guard hands the loss 1, every step
    finite, and the raw run (zoo's loss under TRL's trainer, no unsloth: NaN) does not judge the guard."""
    r = unsloth_steps(ran, f"u-floor__{LOOSE}")
    assert r["outcome"] == "clean" and r["masked_inputs"] == ["tensor(0)"] and r["handed_inputs"] == ["tensor(1)"], r
    assert r["kernel_calls"] == 3, r
    v = verdict(ran, f"u-floor__{LOOSE}")
    assert v["guard"] == "activates" and v["training"]["outcome"] in ("nan-logged", "nan-weights"), v
    assert "stayed finite (the trainer sent num_items_in_batch=tensor(0)" in v["guard_reason"], v["guard_reason"]
    assert "the loss got tensor(1)" in v["guard_reason"]


def test_the_steps_through_unsloths_trainer_are_spared_on_a_fixed_zoo(ran: dict[str, Any]) -> None:
    for cell in ("u__z2026.9.8", "u-floor__z2026.9.8"):
        step = next(s for s in json.loads((ran["out"] / "cells" / cell / "cell.json").read_text())["checks"][GRPO]
                    ["steps"] if s["name"] == "unsloth_train")
        assert step["status"] == "skipped", step  # training off in these cells
