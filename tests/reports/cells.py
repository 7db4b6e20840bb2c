"""Canonical report dicts of schema ``skewmatrix.report/2``, written by hand for the renderer tests.

Two made-up checks stand in for the registry (``toy-loss-masked-nan`` and
``cpu-ops-empty-batch``): the renderers must take every word about a check
from the report, so the tests use checks no renderer could know. Every
verdict here is written out by hand (states, reasons, labels); the helpers
only assemble the report around them (grid, summary, gate) the way
``reports.model.build_report`` lays a report out.
"""

from __future__ import annotations

import copy
from typing import Any

REPORT_SCHEMA = "skewmatrix.report/2"
CELL_SCHEMA = "skewmatrix.cell/2"
FAILING = ("broken", "error", "missing")
GUARD_STATES = ("activates", "no-ops", "missing", "not-needed", "broken", "error")


def check_info(cid: str, title: str, hazard: str, kernel: str, fix_hint: str) -> dict[str, Any]:
    return {
        "id": cid, "title": title, "hazard": hazard, "kernel": kernel,
        "zoo_meaning": {"vulnerable": f"{title}: the all-masked loss is NaN",
                        "fixed": f"{title}: the all-masked loss is finite",
                        "absent": f"{title}: this zoo has no such kernel",
                        "inconsistent": "the detectors disagree (investigate)",
                        "unknown": "a detector failed; see the reason"},
        "guard_meaning": {"activates": "a guard fixes it", "no-ops": "a guard stays idle",
                          "missing": "nothing fixes it: NaN reaches users", "not-needed": "nothing to fix",
                          "broken": "a guard misbehaves", "error": "no verdict"},
        "fix_hint": fix_hint,
    }


LOSS = check_info("toy-loss-masked-nan", "Toy fused loss", "a fully masked batch makes the toy loss NaN",
                  "toy_zoo.loss.ToyFusedLoss.forward", "Upgrade toy_zoo to a release that guards the zero divisor")
CPU = check_info("cpu-ops-empty-batch", "Toy CPU loss", "an empty CPU batch makes the loss NaN",
                 "toy_zoo.cpu.ops.toy_loss", "Pass num_items_in_batch explicitly until toy_zoo guards it.")
# Their declared upstream fixes, as ``reports.model.check_table`` lists a check's ``FIX``: released for the toy
# loss, an open pull request for the CPU loss.
LOSS["upstream_fix"] = {"package": "toy_zoo", "release": "2026.10.6", "prs": [], "prs_state": "",
                        "title": "the zero divisor is guarded"}
CPU["upstream_fix"] = {"package": "toy_zoo", "release": None, "prs": ["toy/toy-zoo#7"], "prs_state": "open",
                       "title": "an empty batch gives loss 0"}
CHECKS = [LOSS, CPU]


def outcome_entry(tid: str, outcome: str, reason: str = "", title: str = "") -> dict[str, Any]:
    return {"id": tid, "title": title or f"title of {tid}", "outcome": outcome,
            "reason": reason or ("ok" if outcome == "pass" else f"why {tid}"), "duration_s": 0.25}




def behaviour_result(outcomes: dict[str, str], *, extra: dict[str, str] | None = None,
                     reasons: dict[str, str] | None = None, guard_module: str | None = None) -> dict[str, Any]:
    reasons = reasons or {}
    return {
        "schema": 1,
        "guard_found": guard_module is not None,
        "guard_module": guard_module,
        "tests": [outcome_entry(tid, o, reasons.get(tid, "")) for tid, o in outcomes.items()],
        "extra": [outcome_entry(tid, o, reasons.get(tid, "")) for tid, o in (extra or {}).items()],
    }


def train_step(n: int, labels: int, n_items: Any, raw: list[Any], logged: Any) -> dict[str, Any]:
    """One optimizer step; ``raw`` holds the raw loss of each micro-batch, as the probe records it."""
    return {"step": n, "labels_left": labels, "num_items_in_batch": n_items, "raw_loss": raw, "logged_loss": logged,
            "grad_norm": 0.5 if labels else 0.0, "nonfinite_params": 0, "kernels": {"toy_fused": 1}}


