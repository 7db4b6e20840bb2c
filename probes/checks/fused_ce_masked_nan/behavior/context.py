"""What the behaviour tests share: the context, input helpers and the expectation bodies.

``expect_zero`` (the guard's answer: loss 0.0, gradients 0), ``expect_faithful``
(bit-identical to the unguarded kernel, close to the reference) and
``expect_rejected_alike`` (zoo raises, so must the guarded call) each also
check that the caller's tensors are unchanged after the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import kernel
from . import PROTOCOL
from .support import (
    Checks,
    Guard,
    NotApplicableError,
    Run,
    close_run,
    execute,
    is_zero_answer,
    reference,
    same_run,
    unguarded,
)

# One chunk per row: zoo's chunk count is the token count times vocab x 16 bytes over target_gb,
# rounded up to a multiple of 4 and capped at the token count (get_chunk_size), so any budget
# below ~1e-6 GiB at these sizes gives bsz * qlen chunks (>= 12), while 1.0 gives one chunk.
CHUNKED_GB = 1e-8


@dataclass
class Context:
    guard: Guard
    torch_compile: bool
    device: str
    raw: dict[str, Any] | None  # what the before phase saw, if it ran
    zoo_vulnerable: bool | None
    # Whether the forward after import is not zoo's own (a guard of any kind replaced it).
    replaced: bool | None = None
    # The counts on which the raw kernel gave NaN for a fully masked batch (test 1): "None", "tensor(0)".
    nan_forms: tuple[str, ...] = ("None",)

    def batch(self, kind: str, **kw: Any) -> kernel.Batch:
        return kernel.make_batch(kind, device=self.device, **kw)

    def run(self, batch: kernel.Batch, **kw: Any) -> Run:
        return execute(batch.fresh(), torch_compile=self.torch_compile, **kw)

    def hooks(self, *names: str) -> list[Callable[[], Any]]:
        """The guard's protocol hooks, or n/a naming what is missing (never a silent skip)."""
        found = [self.guard.hook(n) for n in names]
        # In the protocol's order, so tests 11 and 12 word it alike ("no install/uninstall hook").
        missing = sorted((n for n, fn in zip(names, found, strict=True) if fn is None), key=PROTOCOL.index)
        if not missing:
            return found  # type: ignore[return-value]
        if self.guard.module is None and not self.replaced:
            raise NotApplicableError("no guard in this build")
        raise NotApplicableError(f"guard exposes no {'/'.join(missing)} hook")


ZERO_FORMS = ("None", "tensor(0)")


def measured_forms(raw_doc: dict[str, Any] | None) -> tuple[str, ...]:
    """The counts test 1 saw NaN on, from the before phase's document: none on a fixed zoo; ``("None",)``, the
    one form every vulnerable zoo NaNs on, when test 1 did not measure them."""
    forms = (raw_doc or {}).get("zoo_vulnerable_forms")
    return ("None",) if forms is None else tuple(forms)


def zero_count_batches(ctx: Context) -> list[tuple[str, kernel.Batch]]:
    """The fully masked batch with each count a caller sends when nothing is left: None (a custom loop) and
    ``tensor(0)`` (zoo's trainer patch on a fully masked accumulation step, ../README.md#the-evidence)."""
    out = []
    for form in ZERO_FORMS:
        batch = ctx.batch("all_masked")
        batch.n_items = None if form == "None" else torch.tensor(0, device=ctx.device)
        out.append((form, batch))
    return out


def with_(batch: kernel.Batch, **fields: Any) -> kernel.Batch:
    """``batch`` with some call arguments changed (a fresh copy)."""
    out = batch.fresh()
    for key, value in fields.items():
        setattr(out, key, value)
    return out


def chunked(batch: kernel.Batch) -> kernel.Batch:
    return with_(batch, target_gb=CHUNKED_GB)


# ---------------------------------------------------------------- shared bodies


def _untouched(c: Checks, label: str, run: Run) -> None:
    changed = run.summary.get("caller_tensors_changed") or []
    c.expect(not changed, f"{label}: the call changed the caller's {', '.join(changed)}")


