"""The phases of this check inside a cell (contract: ``probes/checks/__init__.py``).

* static, in the parent: the AST of the installed forward (no import).
* raw process (never imports unsloth): the runtime detector, then behaviour
  test 1 on zoo's own forward, handed to the unsloth process.
* unsloth process: the guard-presence probe, the training run, then
  behaviour tests 2-14 and the extras (they need test 1's findings).

The guard protocol module defaults to ``GUARD_MODULE`` (``__init__.py``); a build may
name another with ``SKEWMATRIX_GUARD_MODULE`` (set by the cell runner from the
build's ``guard_module``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from probes.checks import PhaseContext, Step

from . import GUARD_MODULE

GUARD_MODULE_ENV = "SKEWMATRIX_GUARD_MODULE"


def static() -> dict[str, Any]:
    from .static import detect_installed

    return detect_installed().to_dict()


def _behavior_args(ctx: PhaseContext, phase: str) -> argparse.Namespace:
    return argparse.Namespace(device=ctx.device, compile="on" if ctx.torch_compile else "off",
                              guard_module=os.environ.get(GUARD_MODULE_ENV) or GUARD_MODULE,
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


RAW_STEPS = (Step("runtime", runtime_step),)
UNSLOTH_STEPS = (
    Step("guard", guard_step),
    Step("train", train_step, training=True),
    Step("behavior", behavior_step, needs_raw=True),
)
