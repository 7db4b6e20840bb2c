"""The phases of this check inside a cell (contract: ``probes/checks/__init__.py``).

* raw process (never imports unsloth): ``runtime``, the runtime detector
  (``runtime.py``), which also hands the unsloth process the oracle -- every
  suite case through zoo's own function -- and the function's fingerprint;
  ``train``, a real GRPO run with TRL's ``GRPOTrainer`` and zoo's loss
  (``train.py``).
* unsloth process: ``guard`` (on each route: the count as unsloth's
  ``compute_loss`` hands it on, whether the loss function is still zoo's
  own, and the all-masked call) and ``behavior``, the suite (``suite.py``)
  on every route against the oracle. The routes: unsloth's hand-off into
  zoo's module attribute, and the ``UnslothGRPOTrainer`` unsloth generates
  (``trainer.py``, in a forked child, first: its hand-off into each loss
  function its module holds); ``unsloth_train``, first (training: off
  with the matrix's training), real GRPO steps through that generated
  trainer where the stack's TRL counts after the truncation mask
  (``unsloth_train.py``): the reach through unsloth's own route.
"""

from __future__ import annotations

import sys
from typing import Any

from probes.checks import PhaseContext, Step
from probes.checks.installed import fingerprint

from . import static as _static


def static() -> dict[str, Any]:
    return _static.detect_installed()


def runtime_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import kernel, runtime, suite

    if "unsloth" in sys.modules:  # pragma: no cover - a wiring bug, not a finding
        raise RuntimeError("the runtime detector must run in a process that never imported unsloth")
    result = runtime.run(ctx.device)
    ctx.shared["verdict"] = result.get("verdict")
    if result.get("verdict") in ("vulnerable", "fixed", "absent") and "probe" in result:
        fn = kernel.function()
        ctx.shared["fingerprint"] = fingerprint(fn)
        ctx.shared["oracle"] = suite.oracle(fn)
    return result


def _route() -> tuple[Any, dict[str, Any]]:
    """The guarded route's hand-off (a ``route(count, case, batch)``) and its record."""
    from . import handoff

    try:
        h = handoff.read(handoff.generated_source())
    except Exception as exc:  # no GRPO trainer source to read: the count reaches zoo as it comes
        h = handoff.HandOff(False, f"unsloth's GRPO compute_loss could not be built: {type(exc).__name__}: {exc}")

    def route(count: Any, case: Any, batch: Any) -> list[Any]:
        if not h.found:
            return [count]
        return handoff.handed(h, count, case.loss_type, batch, case.processes, batch.mask.shape[1])

    return route, h.record()


MODULE_ROUTE = "zoo's module attribute"


def start_trainer_route(ctx: PhaseContext) -> None:
    """The generated trainer's child, forked as soon as ``import unsloth`` succeeded: before this process
    computes anything with torch, and beside the steps before the guard step."""
    from . import trainer

    ctx.shared["trainer-started"] = trainer.start()


def _trainer_route(ctx: PhaseContext) -> dict[str, Any]:
    """The generated trainer's evidence, once per process (started early, or forked here by the guard step;
    behaviour reuses it)."""
    from . import trainer

    if "trainer" not in ctx.shared:
        started = ctx.shared.pop("trainer-started", None)
        ctx.shared["trainer"] = started.result() if started is not None else trainer.run()
    return ctx.shared["trainer"]  # type: ignore[no-any-return]


def guard_step(ctx: PhaseContext) -> dict[str, Any]:
    tr = _trainer_route(ctx)  # forked before this process computes anything with torch
    from . import kernel, suite

    try:
        fn = kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        return {"kernel": "absent", "reason": f"{type(exc).__name__}: {exc}"}
    route, record = _route()
    now, raw = fingerprint(fn), (ctx.raw or {}).get("fingerprint")
    original = None if raw is None else _same(now, raw, ("file", "line", "code_sha256"))
    case = suite.Case("s1-zero-all-masked", "dapo", (False, False), "tensor(0.)")
    try:
        handed = route(suite.count_value(case.count), case, suite.batch_of(case))
        all_masked = [kernel.outcome(suite.batch_of(case), fn, count=h) for h in handed]
    except Exception as exc:
        all_masked = [{"error": f"{type(exc).__name__}: {str(exc)[:200]}"}]
        handed = []
    fns = tr.get("functions") or {}
    trainer = {k: v for k, v in tr.items() if k not in ("suite", "routes")}
    # The generated copies are compiled from zoo's source: the same bytecode as zoo's own function unless changed.
    trainer["original"] = {name: None if raw is None or fp is None else _same(fp, raw, ("code_sha256",))
                           for name, fp in fns.items()}
    return {"kernel": "present", "fingerprint": now, "raw_fingerprint": raw, "original": original,
            "handoff": record, "handed_zero": [kernel.number(h) if h is not None else None for h in handed],
            "routes": {MODULE_ROUTE: {k: v for k, v in all_masked[0].items() if k not in ("grad_hex", "loss_hex")},
                       **(tr.get("routes") or {})},
            "trainer": trainer}


def _same(now: dict[str, Any], raw: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return all(now.get(k) == raw.get(k) for k in keys)


def behavior_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import kernel, suite

    oracle = (ctx.raw or {}).get("oracle")
    try:
        fn = kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        oracle, reason = None, f"n/a: kernel absent ({type(exc).__name__})"
    else:
        reason = "n/a: no oracle from the raw process (its runtime detector did not run zoo's function)"
    if not oracle:
        return {"tests": [{"id": t, "title": title, "outcome": "n/a", "reason": reason, "duration_s": 0.0,
                           "details": {}} for t, title in suite.TITLES.items()], "extra": []}
    route, record = _route()
    tr = _trainer_route(ctx)
    routes = {MODULE_ROUTE: suite.guarded(route, fn), **(tr.get("suite") or {})}
    return {"tests": suite.tests(oracle, routes), "handoff": record, "routes": list(routes),
            "trainer_route": tr.get("state"), "trainer_reason": tr.get("reason"), "extra": []}


def train_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import train

    zoo = ctx.shared.get("verdict")
    if zoo in ("fixed", "absent"):  # reach is judged for the failing states only: spare the cell the run
        return {"ok": True, "outcome": "n/a", "reason": f"n/a: the runtime detector calls this zoo {zoo}, and reach "
                "is only judged where zoo is vulnerable", "runs": [], "kernel_calls": 0, "masked_inputs": []}
    return train.run(ctx.device, ctx.torch_compile)


def unsloth_train_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import unsloth_train

    zoo = (ctx.raw or {}).get("verdict")
    if zoo != "vulnerable":  # as the raw run: reach is judged where zoo is vulnerable; spare the other cells
        return {"ok": True, "outcome": "n/a", "reason": f"n/a: the runtime detector calls this zoo {zoo}, and reach "
                "is only judged where zoo is vulnerable", "runs": [], "kernel_calls": 0, "masked_inputs": []}
    return unsloth_train.run()


RAW_STEPS = (Step("runtime", runtime_step), Step("train", train_step, training=True))
# unsloth_train first: it forks before this process computes anything with torch (as the guard step's fork).
UNSLOTH_STEPS = (Step("unsloth_train", unsloth_train_step, needs_raw=True, training=True),
                 Step("guard", guard_step, needs_raw=True, early=start_trainer_route),
                 Step("behavior", behavior_step, needs_raw=True))
