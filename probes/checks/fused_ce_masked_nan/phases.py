"""The phases of this check inside a cell (contract: ``probes/checks/__init__.py``).

* static, in the parent: the AST of the installed forward (no import).
* raw process (never imports unsloth): the runtime detector, then behaviour
  test 1 on zoo's own forward, handed to the unsloth process; then the
  differential suite's oracle (``differential-oracle``: generated examples
  and zoo's answers to them, ``differential/oracle.py``).
* unsloth process: snapshots for the differential suite's side-effect rules
  (``differential-baseline``, first, right after the import), the
  guard-presence probe, the training run, behaviour tests 2-14 and the
  extras (they need test 1's findings), then the differential suite
  (``differential``: the same examples through the kernel as ``import
  unsloth`` left it, judged against zoo's answers; ``differential/judge.py``).

The guard protocol module defaults to ``GUARD_MODULE`` (``__init__.py``); a build may
name another (its ``guard_module``), which the cell runner hands the probes as
``--guard-module`` (``probes.handoff``).
"""

from __future__ import annotations

import argparse
from typing import Any

from probes import handoff
from probes.checks import PhaseContext, Step

from . import GUARD_MODULE


def static() -> dict[str, Any]:
    from .static import detect_installed

    return detect_installed().to_dict()


def _behavior_args(ctx: PhaseContext, phase: str) -> argparse.Namespace:
    return argparse.Namespace(device=ctx.device, compile="on" if ctx.torch_compile else "off",
                              guard_module=handoff.given().guard_module or GUARD_MODULE,
                              guard_file=None, phase=phase)


def runtime_step(ctx: PhaseContext) -> dict[str, Any]:
    """The runtime detector; then behaviour test 1 (kept for the unsloth process, whatever the detector said)."""
    from . import runtime
    from .behavior.__main__ import before_phase

    try:
        result = runtime.run(ctx.device)
    finally:
        ctx.shared["behavior_before"] = before_phase(_behavior_args(ctx, "before"), ctx.torch_compile)
    return result


def guard_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import guard

    return guard.run(ctx.device, ctx.torch_compile)


def train_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import train

    return train.run(ctx.device, ctx.torch_compile)  # type: ignore[no-any-return]


def behavior_step(ctx: PhaseContext) -> dict[str, Any]:
    from .behavior.__main__ import _placeholder, after_phase
    from .behavior.support import TestResult

    before = (ctx.raw or {}).get("behavior_before")
    if before:
        t = before["tests"][0]
        first = TestResult(t["id"], t["title"], t["outcome"], t["reason"], t["duration_s"], t["details"])
    else:
        first = _placeholder("01-before", "the raw phase left no result", "fail")
    return after_phase(_behavior_args(ctx, "all"), ctx.torch_compile, before, first)  # type: ignore[no-any-return]


def differential_oracle_step(ctx: PhaseContext) -> dict[str, Any]:
    from .differential.oracle import raw_step

    return raw_step(ctx)


def differential_baseline_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import kernel
    from .differential.judge import baseline_step

    try:  # the modules whose globals are compared (import unsloth has imported them on its GPU path)
        kernel.ce_module()
        import unsloth_zoo.loss_utils  # noqa: F401
    except Exception:
        pass
    return baseline_step(ctx)


def differential_step(ctx: PhaseContext) -> dict[str, Any]:
    from .differential.judge import differential_step as judge

    return judge(ctx)


RAW_STEPS = (Step("runtime", runtime_step), Step("differential-oracle", differential_oracle_step))
UNSLOTH_STEPS = (
    Step("differential-baseline", differential_baseline_step),
    Step("guard", guard_step),
    Step("train", train_step, training=True),
    Step("behavior", behavior_step, needs_raw=True),
    Step("differential", differential_step, needs_raw=True),
)
