"""The behaviour suite for whatever fix the tree carries: in the model, in the loop, or none.

Model-level tests call the tree's tiny ``GPT`` directly; loop-level tests run
the script's own micro-step loop and optimizer step (:mod:`.loop`) on it, so a
fix in ``chat_sft.py`` is tested as written.

Normalization (``n6``): nanochat divides each micro-batch's loss -- the mean
over its own valid targets -- by ``grad_accum_steps`` before ``backward()``.
A fully masked micro-batch has nothing to learn, so it must add exactly zero:
the step's gradient must equal (1 / GA) x the sum of the other micro-batches'
gradients, i.e. a run where the masked micro-batch's slot is empty (not a run
at GA - 1, which would rescale the others). Both positions (first, last) are
checked.

The loop tests judge what the script does and prints: n4 runs a step on a
partly masked batch first, then the all -1 step, and looks at the gradients
``optimizer.step()`` is given (zero, never the previous step's); n7 judges the
loss the script prints (its EMA, computed by its own statements), not the
loop variable, which a right fix may leave None on a step with no loss. A loop
the harness cannot lift or run makes the loop tests ``n/a`` (the real run
judges it), not failures.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import loop
from . import model as tiny

TITLES = {
    "n1-partial-reference": "a partially masked batch: GPT.forward's loss equals torch's cross-entropy on its logits",
    "n2-normal-backward": "a batch with no -1 target: finite loss with a grad_fn; backward gives finite, non-zero "
                          "gradients",
    "n3-all-masked-micro-batch": "GA 2, one micro-batch all -1, through the script's loop and optimizer step: its loss "
                                 "is finite or never reaches backward(); nothing raises; weights stay finite",
    "n4-all-masked-step": "GA 1, after a step on a partly masked batch, the step's only micro-batch all -1, through "
                          "the script's loop and optimizer step: its loss is finite or never reaches backward(); "
                          "nothing raises; the optimizer steps with a zero gradient (or not at all), never the "
                          "previous step's; weights stay finite",
    "n5-other-reductions": "reduction='sum' and 'none' unchanged (value, shape, grad_fn) on partial and all -1 targets",
    "n6-masked-adds-nothing": "GA 2 with one all -1 micro-batch (first or last): the step's gradients equal the other "
                              "micro-batch's alone, divided by GA (nanochat's normalization)",
    "n7-logged-loss-finite": "the loss the script prints (its EMA, from the script's own statements) stays finite "
                             "when the last micro-step (GA 2) or the only one (GA 1, after a partly masked step) "
                             "is all -1",
}
Problems = list[str]


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-6, equal_nan=True))


class Suite:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.lifted: loop.Lifted | None = None
        self.lift_error: str | None = None
        try:
            self.lifted = loop.lift(root / "scripts" / "chat_sft.py")
        except (loop.NotLiftable, SyntaxError, OSError) as exc:
            self.lift_error = f"{type(exc).__name__}: {exc}"
        self.runs: dict[str, dict[str, Any]] = {}

    def fresh(self) -> Any:
        return tiny.build(self.root)

    def looped(self, key: str, kinds: list[str], previous: list[str] | None = None) -> dict[str, Any]:
        """The script's own step over micro-batches of ``kinds``, after one over ``previous`` (memoised: n7 reads
        n3's and n4's runs)."""
        if key not in self.runs:
            if self.lifted is None:
                raise NotApplicableTest(f"the harness cannot lift the script's loop: {self.lift_error}")
            batches = [tiny.batch(k, seed=10 + i) for i, k in enumerate(kinds)]
            before = [tiny.batch(k, seed=20 + i) for i, k in enumerate(previous or [])]
            try:
                self.runs[key] = loop.run(self.lifted, self.fresh(), batches, previous=before)
            except loop.NotLiftable as exc:
                raise NotApplicableTest(f"the harness cannot run the script's loop: {exc}") from exc
        return self.runs[key]

    # ---------------------------------------------------------------- model level

    def n1(self) -> tuple[Problems, dict[str, Any]]:
        m = self.fresh()
        x, y = tiny.batch("partial")
        got, want = m(x, y), tiny.reference(m, x, y)
        details = {"loss": tiny.describe(got), "reference": tiny.describe(want)}
        return ([] if close(got.detach(), want.detach()) else [f"loss {details['loss']} vs reference "
                                                               f"{details['reference']}"]), details

    def n2(self) -> tuple[Problems, dict[str, Any]]:
        m = self.fresh()
        loss = m(*tiny.batch("dense"))
        details: dict[str, Any] = {"loss": tiny.describe(loss)}
        if loss.grad_fn is None or not math.isfinite(float(loss.detach())):
            return [f"loss {details['loss']}"], details
        loss.backward()
        g = [p.grad for p in m.parameters() if p.grad is not None]
        details.update(with_grad=len(g), finite=all(bool(torch.isfinite(t).all()) for t in g),
                       nonzero=sum(bool((t != 0).any()) for t in g))
        problems = [] if g and details["finite"] and details["nonzero"] else [f"gradients: {details}"]
        return problems, details

    def n5(self) -> tuple[Problems, dict[str, Any]]:
        m = self.fresh()
        if "loss_reduction" not in inspect.signature(m.forward).parameters:
            raise NotApplicableTest("GPT.forward has no loss_reduction parameter")
        problems, details = [], {}
        for red in ("sum", "none"):
            for kind in ("partial", "all_masked"):
                x, y = tiny.batch(kind)
                got, want = m(x, y, loss_reduction=red), tiny.reference(m, x, y, red)
                details[f"{red}/{kind}"] = {"got": tiny.describe(got), "reference": tiny.describe(want)}
                if not close(got.detach(), want.detach()):
                    problems.append(f"{red} on {kind}: got {tiny.describe(got)}, torch gives {tiny.describe(want)}")
                elif (got.grad_fn is None) != (want.grad_fn is None):
                    problems.append(f"{red} on {kind}: no grad_fn (a caller's backward() raises)")
        return problems, details

    # ---------------------------------------------------------------- loop level

    @staticmethod
    def masked_handled(run: dict[str, Any]) -> Problems:
        problems = []
        if run["error"]:
            e = run["error"]
            problems.append(f"{e['where']} raised {e['type']}: {e['message']} ({e['at']})")
        masked_calls = [c for c in run["model_calls"] if c["valid_targets"] == 0]
        problems += [f"the all -1 micro-batch's loss {c['loss'].get('value')} reached backward()" for c in masked_calls
                     if not c["loss"].get("finite") and c.get("backward")]
        bad = [n for n, g in run["grads"].items() if g is not None and not bool(torch.isfinite(g).all())]
        if bad:
            problems.append(f"non-finite gradients in {len(bad)} parameter(s), e.g. {bad[0]}")
        if run["nonfinite_params"]:
            problems.append(f"{run['nonfinite_params']} non-finite weight value(s) after the step")
        return problems

    @staticmethod
    def summary(run: dict[str, Any]) -> dict[str, Any]:
        return {"error": run["error"], "model_calls": run["model_calls"], "logged": run["logged"],
                "masked_micro_batches": run["masked_micro_batches"], "nonfinite_params": run["nonfinite_params"],
                "params_without_grad": sum(g is None for g in run["grads"].values())}

    def n3(self) -> tuple[Problems, dict[str, Any]]:
        run = self.looped("ga2-last-masked", ["partial", "all_masked"])
        return self.masked_handled(run), self.summary(run)

    def n4(self) -> tuple[Problems, dict[str, Any]]:
        run = self.looped("ga1-masked", ["all_masked"], previous=["partial"])
        problems = self.masked_handled(run)
        stepped = run.get("stepped_grads")
        moved = [n for n, g in (stepped or {}).items() if g is not None and bool((g != 0).any())]
        if moved and not run["error"]:
            problems.append(f"the optimizer stepped with a non-zero gradient in {len(moved)} parameter(s), e.g. "
                            f"{moved[0]}, on a step whose only micro-batch is all -1: the previous step's gradient "
                            "(or one no micro-batch of this step made)")
        return problems, {**self.summary(run), "optimizer_stepped": stepped is not None,
                          "nonzero_stepped_grads": moved[:5]}

    def n6(self) -> tuple[Problems, dict[str, Any]]:
        problems, details = [], {}
        ref = self.fresh()
        x, y = tiny.batch("partial", seed=10)
        (ref(x, y) / 2).backward()
        want = tiny.grads(ref)
        for name, kinds in (("masked-last", ["partial", "all_masked"]), ("masked-first", ["all_masked", "partial"])):
            if self.lifted is None:
                raise NotApplicableTest(f"the harness cannot lift the script's loop: {self.lift_error}")
            batches = [tiny.batch(k, seed=10) if k == "partial" else tiny.batch(k, seed=11) for k in kinds]
            try:
                run = loop.run(self.lifted, self.fresh(), batches, step_optimizer=False)
            except loop.NotLiftable as exc:
                raise NotApplicableTest(f"the harness cannot run the script's loop: {exc}") from exc
            if run["error"]:
                problems.append(f"{name}: {run['error']['where']} raised {run['error']['type']}: "
                                f"{run['error']['message']}")
                details[name] = {"error": run["error"]}
                continue
            off = [n for n, g in run["grads"].items()
                   if not close(torch.zeros_like(want[n]) if g is None else g,
                                torch.zeros_like(g) if want[n] is None else want[n])]  # type: ignore[arg-type]
            details[name] = {"parameters": len(want), "differing": off[:5]}
            if off:
                problems.append(f"{name}: {len(off)} parameter gradient(s) differ from the unmasked micro-batch's "
                                f"/ GA, e.g. {off[0]}")
        return problems, details

    def n7(self) -> tuple[Problems, dict[str, Any]]:
        """What the script prints (``loss: <EMA>``), made by its own statements; where it prints no loss, the
        loop's own variable. The verdict sets each failing case beside the real run's log (``cases``)."""
        problems, cases = [], {}
        for key, kinds, previous in (("ga2-last-masked", ["partial", "all_masked"], None),
                                     ("ga1-masked", ["all_masked"], ["partial"])):
            run = self.looped(key, kinds, previous)
            err, log_err = run["error"], run.get("log_error")
            case: dict[str, Any] = {"printed": run.get("printed_loss"), "kept": run["logged"], "ok": False}
            if err and err["where"] != "optimizer step":
                problems.append(f"{key}: {err['where']} raised before the loss could be logged ({err['type']})")
            elif log_err:
                problems.append(f"{key}: the script's logging raised {log_err['type']}: {log_err['message']} "
                                f"({log_err['at']})")
            elif run.get("printed_loss") is not None and not run["printed_loss"].get("finite"):
                problems.append(f"{key}: the printed loss is {run['printed_loss'].get('value')}")
            elif run.get("printed_loss") is None and not run["logged"].get("finite"):
                problems.append(f"{key}: the logged loss is {run['logged'].get('value', run['logged'])} (the script "
                                "prints no loss: its loop variable stands)")
            else:
                case["ok"] = True
            cases[key] = case
        return problems, {"cases": cases}


class NotApplicableTest(Exception):
    pass


def run(root: Path) -> dict[str, Any]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    suite = Suite(root)
    cases: dict[str, Callable[[], tuple[Problems, dict[str, Any]]]] = {
        "n1-partial-reference": suite.n1, "n2-normal-backward": suite.n2, "n3-all-masked-micro-batch": suite.n3,
        "n4-all-masked-step": suite.n4, "n5-other-reductions": suite.n5, "n6-masked-adds-nothing": suite.n6,
        "n7-logged-loss-finite": suite.n7}
    tests = []
    try:
        for test_id, fn in cases.items():
            start = time.perf_counter()
            try:
                problems, details = fn()
                outcome, reason = ("fail", "; ".join(problems)) if problems else ("pass", "ok")
            except NotApplicableTest as exc:
                outcome, reason, details = "n/a", f"n/a: {exc}", {}
            except Exception as exc:
                outcome, reason, details = "fail", f"crashed: {type(exc).__name__}: {exc}", {}
            tests.append({"id": test_id, "title": TITLES[test_id], "outcome": outcome, "reason": reason,
                          "duration_s": round(time.perf_counter() - start, 3), "details": details})
    finally:
        torch.set_num_threads(threads)
    return {"tests": tests, "extra": [], "loop_lines": None if suite.lifted is None else list(suite.lifted.lines),
            "lift_error": suite.lift_error}
