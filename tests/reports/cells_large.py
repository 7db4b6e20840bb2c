"""An 18-cell report the size of the mutants matrix (nine guard builds x two zoo builds), with evidence as long
as a real run's: the report.html budget is measured on it (``test_html_size``, ``test_browser``).

Written by hand to the shapes and lengths of real cell JSONs (a default-matrix cell JSON is 145-205 KB): 104
installed distributions with digests, six guard-probe routes, 14 behaviour tests and 4 extras with titles,
reasons and details, two training runs of 8 and 4 steps, a detector's result of several KB. Each row's guard
breaks one or two behaviour tests on the vulnerable zoo (``broken``) and stays idle on the fixed one
(``no-ops``); the second check is absent on the vulnerable zoo and ``missing`` with reach latent (a warning) on
the fixed one.
"""

from __future__ import annotations

from typing import Any

from tests.reports.cells import CPU, LOSS, make_entry, make_report, make_step, section, training, verdict

ROWS = [f"mut-{i}" for i in range(1, 10)]
COLUMNS = ("z-vuln", "z-fixed")
WORDS = "the all-masked micro-batch reaches the divisor with a zero count on this route"


def test_entry(tid: str, outcome: str) -> dict[str, Any]:
    reason = {"pass": f"ok: {WORDS}, and the guard answers 0.0 with finite zero gradients",
              "fail": f"loss nan: {WORDS}; gradients nan; the guard left the call to zoo",
              "n/a": "n/a: run with --compile on (costs about a minute on CPU)"}[outcome]
    return {"id": tid, "title": f"{tid}: all-masked through this route gives loss 0.0 and finite gradients",
            "outcome": outcome, "reason": reason, "duration_s": 0.031,
            "details": {"cases": {f"case_{k}": {"loss": "nan" if outcome == "fail" else 0.0, "grad_finite": True}
                                  for k in range(6)}}}


def behaviour(failing: set[str]) -> dict[str, Any]:
    tests = [test_entry(f"{i:02d}-case", "fail" if f"{i:02d}-case" in failing else "pass") for i in range(1, 15)]
    extra = [test_entry("x-public", "pass"), test_entry("x-adapter", "pass"), test_entry("x-compiled", "n/a"),
             test_entry("x-overwrite", "n/a")]
    return {"schema": 1, "guard_found": True, "guard_module": "toy_unsloth.toy_guard", "tests": tests, "extra": extra}


def train_run(name: str, ga: int, steps: int) -> dict[str, Any]:
    rows = [{"step": n, "labels_left": 0 if n % 4 == 0 else 13,
             "num_items_in_batch": f"tensor({0 if n % 4 == 0 else 13})",
             "raw_loss": [0.0 if n % 4 == 0 else 4.2113] * ga, "logged_loss": 0.0 if n % 4 == 0 else 4.2113,
             "grad_norm": 0.0 if n % 4 == 0 else 2.5931, "nonfinite_params": 0, "kernels": {"ToyFusedLossBackward": ga}}
            for n in range(1, steps + 1)]
    return {"name": name, "gradient_accumulation_steps": ga, "outcome": "clean", "first_nan_step": None, "steps": rows}


def loss_section(failing: set[str]) -> dict[str, Any]:
    routes = {r: {"loss": 0.0, "loss_finite": True, "grads_finite": True, "grad_fn": "ToyFusedLossBackward"}
              for r in ("adapter", "adapter-default", "function", "function-default", "public", "public-default")}
    runtime = {"verdict": "vulnerable", "reason": ("all-masked batch: NaN for n_items=None, 0, 0.0, tensor(0) (loss "
                                                   "nan, gradients finite); finite for none of the zero/None forms; "
                                                   "not judged: n_items=tensor([0]) (raises with a positive count "
                                                   "too, so this zoo does not take that form)"),
               "probes": [{"n_items": repr(x), "loss": "nan", "grads": "finite", "seconds": 0.41} for x in range(40)]}
    s = section("vulnerable",
                make_step("runtime", runtime, seconds=12.3),
                make_step("guard", {"forward": {"original": False, "module": "toy_unsloth.toy_guard", "line": 261,
                                                "file": "/tmp/envs/cell/lib/python3.11/site-packages/toy_unsloth/"
                                                        "toy_guard.py"},
                                    "all_masked_finite": True, "routes": routes}, seconds=0.1),
                make_step("behavior", behaviour(failing), seconds=0.4),
                make_step("train", {"ok": True, "outcome": "clean", "reason": "every step finite", "route": "public",
                                    "trainer": "trl.SFTTrainer 0.24.0",
                                    "runs": [train_run("ga1", 1, 8), train_run("ga2", 2, 4)]}, seconds=1.0))
    s["static"] = {"verdict": "vulnerable", "evidence_line": 240,
                   "file": "/tmp/envs/cell/lib/python3.11/site-packages/toy_zoo/loss.py",
                   "reason": ("the label count from line 240 and the caller's count (parameter 'n_items') reach the "
                              "division at line 131 in toy_loss() with no zero guard on some path")}
    return s


def cell(row: str, column: str, failing: set[str]) -> dict[str, Any]:
    broken = column == "z-vuln"
    label = f"{14 - len(failing)}/16 (+2 n/a)" if broken else "16/16 (+2 n/a)"
    loss = verdict("vulnerable" if broken else "fixed", "broken" if broken else "no-ops",
                   (f"behaviour tests failing: {', '.join(sorted(failing))}" if broken
                    else "a guard is present and left the forward untouched"),
                   behavior=(14 - len(failing), len(failing), 2, sorted(failing), label),
                   training=training("clean", "clean", "ga1: logged loss finite at every step; fully masked: step 4 "
                                     "logged 0.0 with num_items_in_batch=tensor(0), step 8 logged 0.0"))
    cpu = ({**verdict("vulnerable", "missing", "nothing replaced the kernel", gate_fail=False, reach="latent"),
            "gate_warn": True} if not broken else verdict("absent", "not-needed", "no CPU backend in this zoo"))
    e = make_entry(f"{row}__{column}", admissible=True, verdicts={LOSS["id"]: loss, CPU["id"]: cpu},
                   checks={LOSS["id"]: loss_section(failing if broken else set()),
                           CPU["id"]: section("absent", make_step("runtime", {"verdict": "absent",
                                                                             "reason": "no cpu backend"}))},
                   expect={LOSS["id"]: "broken"} if broken else None)
    e["installed"] = [{"name": f"dist-{k:03d}", "version": f"1.{k}.0", "tree_sha256": f"{k:064x}",
                       "wheel_sha256": f"{k + 1000:064x}"} for k in range(100)] + [
        {"name": n, "version": v, "tree_sha256": "c" * 64, "wheel_sha256": "d" * 64}
        for n, v in (("unsloth", "2026.10.9"), ("unsloth_zoo", "2026.9.3"), ("torch", "2.12.1"), ("trl", "0.24.0"))]
    return e


def mutants_size_report() -> dict[str, Any]:
    """18 cells: each row's guard fails one or two behaviour tests on the vulnerable zoo."""
    cells = [cell(row, col, {f"{i % 14 + 1:02d}-case", f"{(i * 5) % 14 + 1:02d}-case"})
             for i, row in enumerate(ROWS) for col in COLUMNS]
    return make_report(cells, matrix="matrix/mutants.toml")