def expect_zero(ctx: Context, c: Checks, label: str, batch: kernel.Batch, **kw: Any) -> Run:
    """The guarded answer for an empty batch with a zero divisor: loss 0.0, every gradient 0."""
    run = ctx.run(batch, **kw)
    c.details[label] = run.summary
    problems = is_zero_answer(run)
    c.expect(not problems, f"{label}: " + ", ".join(problems))
    _untouched(c, label, run)
    return run


def expect_faithful(ctx: Context, c: Checks, label: str, batch: kernel.Batch, *, ref: bool = True,
                    finite: bool | None = None) -> Run:
    """Guarded run bit-identical to the unguarded kernel of this zoo, and close to the reference.

    ``finite`` False: the inputs carry a NaN (or a zero count with labels
    left), so the loss must stay non-finite through the guard.
    """
    guarded = ctx.run(batch)
    c.details[label] = {"guarded": guarded.summary}
    _untouched(c, label, guarded)
    if finite is False:
        c.expect(not guarded.summary["loss_finite"], f"{label}: a non-finite input came out finite "
                                                     f"(loss {guarded.summary['loss']})")
    if ref:
        diffs = close_run(guarded, reference(batch.fresh()))
        c.details[label]["reference_diffs"] = diffs
        c.expect(not diffs, f"{label}: not close to reference: " + ", ".join(diffs))
    try:
        ctx.hooks("uninstall", "install")
        with unguarded(ctx.guard):
            plain = ctx.run(batch)
    except NotApplicableError as exc:
        c.details[label]["bit_identity"] = f"n/a: {exc}"
        if f"bit-identity n/a: {exc}" not in c.notes:
            c.note(f"bit-identity n/a: {exc}")
        return guarded
    diffs = same_run(guarded, plain)
    c.details[label]["unguarded"] = plain.summary
    c.details[label]["bit_identity_diffs"] = diffs
    c.expect(not diffs, f"{label}: guarded differs from unguarded: " + ", ".join(diffs))
    return guarded


def _error_of(fn: Callable[[], Any]) -> str | None:
    try:
        fn()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def expect_rejected_alike(ctx: Context, c: Checks, label: str, batch: kernel.Batch) -> None:
    """Inputs zoo rejects: the guarded call must raise as the unguarded one does (delegation includes errors)."""
    try:
        ctx.hooks("uninstall", "install")
        with unguarded(ctx.guard):
            plain = _error_of(lambda: ctx.run(batch))
    except NotApplicableError as exc:
        c.details[label] = f"n/a: {exc}"
        return
    guarded = _error_of(lambda: ctx.run(batch))
    c.details[label] = {"unguarded_error": plain, "guarded_error": guarded}
    if plain is not None:
        c.expect(guarded is not None, f"{label}: zoo rejects this input ({plain}) but the guarded call answered")
        if guarded is not None:
            same = guarded.split(":")[0] == plain.split(":")[0]
            c.expect(same, f"{label}: zoo raises {plain.split(':')[0]}, the guarded call {guarded.split(':')[0]}")
    else:
        c.expect(guarded is None, f"{label}: zoo accepts this input but the guarded call raised {guarded}")


def half_cases(ctx: Context, c: Checks, label: str, body: Callable[[str, dict[str, Any]], None]) -> None:
    """Run ``body`` for bf16 (and fp16 with a loss scale on cuda); say why fp16 is n/a elsewhere."""
    body(f"{label}_bf16_odd", {"dtype": torch.bfloat16, "shape": "odd"})
    if ctx.device == "cuda":
        body(f"{label}_fp16_scaled", {"dtype": torch.float16, "shape": "odd", "scaling": 1024.0})
    else:
        c.details[f"{label}_fp16_scaled"] = f"n/a: fp16 with a loss scale runs on cuda (this run: {ctx.device})"


def make(ctx: Context, kind: str, opts: dict[str, Any], **kw: Any) -> kernel.Batch:
    """A batch from make_batch options plus call fields (``scaling``) in one dict."""
    opts = dict(opts)
    scaling = opts.pop("scaling", None)
    batch = ctx.batch(kind, **opts, **kw)
    batch.scaling = scaling
    return batch


def with_nan(batch: kernel.Batch) -> kernel.Batch:
    """One NaN in a hidden state whose position has a label: the loss must come out NaN."""
    with torch.no_grad():
        batch.hidden[0, 1, 0] = float("nan")
    return batch


def count_of(value: float) -> torch.Tensor:
    return torch.tensor(value)
