"""The guard's suite: zoo's own ``grpo_compute_loss`` is the oracle, and the guarded route must match it.

Each case is a batch, a loss type, the count the batch carries and the
number of processes. The raw process (never imports unsloth) runs every case
through zoo's function with the count as it comes: the oracle. The unsloth
process runs the same cases on the route users take: the count through
unsloth's hand-off (``handoff.py``), then zoo's function as the module
attribute callers resolve after ``import unsloth``. The two must be
bit-for-bit the same (loss, gradient of ``new``, logged KL, or the same
exception) in every case but one: where the oracle divides 0 by 0 (a count of
0 with every completion masked, on a loss type that divides by it), the
guarded route must give a loss of 0.0 that a trainer can step on: connected
to the log-probabilities where zoo's own loss is (``requires_grad``), with
``backward()`` working and every gradient 0.

There are several guarded routes (``phases.py``): zoo's module attribute,
and the loss functions of the ``UnslothGRPOTrainer`` unsloth generates, which
run their own copy of zoo's source. Every case runs on every route, and a
failure names its route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .judge import LOSS_TYPES, finite

TITLES = {
    "s1-zero-all-masked": "every completion masked, count tensor(0.) and 0, every loss type: 0 / 0 becomes 0.0, "
                          "anything else as zoo",
    "s2-positive-counts": "positive counts (1, 3, 12; tensor and number; 1 and 2 processes): exactly zoo's",
    "s3-none-count": "no count (None): exactly zoo's, an exception included",
    "s4-nan-stays": "a NaN log-probability at a kept token: zoo's NaN, not hidden",
    "s5-kl-one-masked": "KL on, one completion masked out of two: zoo's loss, gradients and logged KL",
    "s6-fractional-normaliser": "count tensor(1) over 2 processes (a per-process normaliser of 0.5), every loss "
                                "type: exactly zoo's",
    "s7-errors-propagate": "zoo's kernel raises (an out-of-memory RuntimeError, a TypeError) on a batch with "
                           "completions left, every loss type: the same exception, no answer",
}
COUNTS = {"tensor(0.)": ("tensor", 0.0), "0": ("int", 0), "tensor(1.)": ("tensor", 1.0), "3": ("int", 3),
          "tensor(3.)": ("tensor", 3.0), "tensor(12.)": ("tensor", 12.0), "None": ("none", None),
          "tensor(1)": ("long", 1)}  # TRL's own form: the gathered sum of int64 completion lengths


@dataclass(frozen=True)
class Case:
    test: str
    loss_type: str
    rows: tuple[bool, bool]
    count: str
    processes: int = 1
    beta: float = 0.0
    nan_at_kept: bool = False
    seed: int = 11
    fault: str = ""  # "oom" / "type": zoo's kernel raises that (kernel.inject)

    @property
    def key(self) -> str:
        return (f"{self.loss_type}|{''.join('k' if r else 'm' for r in self.rows)}|{self.count}|p{self.processes}"
                f"|b{self.beta}|{'nan' if self.nan_at_kept else '-'}" + (f"|{self.fault}" if self.fault else ""))


def cases() -> list[Case]:
    out = [Case("s1-zero-all-masked", lt, (False, False), c) for lt in LOSS_TYPES for c in ("tensor(0.)", "0")]
    out += [Case("s2-positive-counts", lt, rows, c, p) for lt in LOSS_TYPES
            for rows, c, p in (((True, True), "tensor(3.)", 1), ((True, False), "3", 1),
                               ((True, True), "tensor(12.)", 2), ((True, False), "tensor(1.)", 1),
                               ((False, False), "tensor(3.)", 1))]
    out += [Case("s3-none-count", lt, rows, "None") for lt in LOSS_TYPES for rows in ((True, True), (False, False))]
    out += [Case("s4-nan-stays", lt, (True, True), "tensor(3.)", nan_at_kept=True) for lt in ("dapo", "grpo", "cispo")]
    out += [Case("s5-kl-one-masked", lt, (True, False), "3", beta=0.04) for lt in ("dapo", "grpo")]
    out += [Case("s6-fractional-normaliser", lt, rows, "tensor(1)", 2) for lt in LOSS_TYPES
            for rows in ((True, False), (True, True))]
    out += [Case("s7-errors-propagate", lt, (True, True), "tensor(3.)", fault=f) for lt in LOSS_TYPES
            for f in ("oom", "type")]
    return out


def count_value(name: str) -> Any:
    import torch

    kind, value = COUNTS[name]
    if kind == "long":
        return torch.tensor(value, dtype=torch.int64)
    return torch.tensor(value) if kind == "tensor" else value


def batch_of(case: Case) -> Any:
    import torch

    from . import kernel

    b = kernel.make_batch(case.loss_type, case.rows, count_value(case.count), seed=case.seed, beta=case.beta)
    if case.nan_at_kept:
        with torch.no_grad():
            b.new[0, 0] = float("nan")
    b.extra["num_processes"] = case.processes
    if case.fault:
        kernel.inject(b, case.fault)
    return b


def _run(case: Case, count: Any, fn: Any) -> dict[str, Any]:
    from . import kernel

    try:
        return kernel.outcome(batch_of(case), fn, count=count)
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc).splitlines()[0][:200] if str(exc) else ""}


def oracle(fn: Any = None) -> dict[str, dict[str, Any]]:
    """Every case through zoo's function (``fn``: zoo's own by default), the count as it comes."""
    return {c.key: _run(c, count_value(c.count), fn) for c in cases()}


def guarded(route: Any, fn: Any = None) -> dict[str, list[dict[str, Any]]]:
    """Every case on one guarded route: ``route(count, case, batch)`` gives the counts ``fn`` receives."""
    out: dict[str, list[dict[str, Any]]] = {}
    for c in cases():
        try:
            handed = route(count_value(c.count), c, batch_of(c))
        except Exception as exc:
            out[c.key] = [{"error": f"hand-off raised {type(exc).__name__}", "message": str(exc)[:200]}]
            continue
        out[c.key] = [_run(c, h, fn) for h in handed]
    return out


SAME = ("error", "loss_hex", "grad_hex", "kl", "requires_grad")


def _differs(got: dict[str, Any], want: dict[str, Any]) -> str:
    bad = [k for k in SAME if got.get(k) != want.get(k)]
    if not bad:
        return ""
    return (f"{', '.join(bad)} differ: got loss {got.get('loss')} kl {got.get('kl')} {got.get('error') or ''}, "
            f"zoo gives loss {want.get('loss')} kl {want.get('kl')} {want.get('error') or ''}").strip()


def zero_over_zero(case: Case, want: dict[str, Any]) -> bool:
    """The one case the guard may differ in: the oracle is not finite on a zero count with every completion masked."""
    return case.test == "s1-zero-all-masked" and "error" not in want and not finite(want)


def compare(case: Case, got: dict[str, Any], want: dict[str, Any]) -> str:
    """'' when the guarded outcome is right for this case, else what is wrong."""
    if zero_over_zero(case, want):
        if not finite(got):
            return f"0 / 0 still not finite: loss {got.get('loss')} {got.get('error') or ''}".strip()
        if got.get("loss") != 0.0:
            return f"0 / 0 became loss {got.get('loss')}, not 0.0"
        if want.get("requires_grad", True) and not got.get("requires_grad", True):
            return ("0 / 0 became a 0.0 with no autograd graph (zoo's loss has one): a trainer's backward() "
                    "raises on it")
        if want.get("requires_grad", True) and got.get("grad_reaches_new") is False:
            return "0 / 0 became a 0.0 whose graph does not reach the log-probabilities: no gradient to step on"
        if not got.get("grads_zero", True):
            return "0 / 0 became 0.0 but its gradients are not all 0"
        return ""
    if case.fault and "error" in want and "error" not in got:
        return (f"zoo's kernel raised {want['error']} ({case.fault} injected) but the guarded call answered "
                f"loss {got.get('loss')}: the exception was swallowed")
    return _differs(got, want)


def tests(oracle_out: dict[str, dict[str, Any]],
          guarded_out: dict[str, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """The suite's tests, one per group: pass when every case of the group is right on every route
    (``guarded_out``: route name -> case key -> outcomes); a failure names its route."""
    problems: dict[str, list[str]] = {t: [] for t in TITLES}
    seen: dict[str, int] = dict.fromkeys(TITLES, 0)
    for c in cases():
        want = oracle_out.get(c.key)
        if want is None:
            problems[c.test].append(f"{c.key}: no oracle outcome")
            continue
        seen[c.test] += 1
        for route, outs in guarded_out.items():
            for got in outs.get(c.key, [{"error": "not run"}]):
                why = compare(c, got, want)
                if why:
                    problems[c.test].append(f"{c.loss_type} count {c.count} ({c.key}) through {route}: {why}")
    routes = f" on {len(guarded_out)} route(s)"
    return [{"id": t, "title": title, "outcome": "fail" if problems[t] else "pass",
             "reason": "; ".join(problems[t][:3]) + (f" (+{len(problems[t]) - 3} more)" if len(problems[t]) > 3 else "")
             if problems[t] else f"{seen[t]} case(s) as expected{routes}", "duration_s": 0.0, "details": {}}
            for t, title in TITLES.items()]