def train_result(outcome: str, first_nan_step: int | None = None) -> dict[str, Any]:
    """A GA-1 run of four steps; step 4 is fully masked (0 labels left, n_items 0)."""
    nan = "nan" if outcome == "nan-logged" else 0.0
    steps = [train_step(1, 7, 7, [5.5412], 5.5412), train_step(2, 6, 6, [5.53], 5.53),
             train_step(3, 5, 5, [5.28], 5.28), train_step(4, 0, 0, [nan], nan)]
    return {"ok": True, "outcome": outcome, "reason": f"training says {outcome}", "first_nan_step": first_nan_step,
            "route": "public entry", "trainer": "trl.SFTTrainer",
            "runs": [{"name": "ga1", "gradient_accumulation_steps": 1, "outcome": outcome,
                      "first_nan_step": first_nan_step, "steps": steps}]}


def make_step(name: str, result: dict[str, Any] | None = None, *, status: str = "ok", seconds: float = 1.0,
              reason: str | None = None, log_tail: str | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"name": name, "status": status, "seconds": seconds, "process": "raw", "returncode": 0,
                         "result": result if status == "ok" else None}
    if reason is not None:
        s["reason"] = reason
    if log_tail is not None:
        s["log_tail"] = log_tail
    return s


def section(static: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"static": {"verdict": static, "reason": f"static says {static}"}, "steps": list(steps)}


def verdict(zoo: str, guard: str, guard_reason: str, *, behavior: tuple[int, int, int, list[str], str] | None = None,
            training: dict[str, Any] | None = None, symptom: str = "", gate_fail: bool | None = None,
            reach: str | None = None) -> dict[str, Any]:
    """One check's verdict; ``behavior`` is (passed, failed, n/a, failing ids, label); no ``training``: None,
    as for a check without a training run. ``reach``: a failing state's defaults to unknown (no evidence)."""
    if reach is None and guard in FAILING:
        reach = "unknown"
    p, f, na, failing, label = behavior or (0, 0, 0, [], "")
    return {"zoo": zoo, "zoo_reason": f"both detectors: {zoo}", "static": zoo, "runtime": zoo,
            "guard": guard, "guard_reason": guard_reason,
            "behavior": {"passed": p, "failed": f, "na": na, "failing": failing, "label": label},
            "training": training,
            "symptom": symptom, "gate_fail": guard in FAILING if gate_fail is None else gate_fail,
            "reach": reach, "reach_reason": f"reach {reach}" if reach else "", "gate_warn": False}


def training(outcome: str, label: str, reason: str, first: int | None = None) -> dict[str, Any]:
    return {"outcome": outcome, "first_nan_step": first, "label": label, "reason": reason}


def make_entry(cell_id: str, *, verdicts: dict[str, dict[str, Any]], checks: dict[str, dict[str, Any]] | None,
              admissible: bool | None = False, error: dict[str, Any] | None = None,
              expect: dict[str, str] | None = None) -> dict[str, Any]:
    u, z = cell_id.split("__")
    cell: dict[str, Any] = {
        "schema": CELL_SCHEMA,
        "cell_id": cell_id,
        "matrix": "matrix/test.toml",
        "seconds": 42.0,
        "builds": {
            "unsloth": {"name": u, "package": "unsloth", "source": "pypi", "describe": "pypi 2026.10.9",
                        "version": "2026.10.9", "installed_version": "2026.10.9", "digest": "a" * 64, "details": {}},
            "zoo": {"name": z, "package": "unsloth-zoo", "source": "pypi", "describe": f"pypi {z}",
                    "version": z, "installed_version": z, "digest": "b" * 64, "details": {}},
        },
        "options": {"python": "3.11", "device": "cpu", "compile": "auto", "cpu_mode": "allow-cpu", "timeout": 1800,
                    "torch": ""},
        "steps": [{"name": "install", "seconds": 2.0, "ok": True}, {"name": "probes", "seconds": 37.0, "ok": True}],
        "admissible": {"value": admissible, "method": "uv pip compile (no overrides)",
                       "message": ("" if admissible else
                                   "  × No solution found when resolving dependencies:\n"
                                   "  ╰─▶ Because unsloth==2026.10.9 depends on unsloth-zoo>=2026.10.6 and you "
                                   f"require unsloth-zoo=={z}, we can conclude that your requirements are "
                                   "unsatisfiable.")},
        "installed": [],
        "torch": {"version": "2.12.1", "local": None},
        "error": error,
        "probes": None if error else {"schema": "skewmatrix.probes/2", "device": "cpu", "compile": "off",
                                      "cpu_mode": "allow-cpu", "python": "3.11"},
        "checks": copy.deepcopy(checks),
        "verdicts": copy.deepcopy(verdicts),  # the module's verdicts are shared; a test may edit its cell
        "gate_fail": any(v.get("gate_fail") for v in verdicts.values()),
    }
    if expect is not None:
        cell["expect"] = expect
    return cell


