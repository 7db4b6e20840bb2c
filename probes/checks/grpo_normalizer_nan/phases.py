"""The phases of this check inside a cell (contract: ``probes/checks/__init__.py``).

* raw process (never imports unsloth): ``runtime``, the runtime detector
  (``runtime.py``), which also hands the unsloth process the oracle -- every
  suite case through zoo's own function -- and the function's fingerprint;
  ``train``, a real GRPO run with TRL's ``GRPOTrainer`` and zoo's loss
  (``train.py``).
* unsloth process: ``guard`` (the count as unsloth's generated
  ``compute_loss`` hands it to zoo, whether zoo's function is still its own,
  and the all-masked call on that route) and ``behavior``, the suite
  (``suite.py``) on the same route against the oracle.
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


def guard_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import kernel, suite

    try:
        fn = kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        return {"kernel": "absent", "reason": f"{type(exc).__name__}: {exc}"}
    route, record = _route()
    now, raw = fingerprint(fn), (ctx.raw or {}).get("fingerprint")
    original = None if raw is None else all(now[k] == raw.get(k) for k in ("file", "line", "code_sha256"))
    case = suite.Case("s1-zero-all-masked", "dapo", (False, False), "tensor(0.)")
    try:
        handed = route(suite.count_value(case.count), case, suite.batch_of(case))
        all_masked = [kernel.outcome(suite.batch_of(case), fn, count=h) for h in handed]
    except Exception as exc:
        all_masked = [{"error": f"{type(exc).__name__}: {str(exc)[:200]}"}]
        handed = []
    return {"kernel": "present", "fingerprint": now, "raw_fingerprint": raw, "original": original,
            "handoff": record, "handed_zero": [kernel.number(h) if h is not None else None for h in handed],
            "routes": {"hand-off + module attribute": {k: v for k, v in all_masked[0].items()
                                                       if k not in ("grad_hex", "loss_hex")}}}


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
    return {"tests": suite.tests(oracle, suite.guarded(route, fn)), "handoff": record, "extra": []}


def train_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import train

    zoo = ctx.shared.get("verdict")
    if zoo in ("fixed", "absent"):  # reach is judged for the failing states only: spare the cell the run
        return {"ok": True, "outcome": "n/a", "reason": f"n/a: the runtime detector calls this zoo {zoo}, and reach "
                "is only judged where zoo is vulnerable", "runs": [], "kernel_calls": 0, "masked_inputs": []}
    return train.run(ctx.device, ctx.torch_compile)


RAW_STEPS = (Step("runtime", runtime_step), Step("train", train_step, training=True))
UNSLOTH_STEPS = (Step("guard", guard_step, needs_raw=True), Step("behavior", behavior_step, needs_raw=True))
