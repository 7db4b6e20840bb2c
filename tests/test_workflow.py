"""The GitHub workflow: a structure a real repository could adopt, checked key by key.

What is asserted is what issue 13 asks of it: it can fail (no step swallows an
exit code), JUnit is published as a check, the uv cache key survives code
edits and only one job saves it, only cell.json and logs are uploaded, the
GPU job runs the same session with ``--device cuda`` and the same matrix
input and is merged, and every job has a timeout, with least privilege.
``actionlint`` runs too when it is on PATH (it is neither on PyPI as a wheel
nor in Debian; see the README).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "skewmatrix.yml"


@pytest.fixture(scope="module")
def wf() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def runs(job: dict[str, Any]) -> list[str]:
    return [s["run"] for s in job["steps"] if "run" in s]


def uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(action + "@")]


def test_jobs_and_their_order(wf: dict[str, Any]) -> None:
    jobs = wf["jobs"]
    assert set(jobs) == {"tests", "list", "cell", "gpu", "gpu-wheelhouse", "gpu-offline", "merge"}
    assert jobs["cell"]["needs"] == "list"
    assert jobs["cell"]["strategy"] == {"fail-fast": False, "matrix": "${{ fromJSON(needs.list.outputs.matrix) }}"}
    assert jobs["list"]["outputs"]["matrix"] == "${{ steps.cells.outputs.matrix }}"
    assert any("$NOX --list --json | " in r and "skewmatrix ci-matrix" in r for r in runs(jobs["list"]))
    assert jobs["merge"]["needs"] == ["cell", "gpu", "gpu-offline"]
    # the merge runs when cells failed (that is when it matters), not when the run was cancelled
    assert "!cancelled()" in jobs["merge"]["if"]


def test_every_job_has_a_timeout_and_the_run_has_concurrency_and_least_privilege(wf: dict[str, Any]) -> None:
    assert all(isinstance(j.get("timeout-minutes"), int) for j in wf["jobs"].values())
    assert wf["permissions"] == {"contents": "read"}
    writers = {name for name, j in wf["jobs"].items() if j.get("permissions", {}).get("checks") == "write"}
    assert writers == {"tests", "merge"}  # only the jobs that publish a check
    assert "${{ github.workflow }}" in wf["concurrency"]["group"]
    assert "cancel-in-progress" in wf["concurrency"]


def test_it_can_fail(wf: dict[str, Any]) -> None:
    """No step hides an exit code; the cell and report sessions exit 1 on an unexpected gate result."""
    for name, job in wf["jobs"].items():
        for step in job["steps"]:
            assert not step.get("continue-on-error"), (name, step)
            run = step.get("run", "")
            assert "|| true" not in run, (name, run)
            # the GPU job defers its gate to the merge job, which judges its results
            assert "--exit-zero" not in run or name == "gpu", (name, run)
    assert runs(wf["jobs"]["cell"])[0] == '$NOX -s "${{ matrix.session }}"'
    merge = runs(wf["jobs"]["merge"])
    assert "$NOX -s report -- -o merged shards/*.shard" in merge
    assert "$NOX -s report -- -o merged-gpu gpu" in merge


def test_junit_is_published_as_a_check(wf: dict[str, Any]) -> None:
    for name, paths in (("merge", "merged*/junit.xml"), ("tests", "tests-junit.xml")):
        (step,) = uses(wf["jobs"][name], "mikepenz/action-junit-report")
        assert step["with"]["report_paths"] == paths and step["if"] == "${{ !cancelled() }}"
    assert any("--junitxml=tests-junit.xml" in r for r in runs(wf["jobs"]["tests"]))


def test_uv_cache_is_stable_across_code_edits_and_saved_once(wf: dict[str, Any]) -> None:
    assert not any(s.get("uses", "").startswith("actions/cache@") for j in wf["jobs"].values() for s in j["steps"])
    (setup,) = uses(wf["jobs"]["cell"], "astral-sh/setup-uv")
    w = setup["with"]
    assert w["enable-cache"] is True and w["prune-cache"] is True
    # only dependency declarations key the cache: editing matrix/*.py or probes/ keeps it
    assert w["cache-dependency-glob"] == "pyproject.toml"
    assert w["save-cache"] == "${{ strategy.job-index == 0 }}"
    assert "uv cache prune --ci" in runs(wf["jobs"]["cell"])


def test_only_cell_json_and_logs_are_uploaded(wf: dict[str, Any]) -> None:
    for name, out in (("cell", "out"), ("gpu", "out-gpu")):
        (up,) = uses(wf["jobs"][name], "actions/upload-artifact")
        paths = up["with"]["path"].split()
        assert paths == [f"{out}/cells/*/cell.json", f"{out}/cells/*/*.log", f"{out}/cells/*/work/*.log"]
        assert not any("build" in p for p in paths)


def test_gpu_job_runs_the_same_session_and_matrix_and_is_merged(wf: dict[str, Any]) -> None:
    gpu = wf["jobs"]["gpu"]
    assert gpu["runs-on"] == ["self-hosted", "gpu"]
    assert "inputs.gpu" in gpu["if"] and "vars.SKEWMATRIX_GPU" in gpu["if"]
    assert runs(gpu) == ["$NOX -s matrix -- --device cuda --exit-zero"]
    assert not any("sed" in r for j in wf["jobs"].values() for r in runs(j))
    # the matrix input reaches every job through the workflow-level env
    assert wf["env"]["SKEWMATRIX_MATRIX"] == "${{ inputs.matrix || 'matrix/default.toml' }}"
    assert not any("SKEWMATRIX_MATRIX" in j.get("env", {}) for j in wf["jobs"].values())
    downloads = uses(wf["jobs"]["merge"], "actions/download-artifact")
    assert {d["with"].get("name") or d["with"].get("pattern") for d in downloads} == {"cell-*", "gpu-cells",
                                                                                      "gpu-offline-cells"}


def test_tests_job_installs_chromium_and_runs_the_readme_command(wf: dict[str, Any]) -> None:
    r = runs(wf["jobs"]["tests"])
    assert any("apt-get install -y -qq chromium" in x for x in r)
    assert any(x.startswith("$NOX -s tests") for x in r) and "$NOX -s lint" in r


def test_session_names_in_the_workflow_exist() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    for name in set(re.findall(r"\$NOX -s (\w+)", text)):
        assert f"def {name}(session" in noxfile, name