def make_report(cells: list[dict[str, Any]], *, checks: list[dict[str, Any]] | None = None,
                matrix: str = "matrix/test.toml", scan: dict[str, Any] | None = None) -> dict[str, Any]:
    """Lay hand-made cells out as a report: grid in first-seen order, per-check state counts, the gate."""
    checks = CHECKS if checks is None else checks
    rows: list[str] = []
    cols: list[str] = []
    for c in cells:
        u, z = c["builds"]["unsloth"]["name"], c["builds"]["zoo"]["name"]
        rows += [u] if u not in rows else []
        cols += [z] if z not in cols else []
    summary = {ch["id"]: {s: sum(c.get("verdicts", {}).get(ch["id"], {}).get("guard") == s for c in cells)
                          for s in GUARD_STATES} for ch in checks}
    report = {
        "schema": REPORT_SCHEMA, "generated": "2026-12-03T02:00:00+00:00", "matrix": matrix, "checks": checks,
        "grid": {"unsloth": rows, "zoo": cols}, "summary": summary,
        "gate": {"failing_states": list(FAILING), "failed_cells": [c["cell_id"] for c in cells if c.get("gate_fail")]},
        "cells": cells,
    }
    if scan is not None:
        report["scan"] = scan
    return report


# --- the canonical two-cell report ------------------------------------------------------------------------------

LOSS_MISSING = verdict("vulnerable", "missing", "no guard replaced the forward",
                       behavior=(2, 1, 1, ["02-after"], "2/3 (+1 n/a)"),
                       training=training("nan-logged", "nan-logged from step 4",
                                         "num_items_in_batch reached the loss as 0 on step 4", 4),
                       symptom="logged loss NaN from step 4 to the end", reach="exposed")
CPU_ABSENT = verdict("absent", "not-needed", "this zoo has no CPU backend")
LOSS_NOT_NEEDED = verdict("fixed", "not-needed", "zoo carries the fix; no guard",
                          behavior=(2, 0, 0, [], "2/2"), training=training("clean", "clean", "every step finite"))
CPU_MISSING = verdict("vulnerable", "missing", "no guard targets this kernel",
                      behavior=(3, 1, 0, ["01-none"], "3/4"),
                      symptom="loss NaN for an all-masked batch with num_items_in_batch=None")


def unreachable_cell() -> dict[str, Any]:
    """u1__z1: a plain install refuses the pair; toy-loss missing (training NaN from step 4), cpu-ops absent."""
    return make_entry("u1__z1", admissible=False, verdicts={LOSS["id"]: LOSS_MISSING, CPU["id"]: CPU_ABSENT}, checks={
        LOSS["id"]: section(
            "vulnerable",
            make_step("runtime", {"verdict": "vulnerable", "reason": "runtime says vulnerable"}, seconds=15.0),
            make_step("guard", {"forward": {"original": True}, "all_masked_finite": False,
                                "routes": {"public": {"loss": "nan", "loss_finite": False}}}, seconds=22.0),
            make_step("behavior", behaviour_result(
                {"01-before": "pass", "02-after": "fail", "03-dense": "pass", "11-idempotent": "n/a"},
                reasons={"11-idempotent": "n/a: no guard in this build"}), seconds=30.0),
            make_step("train", train_result("nan-logged", 4), seconds=9.0)),
        CPU["id"]: section("absent", make_step("runtime", {"verdict": "absent", "reason": "no cpu backend"})),
    })


def reachable_cell() -> dict[str, Any]:
    """u1__z2: a plain install admits the pair; toy-loss not-needed (training clean), cpu-ops missing."""
    return make_entry("u1__z2", admissible=True, verdicts={LOSS["id"]: LOSS_NOT_NEEDED, CPU["id"]: CPU_MISSING},
                     checks={
        LOSS["id"]: section(
            "fixed",
            make_step("runtime", {"verdict": "fixed", "reason": "runtime says fixed"}),
            make_step("guard", {"forward": {"original": True}, "all_masked_finite": True}),
            make_step("behavior", behaviour_result({"01-before": "pass", "02-after": "pass"})),
            make_step("train", train_result("clean"))),
        CPU["id"]: section(
            "vulnerable",
            make_step("runtime", {"verdict": "vulnerable", "reason": "loss nan with None"}),
            make_step("behavior", behaviour_result(
                {"01-none": "fail", "02-zero": "pass", "03-dense": "pass", "04-chunks": "pass"}))),
    })


