"""The phases of this check inside a cell (contract: ``probes/checks/__init__.py``).

* raw process (never imports unsloth): the runtime detector -- an all-masked
  batch with ``num_items_in_batch=None`` straight into zoo's function -- plus
  the function's fingerprint, handed to the unsloth process.
* raw process, then: ``faults``, zoo's kernel made to raise by an injected fault
  (``faults.py``), zoo's answers recorded for the suite's last test.
* unsloth process: ``guard`` (is the function still zoo's own after ``import
  unsloth``, and is the all-masked call finite through the module attribute
  that callers resolve) and a short ``behavior`` suite.
* CPU-backend process (``import unsloth`` selected zoo's CPU backend):
  ``train``, a real training run on the route by which users reach the kernel
  (``FastLanguageModel`` + the backend's patched ``SFTTrainer``): does a
  user's run show the NaN (``train.py``)?
"""

from __future__ import annotations

import math
import sys
from typing import Any

from probes.checks import PhaseContext, Step
from probes.checks.installed import fingerprint

from . import faults as _faults
from . import static as _static

TITLES = {
    "c1-all-masked-none": "all-masked, num_items None: loss 0.0, gradients finite and 0",
    "c2-all-masked-zero": "all-masked, num_items tensor 0: loss 0.0, gradients finite and 0",
    "c3-dense-reference": "dense labels, no num_items: close to an unchunked reference",
    "c4-sparse-reference": "rows that differ in emptiness, with num_items: close to the reference",
    "c5-chunks": "several chunks (chunk_rows=2) give the one-chunk result, two shapes",
    _faults.TEST_ID: _faults.TITLE,
}


def static() -> dict[str, Any]:
    return _static.detect_installed()


def _absent(exc: ModuleNotFoundError) -> bool:
    from . import kernel

    return bool(exc.name) and kernel.MODULE.startswith(str(exc.name))


def runtime_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import kernel

    if "unsloth" in sys.modules:  # pragma: no cover - a wiring bug, not a finding
        raise RuntimeError("the runtime detector must run in a process that never imported unsloth")
    try:
        fn = kernel.function()
    except ModuleNotFoundError as exc:
        if _absent(exc):
            return {"verdict": "absent", "reason": f"no module {kernel.MODULE} (no CPU backend in this zoo)"}
        raise
    except AttributeError:
        return {"verdict": "absent", "reason": f"{kernel.MODULE} has no {kernel.FUNCTION}"}
    ctx.shared["fingerprint"] = fingerprint(fn)
    batch = kernel.make_batch("all_masked")
    out = kernel.outcome(kernel.call(batch), batch)
    verdict = "fixed" if out["loss_finite"] else "vulnerable"
    grads = "gradients finite" if out["grads_finite"] else "gradients not finite"
    return {"verdict": verdict, "outcome": out,
            "reason": f"all-masked batch, num_items_in_batch=None: loss {out['loss']} ({grads})"}


def guard_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import kernel

    try:
        fn = kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        return {"kernel": "absent", "reason": f"{type(exc).__name__}: {exc}"}
    batch = kernel.make_batch("all_masked")
    now, raw = fingerprint(fn), (ctx.raw or {}).get("fingerprint")
    # None: no raw fingerprint to compare with (the raw process failed); the verdict then cannot tell.
    original = None if raw is None else all(now[k] == raw.get(k) for k in ("file", "line", "code_sha256"))
    return {"kernel": "present", "fingerprint": now, "raw_fingerprint": raw, "original": original,
            "routes": {"module-attribute": kernel.outcome(kernel.call(batch), batch)}}


def _zero(run: dict[str, Any]) -> list[str]:
    problems = []
    if not run["loss_finite"]:
        problems.append(f"loss {run['loss']}")
    elif run["loss"] != 0.0:
        problems.append(f"loss {run['loss']}, expected 0.0")
    for name, g in run["grads"].items():
        if g is None:
            problems.append(f"grad {name} absent")
        elif not g["finite"] or not g["all_zero"]:
            problems.append(f"grad {name} not finite and zero")
    return problems


def _close(a: Any, b: Any) -> bool:
    return math.isfinite(float(a)) and abs(float(a) - float(b)) <= 1e-5 + 1e-4 * abs(float(b))


def behavior_step(ctx: PhaseContext) -> dict[str, Any]:
    import torch

    from . import kernel

    try:
        kernel.function()
    except (ModuleNotFoundError, AttributeError) as exc:
        reason = f"n/a: kernel absent ({type(exc).__name__})"
        return {"tests": [{"id": t, "title": title, "outcome": "n/a", "reason": reason, "duration_s": 0.0,
                           "details": {}} for t, title in TITLES.items()], "extra": []}

    def c1() -> tuple[list[str], dict[str, Any]]:
        b = kernel.make_batch("all_masked")
        run = kernel.outcome(kernel.call(b), b)
        return _zero(run), run

    def c2() -> tuple[list[str], dict[str, Any]]:
        b = kernel.make_batch("all_masked")
        b.num_items = torch.tensor(0)
        run = kernel.outcome(kernel.call(b), b)
        return _zero(run), run

    def ref_case(kind: str, with_n: bool) -> tuple[list[str], dict[str, Any]]:
        b = kernel.make_batch(kind, seed=1)
        if with_n:
            b.num_items = torch.tensor(7)
        got = float(kernel.call(b).detach())
        want = float(kernel.reference(kernel.make_batch(kind, seed=1) if not with_n else _with_n(kernel, kind)))
        return ([] if _close(got, want) else [f"loss {got!r} vs reference {want!r}"]), {"loss": got, "reference": want}

    def c5() -> tuple[list[str], dict[str, Any]]:
        problems, details = [], {}
        for shape in ((2, 6, 8, 16), (3, 5, 4, 33)):
            one = float(kernel.call(kernel.make_batch("sparse", seed=2, shape=shape), chunk_rows=10_000).detach())
            many = float(kernel.call(kernel.make_batch("sparse", seed=2, shape=shape), chunk_rows=2).detach())
            details[str(shape)] = {"one_chunk": one, "chunk_rows_2": many}
            if not _close(many, one):
                problems.append(f"shape {shape}: {many!r} with chunks vs {one!r} in one")
        return problems, details

    cases = {"c1-all-masked-none": c1, "c2-all-masked-zero": c2,
             "c3-dense-reference": lambda: ref_case("dense", False),
             "c4-sparse-reference": lambda: ref_case("sparse", True), "c5-chunks": c5}
    tests = []
    for test_id, fn in cases.items():
        try:
            problems, details = fn()
            outcome, reason = ("fail", "; ".join(problems)) if problems else ("pass", "ok")
        except Exception as exc:
            outcome, reason, details = "fail", f"crashed: {type(exc).__name__}: {exc}", {}
        tests.append({"id": test_id, "title": TITLES[test_id], "outcome": outcome, "reason": reason,
                      "duration_s": 0.0, "details": details})
    tests.append(_faults.test(ctx))
    return {"tests": tests, "extra": []}


def _with_n(kernel: Any, kind: str) -> Any:
    import torch

    b = kernel.make_batch(kind, seed=1)
    b.num_items = torch.tensor(7)
    return b


def train_step(ctx: PhaseContext) -> dict[str, Any]:
    from . import train

    return train.run(ctx.device, ctx.torch_compile)


RAW_STEPS = (Step("runtime", runtime_step), Step("faults", _faults.raw_step))
UNSLOTH_STEPS = (Step("guard", guard_step, needs_raw=True), Step("behavior", behavior_step, needs_raw=True))
CPU_BACKEND_STEPS = (Step("train", train_step, training=True),)
