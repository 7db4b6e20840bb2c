"""The default matrix, built and probed for real from PyPI through `nox -s matrix`,
then again in two shards whose merge must equal it (timings and paths aside). Its guarded row reuses the
plain row's raw findings, zoo by zoo (matrix/cells/rawkey.py).

Slow (six real envs, twice): marked integration.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from matrix.spec import nox_safe
from reports.schema import validate_cell, validate_report
from tests.integration.harness import ROOT, explain, run_nox

pytestmark = pytest.mark.integration

U, G = "u2026.10.9", "u2026.10.9-guard"
Z_OLD, Z_FIX, Z_NEW = "z2026.9.3", "z2026.9.3-fix", "z2026.10.9"
FUSED, CPU = "fused-ce-masked-nan", "cpu-ce-masked-nan"
PAIR, GRPO = "pair-compat", "grpo-normalizer-nan"
# (zoo state, guard state) per check, reasoned from docs/design.md#states: zoo 2026.9.3 divides by a
# zero count (vulnerable) and has no CPU backend (absent); our zoo-fix backport guards the divisor; zoo
# 2026.10.9 carries the fused fix but its CPU kernel still sets a NaN divisor; only our guard replaces a forward.
EXPECTED = {
    (U, Z_OLD): {FUSED: ("vulnerable", "missing"), CPU: ("absent", "not-needed")},
    (U, Z_FIX): {FUSED: ("fixed", "not-needed"), CPU: ("absent", "not-needed")},
    (U, Z_NEW): {FUSED: ("fixed", "not-needed"), CPU: ("vulnerable", "missing")},
    (G, Z_OLD): {FUSED: ("vulnerable", "activates"), CPU: ("absent", "not-needed")},
    (G, Z_FIX): {FUSED: ("fixed", "no-ops"), CPU: ("absent", "not-needed")},
    (G, Z_NEW): {FUSED: ("fixed", "no-ops"), CPU: ("vulnerable", "missing")},
}
# Reach of the failing states (None for passing ones), reasoned from docs/design.md#reach: zoo
# 2026.9.3's fused kernel NaNs on the count of 0 zoo's trainer patch sends at a fully masked step (exposed);
# zoo 2026.10.9's CPU kernel NaNs only without a count, and the CPU backend's SFTTrainer sends one (latent).
REACH = {(U, Z_OLD): {FUSED: "exposed"}, (U, Z_NEW): {CPU: "latent"}, (G, Z_NEW): {CPU: "latent"}}


# The two checks added later, reasoned from their code: every pair here imports (unsloth 2026.10.9's
# import-time references resolve in zoo 2026.9.3 and 2026.10.9; our backports touch no zoo reference), so
# pair-compat is fixed / not-needed, never incompatible; with zoo 2026.9.3 (and its fix) it is `degraded`, a
# warning that passes: unsloth 2026.10.9 refers, on branches and in functions, to zoo names of its own time (the
# CPU backend `unsloth_zoo.cpu`, MLX and newer model families; read from the wheels), and `compatible` with
# 2026.10.9; zoo 2026.9.3 (and our fused fix of it) divides
# the GRPO loss by an unfloored count (vulnerable, fixed only from 2026.9.8) and nothing in either unsloth
# build floors it (missing), and the TRL these cells resolve (< 1.9) counts completion tokens before the
# truncation mask, so the GRPO run sends a positive count: latent, a warning that passes.
LATER = {(u, z): {PAIR: ("fixed", "not-needed", None),
                  GRPO: ("fixed", "not-needed", None) if z == Z_NEW else ("vulnerable", "missing", "latent")}
         for u, z in EXPECTED}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("default-out")
    proc = run_nox(tmp_path_factory.mktemp("default-envs"), "-s", "matrix", out=out)
    return proc, out


def report_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["cell_id"]: c for c in report["cells"]}


def step(cell: dict[str, Any], check: str, name: str) -> dict[str, Any]:
    return next(s for s in cell["checks"][check]["steps"] if s["name"] == name)


def test_nox_matrix_exits_zero_and_writes_every_format(default_run) -> None:
    proc, out = default_run
    # every failing cell of the default matrix is declared expected in it: a healthy run exits 0
    assert proc.returncode == 0, explain(proc)
    for name in ("report.json", "report.md", "report.html", "junit.xml"):
        assert (out / name).is_file(), name
    assert "unsloth \\ zoo" in proc.stdout


@pytest.mark.parametrize(("unsloth", "zoo"), sorted(EXPECTED))
def test_default_states(default_run, unsloth: str, zoo: str) -> None:
    _, out = default_run
    report = report_of(out)
    validate_report(report)
    cell = by_id(report)[f"{unsloth}__{zoo}"]
    validate_cell({k: v for k, v in cell.items() if k not in ("verdicts", "gate_fail")})
    assert cell["error"] is None, cell["error"]
    for check, (zoo_state, guard_state) in EXPECTED[unsloth, zoo].items():
        v = cell["verdicts"][check]
        assert (v["zoo"], v["static"], v["runtime"], v["guard"]) == (zoo_state, zoo_state, zoo_state, guard_state), v
        reach = REACH.get((unsloth, zoo), {}).get(check)
        assert v["reach"] == reach, v
        # latent passes the default gate with a warning; exposed fails it
        assert (v["gate_fail"], v["gate_warn"]) == ((reach == "exposed"), (reach == "latent")), v
    for check, (zoo_state, guard_state, reach) in LATER[unsloth, zoo].items():
        v = cell["verdicts"][check]
        assert (v["zoo"], v["guard"], v["reach"]) == (zoo_state, guard_state, reach), (check, v)
        degraded = check == PAIR and zoo != Z_NEW
        assert (v["gate_fail"], v["gate_warn"]) == (False, reach == "latent" or degraded), (check, v)
    assert cell["verdicts"][PAIR]["word"] == ("degraded" if zoo != Z_NEW else "compatible")
    # after each cell's own import, unsloth generates its SFT and GRPO trainers from TRL's source through
    # zoo's compiler; the zoo names the generated source imports unguarded (utils._get_dtype,
    # logging_utils.PatchRLStatistics, tokenizer_utils.fix_untrained_tokens, vision_utils.UnslothVisionDataCollator,
    # in unsloth 2026.10.9's models/rl.py) are all in zoo 2026.9.3 and 2026.10.9 (read from the wheels)
    made = step(cell, PAIR, "trainers")["result"]["trainers"]
    assert [(r["trainer"], r["state"], r["class"]) for r in made] == [
        ("SFT", "generated", "UnslothSFTTrainer"), ("GRPO", "generated", "UnslothGRPOTrainer")], made
    assert cell["verdicts"][PAIR]["runtime"] == "fixed"
    # all 14 behaviour tests of the first check are accounted for in every cell
    tests = step(cell, FUSED, "behavior")["result"]["tests"]
    assert [t["id"][:2] for t in tests] == [f"{i:02d}" for i in range(1, 15)]
    outcomes = {t["id"][:2]: t["outcome"] for t in tests}
    guarded = unsloth == G
    exposed = (zoo, guarded) == (Z_OLD, False)
    assert outcomes["01"] == "pass"
    assert outcomes["02"] == outcomes["14"] == ("fail" if exposed else "pass")
    assert outcomes["11"] == outcomes["12"] == ("pass" if guarded else "n/a")
    assert outcomes["13"] == ("pass" if guarded and zoo != Z_OLD else "n/a")
    v = cell["verdicts"][FUSED]
    if guarded:
        assert v["behavior"]["failed"] == 0
    # the training run: zoo 2026.9.3 unguarded turns the first fully masked step's loss into NaN, and the
    # Trainer's accumulator keeps every later logged loss NaN; everything else trains clean
    train = v["training"]
    if exposed:
        assert train["outcome"] == "nan-logged" and train["first_nan_step"] is not None, train
        assert "NaN" in v["symptom"] or "nan" in v["symptom"]
    else:
        assert train["outcome"] == "clean", train


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
    runtime = step(old, FUSED, "runtime")["result"]
    # on CPU the vulnerable kernel gives a NaN loss with finite gradients: both recorded apart
    assert runtime["outcome"]["loss_finite"] is False and runtime["outcome"]["grads_finite"] is True
    assert runtime["outcome"]["grad_fn"] == "UnslothFusedLossBackward"
    guard = step(old, FUSED, "guard")["result"]
    assert guard["forward"]["original"] is True
    assert guard["routes"]["public"]["loss_finite"] is False
    assert {s["name"] for s in old["steps"]} >= {"install", "admissibility", "probes", f"probe:{FUSED}:runtime",
                                                 f"probe:{FUSED}:guard", f"probe:{CPU}:runtime"}
    # the training run saw the trainer hand the loss a count of 0 (not None) on a fully masked step
    train = step(old, FUSED, "train")["result"]
    assert any("0" in str(n) for n in train["n_items_seen"]), train["n_items_seen"]
    # probes ran in the cell's own working directory: unsloth's generated code stays there
    assert (out / "cells" / f"{U}__{Z_OLD}" / "work" / "probes.log").is_file()
    assert not (ROOT / "unsloth_compiled_cache").exists()
    # each env holds what the index installs: from uv's cache only where the index's own answer agreed
    for path in (out / "cells").glob("*/cell.json"):
        check = json.loads(path.read_text())["install_check"]
        assert check["redo"] is False and check.get("before_redo") is None, (path, check)
        assert check["matches_index"] is (True if check["from_cache"] else None), (path, check)


def test_second_check_runtime_on_the_newest_zoo(default_run) -> None:
    _, out = default_run
    new = json.loads((out / "cells" / f"{U}__{Z_NEW}" / "cell.json").read_text())
    runtime = step(new, CPU, "runtime")["result"]
    # zoo 2026.10.9's CPU kernel: NaN loss for an all-masked batch without a count, finite gradients
    assert runtime["verdict"] == "vulnerable" and runtime["outcome"]["grads_finite"] is True
    tests = {t["id"]: t["outcome"] for t in step(new, CPU, "behavior")["result"]["tests"]}
    assert tests["c1-all-masked-none"] == "fail" and tests["c2-all-masked-zero"] == "pass"
    assert tests["c3-dense-reference"] == tests["c4-sparse-reference"] == tests["c5-chunks"] == "pass"


def test_cpu_backend_training_run_on_its_own_route(default_run) -> None:
    _, out = default_run
    new = json.loads((out / "cells" / f"{U}__{Z_NEW}" / "cell.json").read_text())
    s = step(new, CPU, "train")
    # a second `import unsloth` without UNSLOTH_ALLOW_CPU: zoo's CPU backend, its FastLanguageModel and its
    # patched SFTTrainer; the kernel ran at every step and received a count (never None) when fully masked
    assert s["status"] == "ok" and s["process"] == "cpu-backend", s
    train = s["result"]
    assert train["outcome"] == "clean" and train["kernel_calls"] > 0, train
    assert train["masked_inputs"] and "None" not in train["masked_inputs"], train["masked_inputs"]
    assert {r["gradient_accumulation_steps"] for r in train["runs"]} == {1, 2}
    # zoo 2026.9.3 has no CPU backend: the step says why it did not run
    old = json.loads((out / "cells" / f"{U}__{Z_OLD}" / "cell.json").read_text())
    assert step(old, CPU, "train")["status"] == "skipped"


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
    replaced = step(guard, FUSED, "guard")["result"]
    assert replaced["forward"]["original"] is False and replaced["routes"]["public"]["loss_finite"] is True


def test_the_raw_phase_runs_once_per_zoo(default_run) -> None:
    """The raw phase never imports unsloth, so it reads the same in both rows of a zoo column: our guard
    backport keeps unsloth's version (zoo asks only whether unsloth is there) and pulls in nothing else.
    nox runs the cells in the matrix's order, the plain row first: each guarded cell reuses the plain cell's
    raw findings for its zoo, and no plain cell reuses anything (three zoos, three digests: the zoo-fix
    backport keeps zoo's version but not its files)."""
    _, out = default_run
    cells = {cid: json.loads((out / "cells" / cid / "cell.json").read_text())
             for cid in (f"{u}__{z}" for u, z in EXPECTED)}
    digests = set()
    for zoo in (Z_OLD, Z_FIX, Z_NEW):
        plain, guarded = cells[f"{U}__{zoo}"], cells[f"{G}__{zoo}"]
        mine, theirs = plain["probes"]["raw_reuse"], guarded["probes"]["raw_reuse"]
        assert (mine["reused"], mine["from_cell"], mine["stored"]) == (False, f"{U}__{zoo}", True), mine
        assert (theirs["reused"], theirs["digest"], theirs["from_cell"]) == (True, mine["digest"], f"{U}__{zoo}")
        assert theirs["seconds_saved"] > 0
        digests.add(mine["digest"])
        for check, name in ((FUSED, "runtime"), (GRPO, "train")):
            reused, produced = step(guarded, check, name), step(plain, check, name)
            # the producer's finding, none of this cell's seconds
            assert (reused["seconds"], reused["reused_from"]) == (0.0, f"{U}__{zoo}"), reused
            assert reused["result"]["verdict" if name == "runtime" else "outcome"] == \
                produced["result"]["verdict" if name == "runtime" else "outcome"]
            assert "reused_from" not in produced
        # relocated: the guarded cell's record names its own env and directory, never the plain cell's
        text = (out / "cells" / f"{G}__{zoo}" / "cell.json").read_text()
        assert f"/cells/{U}__{zoo}/" not in text and f"/cell-{nox_safe(f'{U}__{zoo}')}/" not in text
    assert len(digests) == 3


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
        # Each shard starts from the whole run's results: its cells are reused by their digest (same builds,
        # options and probe code), so this test costs a re-materialisation, not six more probe runs, and
        # checks what sharding adds: the selection, the per-shard reports, and the merge.
        shutil.copytree(out / "cells", d / "cells", ignore=shutil.ignore_patterns("work", "build", ".lock"))
        run = run_nox(envs, "-s", "matrix", out=d, SKEWMATRIX_SHARD=f"{k}/2")
        assert run.returncode == 0, explain(run)
        mine = {c["cell_id"] for c in report_of(d)["cells"]}
        assert len(mine) == 3
        assert (run.stdout + run.stderr).count("unchanged since the last run") == 3, explain(run)
        for other in (p for p in (d / "cells").iterdir() if p.name not in mine):
            shutil.rmtree(other)  # the other shard's cells were only copied in: shards must not overlap
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
        assert ca["verdicts"] == cb["verdicts"], ca["cell_id"]
        assert ca["builds"]["unsloth"]["digest"] == cb["builds"]["unsloth"]["digest"]
        assert ca["builds"]["zoo"]["digest"] == cb["builds"]["zoo"]["digest"]
        assert [(d["name"], d["version"], d["tree_sha256"]) for d in ca["installed"]] == \
            [(d["name"], d["version"], d["tree_sha256"]) for d in cb["installed"]]
    assert {k: v for k, v in a.items() if k != "cells"} == {k: v for k, v in b.items() if k != "cells"}
