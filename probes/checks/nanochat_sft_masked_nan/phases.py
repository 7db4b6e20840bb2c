"""The phases of this check inside a cell (contract: ``probes/checks/__init__.py``).

Every step is a raw step: the subject is a nanochat tree and nothing here
imports unsloth (the raw process never does). In order:

* ``runtime``: the tree's ``GPT`` at a tiny config, every target -1, the
  default reduction: NaN -> ``vulnerable``, finite -> ``fixed`` (whether that
  loss can be back-propagated is recorded beside it);
* ``behavior``: the suite (:mod:`.suite`);
* ``train``: the real ``chat_sft.py`` runs (:mod:`.train`).

``static()`` reads the tree's source in the parent probe process (no import).
"""

from __future__ import annotations

import math
import sys
from typing import Any

from probes.checks import PhaseContext, Step

from . import source
from . import static as _static


def static() -> dict[str, Any]:
    return _static.detect()


def runtime_step(ctx: PhaseContext) -> dict[str, Any]:
    import torch

    from . import model as tiny

    if "unsloth" in sys.modules:  # pragma: no cover - a wiring bug, not a finding
        raise RuntimeError("this check must run in a process that never imported unsloth")
    try:
        root = source.find_tree()
    except source.NoTree as exc:
        return {"verdict": "unknown", "reason": str(exc)}
    ctx.shared["tree"] = source.describe(root)
    torch.manual_seed(0)
    model = tiny.build(root)
    x, y = tiny.batch("all_masked")
    loss = model(x, y)
    out = tiny.describe(loss)
    backward = "no grad_fn: loss.backward() would raise" if loss.grad_fn is None else "ok"
    if loss.grad_fn is not None:
        try:
            loss.backward()
        except Exception as exc:
            backward = f"{type(exc).__name__}: {exc}"
    value = float(loss.detach())
    verdict = "fixed" if math.isfinite(value) else "vulnerable"
    return {"verdict": verdict, "loss": out, "backward": backward, "tree": ctx.shared["tree"],
            "config": dict(tiny.TINY), "shape": [tiny.BATCH, tiny.SEQ],
            "reason": f"GPT.forward on a {tiny.BATCH}x{tiny.SEQ} batch, every target -1, reduction default: "
                      f"loss {out.get('value')} (grad_fn {out.get('grad_fn')}; backward: {backward})"}


def behavior_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import suite

    try:
        root = source.find_tree()
    except source.NoTree as exc:
        return {"tests": [{"id": t, "title": title, "outcome": "n/a", "reason": f"n/a: {exc}", "duration_s": 0.0,
                           "details": {}} for t, title in suite.TITLES.items()], "extra": []}
    return suite.run(root)


def train_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import train

    return train.run(ctx.device)


RAW_STEPS = (Step("runtime", runtime_step), Step("behavior", behavior_step), Step("train", train_step, training=True))
UNSLOTH_STEPS: tuple[Step, ...] = ()
