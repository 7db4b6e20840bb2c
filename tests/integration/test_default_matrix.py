"""The default matrix, built and probed for real from PyPI through `nox -s matrix`,
then again in two shards whose merge must equal it (timings and paths aside).

Slow (six real envs, twice): marked integration.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reports.schema import validate_cell, validate_report
from tests.integration.harness import ROOT, explain, run_nox

pytestmark = pytest.mark.integration

U, G = "u2026.10.9", "u2026.10.9-guard"
Z_OLD, Z_FIX, Z_NEW = "z2026.9.3", "z2026.9.3-fix", "z2026.10.9"
EXPECTED = {
    (U, Z_OLD): ("vulnerable", "missing"),
    (U, Z_FIX): ("fixed", "not-needed"),
    (U, Z_NEW): ("fixed", "not-needed"),
    (G, Z_OLD): ("vulnerable", "activates"),
    (G, Z_FIX): ("fixed", "no-ops"),
    (G, Z_NEW): ("fixed", "no-ops"),
}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("default-out")
    proc = run_nox(tmp_path_factory.mktemp("default-envs"), "-s", "matrix", out=out)
    return proc, out


def report_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["cell_id"]: c for c in report["cells"]}


def test_nox_matrix_exits_zero_and_writes_every_format(default_run) -> None:
    proc, out = default_run
    assert proc.returncode == 0, explain(proc)
    for name in ("report.json", "report.md", "report.html", "junit.xml"):
        assert (out / name).is_file(), name
    # the terminal grid is printed at the end of the run
    assert "unsloth \\ zoo" in proc.stdout and "gate: 1 of 6 cell(s)" in proc.stdout


@pytest.mark.parametrize(("unsloth", "zoo"), sorted(EXPECTED))
def test_default_states(default_run, unsloth: str, zoo: str) -> None:
    _, out = default_run
    report = report_of(out)
    validate_report(report)
    cell = by_id(report)[f"{unsloth}__{zoo}"]
    validate_cell({k: v for k, v in cell.items() if k not in ("classification", "gate_fail")})
    zoo_state, guard_state = EXPECTED[unsloth, zoo]
    c = cell["classification"]
    assert cell["error"] is None, cell["error"]
    assert (c["zoo"], c["static"], c["runtime"], c["guard"]) == (zoo_state, zoo_state, zoo_state, guard_state), c
    # all 13 behaviour tests are accounted for in every cell
    tests = next(s for s in cell["probes"]["steps"] if s["name"] == "behavior")["result"]["tests"]
    assert [t["id"][:2] for t in tests] == [f"{i:02d}" for i in range(1, 14)]
    outcomes = {t["id"][:2]: t["outcome"] for t in tests}
    guarded = unsloth == G
    assert outcomes["01"] == "pass"
    assert outcomes["02"] == ("fail" if (zoo, guarded) == (Z_OLD, False) else "pass")
    assert outcomes["11"] == outcomes["12"] == ("pass" if guarded else "n/a")
    assert outcomes["13"] == ("pass" if guarded and zoo != Z_OLD else "n/a")
    if guarded:
        assert c["behavior"]["failed"] == 0 and c["behavior"]["passed"] + c["behavior"]["na"] == 13


def test_evidence_recorded(default_run) -> None:
    _, out = default_run
    old = json.loads((out / "cells" / f"{U}__{Z_OLD}" / "cell.json").read_text())
    # the skew needs overrides: a plain resolve refuses it
    assert old["admissible"]["value"] is False and "unsloth-zoo" in old["admissible"]["message"]
    names = {d["name"].lower().replace("_", "-"): d for d in old["installed"]}
    assert names["unsloth-zoo"]["version"] == "2026.9.3" and names["unsloth"]["version"] == "2026.10.9"
    assert len(names["unsloth-zoo"]["wheel_sha256"]) == 64
    assert old["builds"]["zoo"]["digest"] == names["unsloth-zoo"]["wheel_sha256"]
    assert old["torch"]["version"]
    runtime = next(s for s in old["probes"]["steps"] if s["name"] == "runtime")["result"]
    # on CPU the vulnerable kernel gives a NaN loss with finite gradients: both recorded apart
    assert runtime["outcome"]["loss_finite"] is False and runtime["outcome"]["grads_finite"] is True
    assert runtime["outcome"]["grad_fn"] == "UnslothFusedLossBackward"
    guard = next(s for s in old["probes"]["steps"] if s["name"] == "guard")["result"]
    assert guard["forward"]["original"] is True and guard["all_masked_finite"] is False
    assert {s["name"] for s in old["steps"]} >= {"install", "admissibility", "probes", "probe:runtime", "probe:guard"}
    # probes ran in the cell's own working directory: unsloth's generated code stays there
    assert (out / "cells" / f"{U}__{Z_OLD}" / "work" / "probes.log").is_file()
    assert not (ROOT / "unsloth_compiled_cache").exists()


def test_backports_keep_the_base_version_but_not_its_digest(default_run) -> None:
    _, out = default_run
    cells = by_id(report_of(out))
    fixed = cells[f"{U}__{Z_FIX}"]["builds"]["zoo"]
    plain = cells[f"{U}__{Z_OLD}"]["builds"]["zoo"]
    assert fixed["installed_version"] == plain["installed_version"] == "2026.9.3"
    assert fixed["digest"] != plain["digest"]
    guard = cells[f"{G}__{Z_OLD}"]
    marker = next(d for d in guard["installed"] if d["name"] == "unsloth")["backport"]
    assert marker["backport"] == "unsloth-guard" and guard["builds"]["unsloth"]["installed_version"] == "2026.10.9"
    replaced = next(s for s in guard["probes"]["steps"] if s["name"] == "guard")["result"]
    assert replaced["forward"]["original"] is False and replaced["all_masked_finite"] is True


VOLATILE = {"generated", "started", "finished", "seconds", "duration_s", "timings", "log_tail", "executable"}


def normalize(value: Any, roots: list[tuple[str, str]]) -> Any:
    """Drop timings; replace run-specific directories with placeholders."""
    if isinstance(value, dict):
        return {k: normalize(v, roots) for k, v in value.items()
                if k not in VOLATILE and not k.endswith("_s")}
    if isinstance(value, list):
        return [normalize(v, roots) for v in value]
    if isinstance(value, str):
        for path, label in roots:
            value = value.replace(path, label)
    return value


def test_sharded_and_merged_equals_unsharded(default_run, tmp_path: Path) -> None:
    proc, out = default_run
    assert proc.returncode == 0, explain(proc)
    shards = []
    for k in (1, 2):
        d, envs = tmp_path / f"shard{k}", tmp_path / f"envs{k}"
        run = run_nox(envs, "-s", "matrix", out=d, SKEWMATRIX_SHARD=f"{k}/2")
        assert run.returncode == 0, explain(run)
        assert len(report_of(d)["cells"]) == 3
        shards.append((d, envs))
    merged = tmp_path / "merged"
    run = run_nox(tmp_path / "envs-merge", "-s", "report", "--", str(shards[0][0]), str(shards[1][0]), out=merged)
    assert run.returncode == 0, explain(run)
    whole_roots = [(str(out), "<OUT>"), (str(Path(out).parent), "<TMP>")]
    a = normalize(report_of(out), whole_roots)
    b = normalize(report_of(merged), [(str(shards[0][0]), "<OUT>"), (str(shards[1][0]), "<OUT>")])
    # env locations differ per run: compare with them removed
    a, b = (json.loads(json.dumps(x).replace("default-envs", "ENVS")) for x in (a, b))
    assert a["cells"] and [c["cell_id"] for c in a["cells"]] == [c["cell_id"] for c in b["cells"]]
    for ca, cb in zip(a["cells"], b["cells"], strict=True):
        assert ca["classification"] == cb["classification"], ca["cell_id"]
        assert ca["builds"]["unsloth"]["digest"] == cb["builds"]["unsloth"]["digest"]
        assert ca["builds"]["zoo"]["digest"] == cb["builds"]["zoo"]["digest"]
        assert [(d["name"], d["version"], d["tree_sha256"]) for d in ca["installed"]] == \
            [(d["name"], d["version"], d["tree_sha256"]) for d in cb["installed"]]
    assert {k: v for k, v in a.items() if k != "cells"} == {k: v for k, v in b.items() if k != "cells"}