def two_cell_report(**kwargs: Any) -> dict[str, Any]:
    return make_report([unreachable_cell(), reachable_cell()], **kwargs)


def residual_cell() -> dict[str, Any]:
    """u2__z2: toy-loss passes the gate (no-ops) while one extra probe fails: one residual failure."""
    return make_entry("u2__z2", admissible=True, verdicts={
        LOSS["id"]: verdict("fixed", "no-ops", "a guard is present and left the forward untouched",
                            behavior=(2, 0, 0, [], "2/2"), training=training("clean", "clean", "every step finite")),
        CPU["id"]: CPU_ABSENT,
    }, checks={
        LOSS["id"]: section(
            "fixed", make_step("runtime", {"verdict": "fixed", "reason": "runtime says fixed"}),
            make_step("behavior", behaviour_result({"01-before": "pass", "02-after": "pass"},
                                                   extra={"x-probe": "fail"}, guard_module="toy_unsloth.guard")),
            make_step("train", train_result("clean"))),
        CPU["id"]: section("absent", make_step("runtime", {"verdict": "absent", "reason": "no cpu backend"})),
    })


def error_cell() -> dict[str, Any]:
    """u2__z1: the build failed: no checks at all, every verdict is error."""
    err = {"kind": "build", "message": "uv pip install failed (exit 1)\nsecond line", "log_tail": "resolver failed"}
    v = verdict("unknown", "error", "build: uv pip install failed (exit 1)")
    return make_entry("u2__z1", admissible=None, error=err, verdicts={LOSS["id"]: v, CPU["id"]: v}, checks=None)


# --- raw cells for the harness tests (merge, fuzzing) ---------------------------------------------------------


def make_cell(cell_id: str = "u1__z1", *, static: str = "vulnerable", runtime: str = "vulnerable",
              original: bool = True, finite: bool = False, behavior: dict[str, Any] | None = None,
              error: dict[str, Any] | None = None, runtime_status: str = "ok",
              guard_status: str = "ok") -> dict[str, Any]:
    """A raw cell result (``skewmatrix.cell/2``, before classification) as the harness writes it.

    The evidence is the first registered check's (its id comes from the registry): the static and
    runtime detectors, the guard probe's forward identity and all-masked call, and optionally a behaviour
    step. The other checks have no section, which the report classifies as an error of that check.
    """
    from probes import checks as registry

    first = registry.infos()[0].id
    steps = [
        make_step("runtime", {"verdict": runtime, "reason": f"runtime says {runtime}"}, status=runtime_status,
                  seconds=15.0, reason=None if runtime_status == "ok" else "runtime was killed by SIGABRT"),
        make_step("guard", {"forward": {"original": original}, "all_masked_finite": finite,
                            "routes": {"public": {"loss": 0.0 if finite else "nan", "loss_finite": finite}}},
                  status=guard_status, seconds=22.0),
    ]
    if behavior is not None:
        steps.append(make_step("behavior", behavior, seconds=30.0))
    cell = make_entry(cell_id, verdicts={}, checks=None if error else {first: section(static, *steps)},
                      admissible=False, error=error)
    for key in ("verdicts", "gate_fail"):
        del cell[key]
    return cell


# --- a latent cell (issue 17): missing, but the cell's own training run stays clean ----------------------------

LATENT_REASON = ("the trainer on this cell's stack (transformers 4.52.4, TRL 0.18.2) sent num_items_in_batch=0.0 "
                 "at every fully masked micro-batch and its logged loss stayed finite")


def latent_cell() -> dict[str, Any]:
    """u1__z3: cpu-ops missing with reach latent (passes the default gate, a warning); toy-loss not-needed."""
    cpu = {**verdict("vulnerable", "missing", "nothing replaced zoo's kernel", gate_fail=False, reach="latent"),
           "reach": "latent", "reach_reason": LATENT_REASON, "gate_warn": True}
    return make_entry("u1__z3", admissible=True, verdicts={LOSS["id"]: LOSS_NOT_NEEDED, CPU["id"]: cpu}, checks={
        LOSS["id"]: section("fixed", make_step("runtime", {"verdict": "fixed", "reason": "runtime says fixed"}),
                            make_step("train", train_result("clean"))),
        CPU["id"]: section("vulnerable", make_step("runtime", {"verdict": "vulnerable", "reason": "loss nan"}),
                           make_step("behavior", behaviour_result({"01-none": "fail", "02-zero": "pass"})),
                           make_step("train", train_result("clean"))),
    })
