"""Deliberately wrong guards, built as real backports: each must turn its cell `broken`
with the failing behaviour test named (tests/mutants/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.harness import ROOT, UNSLOTH, explain, run_nox, sampled

pytestmark = pytest.mark.integration
MUTANTS = ROOT / "tests" / "mutants"
FUSED, CPU = "fused-ce-masked-nan", "cpu-ce-masked-nan"
GUARD = ROOT / "matrix" / "backports" / "unsloth-guard"

# mutant -> (zoo it runs against, behaviour tests that must fail)
EXPECT = {
    "no_cache_clear": ("z-vuln", {"11-idempotent", "12-uninstall"}),
    "changed_signature": ("z-vuln", {"11-idempotent"}),
    # Short-circuits whatever n_items says: a NaN count (all-masked) must stay NaN.
    "n_items_too": ("z-vuln", {"04-dense-n-items"}),
    # The guard before issue 11: n_items None only; the trainer's 0 still gives NaN.
    "none_only": ("z-vuln", {"14-n-items-zero", "04-dense-n-items"}),
    "mask_ignored": ("z-vuln", {"07-mask"}),
    "no_restore": ("z-vuln", {"12-uninstall"}),
    "shift_ignored": ("z-vuln", {"10-shift-empties"}),
    "always_active": ("z-fixed", {"13-fixed-zoo"}),
    "not_idempotent": ("z-vuln", {"11-idempotent"}),
}


# CI leaves out two mutants whose failing test (11-idempotent) no_cache_clear fails too, at about 80 s of a busy host
# each. `pytest --all-cells` builds them.
REPEATS = ("changed_signature", "not_idempotent")


def chosen(config: pytest.Config) -> list[str]:
    """The mutants this run builds."""
    return sampled(config, EXPECT, REPEATS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "name" in metafunc.fixturenames:
        metafunc.parametrize("name", chosen(metafunc.config))


def mutant_backport(base: Path, name: str) -> None:
    """The guard backport's manifest and files, plus the mutant's diff as a [[patch]]."""
    d = base / "backports" / f"mut-{name}"
    shutil.copytree(GUARD, d)
    shutil.copy2(MUTANTS / f"{name}.diff", d / "mutant.diff")
    with (d / "backport.toml").open("a") as fh:
        fh.write('\n[[patch]]\nfile = "mutant.diff"\n')


@pytest.fixture(scope="module")
def mutant_report(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict:
    base = tmp_path_factory.mktemp("mutants")
    text = f"""
[[build]]
name = "u"
package = "unsloth"
source = "pypi"
version = "{UNSLOTH}"

[[build]]
name = "z-vuln"
package = "unsloth_zoo"
source = "pypi"
version = "2026.9.3"

[[build]]
name = "z-fixed"
package = "unsloth_zoo"
source = "pypi"
version = "2026.10.9"
"""
    include = []
    for name in chosen(request.config):
        zoo = EXPECT[name][0]
        mutant_backport(base, name)
        text += (f'\n[[build]]\nname = "mut-{name.replace("_", "-")}"\npackage = "unsloth"\nsource = "backport"\n'
                 f'base = "u"\nbackport = "backports/mut-{name}"\n')
        include.append(f'{{ unsloth = "mut-{name.replace("_", "-")}", zoo = "{zoo}" }}')
    text += "\n[pairs]\nproduct = false\ninclude = [\n  " + ",\n  ".join(include) + ",\n]\n"
    # Every mutant is expected broken; zoo 2026.10.9's CPU-backend kernel is missing (latent) whatever unsloth does.
    text += (f'\n[[expect]]\ncheck = "{FUSED}"\nstate = "broken"\n'
             f'\n[[expect]]\nzoo = "z-fixed"\ncheck = "{CPU}"\nstate = "missing"\n')
    (base / "mutants.toml").write_text(text)
    out = base / "out"
    proc = run_nox(base / "envs", "-s", "matrix", out=out, matrix=base / "mutants.toml")
    assert proc.returncode == 0, explain(proc)
    report = json.loads((out / "report.json").read_text())
    return {c["cell_id"]: c for c in report["cells"]}


def test_mutant_is_caught(mutant_report: dict, name: str) -> None:
    zoo, must_fail = EXPECT[name]
    cell = mutant_report[f"mut-{name.replace('_', '-')}__{zoo}"]
    c = cell["verdicts"][FUSED]
    assert cell["error"] is None, cell["error"]
    assert c["guard"] == "broken", (c["guard"], c["guard_reason"])
    # broken fails the default gate whatever the route: a clean training run (reach latent) does not excuse it
    assert c["gate_fail"] is True and c["reach"] in ("exposed", "latent"), c
    failing = set(c["behavior"]["failing"])
    assert must_fail <= failing, (failing, c["guard_reason"])
    for test_id in must_fail:
        assert test_id in c["guard_reason"]
    if name == "none_only":
        # the trainer hands a fully masked step a count of 0, not None: the training run logs NaN, and the
        # verdict says so with the value that arrived
        assert c["training"]["outcome"] == "nan-logged", c["training"]
        assert "training run nan-logged" in c["guard_reason"] and "num_items_in_batch=tensor(0)" in c["guard_reason"]
    # the mutant really is our guard plus one diff: the backport marker says which
    marker = next(d for d in cell["installed"] if d["name"] == "unsloth")["backport"]
    assert marker["backport"] == f"mut-{name}" or marker["backport"].endswith(f"mut-{name}")


def test_a_broken_guard_with_a_clean_training_run_still_fails(mutant_report: dict) -> None:
    # Most wrong guards change results only off the trainer's route (a mask, a shift, a signature): the run
    # stays clean, the reach is latent, and the gate fails them all the same.
    latent = [c for c in mutant_report.values() if c["verdicts"][FUSED]["reach"] == "latent"]
    assert latent, {k: c["verdicts"][FUSED]["reach"] for k, c in mutant_report.items()}
    assert all(c["verdicts"][FUSED]["gate_fail"] and c["verdicts"][FUSED]["training"]["outcome"] == "clean"
               for c in latent)


def test_mutation_session_scores_a_sample(tmp_path: Path) -> None:
    """`nox -s mutation -- --sample N`: a real cell env (vulnerable zoo), one import, a scored sample.

    Expected from reasoning, not from a run: the bar holds on any sample, because every generated
    mutant of the guard is killed or listed in the check's mutation_equivalents.toml
    (probes/checks/fused_ce_masked_nan/) with an argument (one slack for a mutant whose fate depends
    on the host's speed, such as a probe that compiles).
    """
    out = tmp_path / "out"
    proc = run_nox(tmp_path / "envs", "-s", "mutation", "--", "--sample", "8", "--out", str(out), out=out)
    assert proc.returncode == 0, explain(proc)
    result = json.loads((out / "mutation.json").read_text())
    assert result["passed"] is True
    assert result["score"]["ran"] == 8
    assert result["score"]["killed"] + result["score"]["equivalent"] >= 7
    assert (out / "mutation.md").read_text().startswith("# Mutation score")
