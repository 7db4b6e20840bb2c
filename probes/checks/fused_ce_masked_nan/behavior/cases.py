"""The fourteen behaviour tests and the extra probes (DESIGN.md section 5).

``before_phase`` holds test 1 (raw kernel, no unsloth in the process);
``after_phase`` holds tests 2-14 and the extras, which share one process
after ``import unsloth``. Every test leaves the guard as it found it, and
records each sub-case it ran under its own label in its details.

A test is only as strong as its inputs, so between them the sub-cases give
every argument of zoo's forward that can change the result a non-default
value: ``scaling`` (03, 08), a trainable bias (08), ``mask`` (07),
``shift_labels=False`` (09), ``overwrite=True`` (02, 03, 14), ``n_items``
None / 0 / positive / NaN (02-06, 14), ``ignore_index`` through
``extra_kwargs`` (02, 03), a ``target_gb`` that forces one chunk per row
(02-07, 14), rows that differ in emptiness (05, 06, 09, 10), NaN inputs that
must stay NaN (03, 04), two shapes and bf16 (02-06, 08). Every guarded call
also checks that the caller's tensors are unchanged afterwards (except
hidden_states under ``overwrite=True``, which zoo replaces by the gradient).

Which deliberately wrong guard each test is there to catch (tests/mutants/):
no mapping-cache clear -> 11, 12; changed signature -> 11 (and 2-10 crash);
short-circuit with a positive n_items -> 4 (a NaN count must stay NaN);
n_items None only -> 14 and 4; emptiness before the mask -> 7; no restore
on uninstall -> 12; shift ignored -> 10 (and 7); always active -> 13 (fixed
zoo); wraps twice -> 11 (and 12).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import kernel
from .support import (
    Checks,
    Guard,
    NotApplicableError,
    Run,
    TestResult,
    close_run,
    execute,
    fingerprint,
    forward_entry,
    fused_class,
    is_zero_answer,
    is_zoo_forward,
    mapping_cache,
    reference,
    run_test,
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

    def batch(self, kind: str, **kw: Any) -> kernel.Batch:
        return kernel.make_batch(kind, device=self.device, **kw)

    def run(self, batch: kernel.Batch, **kw: Any) -> Run:
        return execute(batch.fresh(), torch_compile=self.torch_compile, **kw)

    def hooks(self, *names: str) -> list[Callable[[], Any]]:
        """The guard's protocol hooks, or n/a naming what is missing (never a silent skip)."""
        found = [self.guard.hook(n) for n in names]
        missing = [n for n, fn in zip(names, found, strict=True) if fn is None]
        if not missing:
            return found  # type: ignore[return-value]
        if self.guard.module is None and not self.replaced:
            raise NotApplicableError("no guard in this build")
        raise NotApplicableError(f"guard exposes no {'/'.join(missing)} hook")


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


def half_cases(ctx: Context, c: Checks, label: str, body: Callable[[str, dict[str, Any]], None]) -> None:
    """Run ``body`` for bf16 (and fp16 with a loss scale on cuda); say why fp16 is n/a elsewhere."""
    body(f"{label}_bf16_odd", {"dtype": torch.bfloat16, "shape": "odd"})
    if ctx.device == "cuda":
        body(f"{label}_fp16_scaled", {"dtype": torch.float16, "shape": "odd", "scaling": 1024.0})
    else:
        c.details[f"{label}_fp16_scaled"] = f"n/a: fp16 with a loss scale runs on cuda (this run: {ctx.device})"


def _make(ctx: Context, kind: str, opts: dict[str, Any], **kw: Any) -> kernel.Batch:
    """A batch from make_batch options plus call fields (``scaling``) in one dict."""
    opts = dict(opts)
    scaling = opts.pop("scaling", None)
    batch = ctx.batch(kind, **opts, **kw)
    batch.scaling = scaling
    return batch


def _set_nan(batch: kernel.Batch) -> kernel.Batch:
    """One NaN in a hidden state whose position has a label: the loss must come out NaN."""
    with torch.no_grad():
        batch.hidden[0, 1, 0] = float("nan")
    return batch


def _count(value: float) -> torch.Tensor:
    return torch.tensor(value)


# ---------------------------------------------------------------- test 1


def test_01_before(ctx: Context, c: Checks) -> None:
    run = ctx.run(ctx.batch("all_masked"))
    c.details["all_masked"] = run.summary
    c.details["forward"] = fingerprint(forward_entry())
    c.details["has_mapping_cache"] = mapping_cache() is not None
    vulnerable = not math.isfinite(float(run.loss))
    c.details["zoo_vulnerable_raw"] = vulnerable
    if vulnerable:
        c.note("zoo vulnerable: NaN loss seen")
        return
    c.note("zoo carries the fix: finite loss")
    problems = is_zero_answer(run)
    c.expect(not problems, "finite but not a clean zero: " + ", ".join(problems))


# ---------------------------------------------------------------- tests 2-10 and 14: results


def test_02_after(ctx: Context, c: Checks) -> None:
    run = expect_zero(ctx, c, "all_masked", ctx.batch("all_masked"))
    c.details["grad_fn"] = run.summary.get("grad_fn")
    expect_zero(ctx, c, "all_masked_ignore_index_-1", ctx.batch("all_masked", ignore_index=-1))
    expect_zero(ctx, c, "all_masked_chunked", chunked(ctx.batch("all_masked")))
    expect_zero(ctx, c, "all_masked_overwrite", with_(ctx.batch("all_masked"), overwrite=True))
    expect_zero(ctx, c, "all_masked_scaling_4", with_(ctx.batch("all_masked"), scaling=4.0))
    half_cases(ctx, c, "all_masked", lambda label, opts: expect_zero(ctx, c, label, _make(ctx, "all_masked", opts)))
    # The all-masked verdict reads every route into the kernel, not only the Function.
    for route in ("public", "adapter"):
        run = expect_zero(ctx, c, f"all_masked_route_{route}", ctx.batch("all_masked"), route=route)
        c.details[f"all_masked_route_{route}"]["grad_fn"] = run.summary.get("grad_fn")
    # zoo's default target_gb=None: a CUDA memory query on older zoo, another Function on newer ones.
    label = "all_masked_route_public_default_target_gb"
    try:
        run = ctx.run(ctx.batch("all_masked"), route="public", target_gb=None)
    except Exception as exc:
        c.details[label] = f"n/a: this host cannot run zoo's default target_gb route: {type(exc).__name__}: {exc}"[:400]
    else:
        c.details[label] = run.summary
        problems = is_zero_answer(run)
        c.expect(not problems, f"{label} (grad_fn {run.summary.get('grad_fn')}): " + ", ".join(problems))


def test_03_dense(ctx: Context, c: Checks) -> None:
    expect_faithful(ctx, c, "dense", ctx.batch("dense"))
    expect_faithful(ctx, c, "dense_chunked", chunked(ctx.batch("dense")))
    expect_faithful(ctx, c, "dense_scaling_4", with_(ctx.batch("dense"), scaling=4.0))
    expect_faithful(ctx, c, "dense_overwrite", with_(ctx.batch("dense"), overwrite=True))
    batch = ctx.batch("dense", ignore_index=-1)
    batch.labels[:, ::2] = -1
    expect_faithful(ctx, c, "dense_ignore_index_-1", batch)
    expect_faithful(ctx, c, "dense_nan_hidden", _set_nan(ctx.batch("dense")), ref=False, finite=False)
    half_cases(ctx, c, "dense", lambda label, opts: expect_faithful(ctx, c, label, _make(ctx, "dense", opts)))


def test_04_dense_n_items(ctx: Context, c: Checks) -> None:
    expect_faithful(ctx, c, "dense_n_items", ctx.batch("dense", n_items=True))
    batch = ctx.batch("dense", n_items=True)
    batch.n_items = int(batch.n_items)
    expect_faithful(ctx, c, "dense_n_items_int", batch)
    expect_faithful(ctx, c, "dense_n_items_chunked", chunked(ctx.batch("dense", n_items=True)))
    # A zero divisor with nothing to learn is the guard's case (test 14 has every spelling of 0).
    expect_zero(ctx, c, "all_masked_n_items_0", with_(ctx.batch("all_masked"), n_items=_count(0.0)))
    # A zero count with labels left, a NaN count and a positive count are zoo's to answer.
    expect_faithful(ctx, c, "dense_n_items_0", with_(ctx.batch("dense"), n_items=_count(0.0)), ref=False,
                    finite=False)
    expect_faithful(ctx, c, "all_masked_n_items_nan", with_(ctx.batch("all_masked"), n_items=_count(math.nan)),
                    ref=False, finite=False)
    expect_faithful(ctx, c, "all_masked_n_items_5", with_(ctx.batch("all_masked"), n_items=_count(5.0)),
                    ref=False)
    half_cases(ctx, c, "dense_n_items",
               lambda label, opts: expect_faithful(ctx, c, label, _make(ctx, "dense", opts, n_items=True)))


def test_05_sparse(ctx: Context, c: Checks) -> None:
    expect_faithful(ctx, c, "sparse", ctx.batch("sparse"))
    expect_faithful(ctx, c, "sparse_chunked", chunked(ctx.batch("sparse")))
    expect_faithful(ctx, c, "mixed_rows", ctx.batch("mixed_rows"))
    expect_faithful(ctx, c, "mixed_rows_chunked", chunked(ctx.batch("mixed_rows")))
    half_cases(ctx, c, "sparse", lambda label, opts: expect_faithful(ctx, c, label, _make(ctx, "sparse", opts)))


def test_06_sparse_n_items(ctx: Context, c: Checks) -> None:
    expect_faithful(ctx, c, "sparse_n_items", ctx.batch("sparse", n_items=True))
    expect_faithful(ctx, c, "mixed_rows_n_items", ctx.batch("mixed_rows", n_items=True))
    expect_faithful(ctx, c, "mixed_rows_n_items_chunked", chunked(ctx.batch("mixed_rows", n_items=True)))
    half_cases(ctx, c, "sparse_n_items",
               lambda label, opts: expect_faithful(ctx, c, label, _make(ctx, "sparse", opts, n_items=True)))


def test_07_mask(ctx: Context, c: Checks) -> None:
    expect_zero(ctx, c, "dense_labels_mask_all_zero", ctx.batch("dense", mask=True))
    expect_zero(ctx, c, "dense_labels_mask_all_zero_chunked", chunked(ctx.batch("dense", mask=True)))
    # Only position 0 unmasked: the shift drops it, so nothing is left.
    batch = ctx.batch("dense", mask=True)
    assert batch.mask is not None
    batch.mask[:, 0] = 1
    expect_zero(ctx, c, "dense_labels_mask_first_only", batch)
    batch = ctx.batch("dense", mask=True)
    assert batch.mask is not None
    batch.mask[:, 2:4] = 1
    expect_faithful(ctx, c, "dense_labels_mask_partial", batch)
    expect_faithful(ctx, c, "dense_labels_mask_partial_chunked", chunked(batch))
    # Rows differ: row 0 masked out entirely, the others kept whole.
    batch = ctx.batch("dense", mask=True)
    assert batch.mask is not None
    batch.mask[1:] = 1
    expect_faithful(ctx, c, "dense_labels_mask_rows_differ", batch)
    # Without the shift zoo ignores the mask: an all-zero mask leaves every label.
    expect_faithful(ctx, c, "dense_labels_mask_all_zero_no_shift", ctx.batch("dense", mask=True, shift_labels=False))


def test_08_bias(ctx: Context, c: Checks) -> None:
    expect_zero(ctx, c, "all_masked_bias", ctx.batch("all_masked", bias=True))
    expect_zero(ctx, c, "all_masked_bias_scaling_4", with_(ctx.batch("all_masked", bias=True), scaling=4.0))
    expect_faithful(ctx, c, "dense_bias", ctx.batch("dense", bias=True))
    expect_faithful(ctx, c, "sparse_bias", ctx.batch("sparse", bias=True))
    expect_faithful(ctx, c, "sparse_bias_scaling_4_chunked", chunked(with_(ctx.batch("sparse", bias=True),
                                                                            scaling=4.0)))
    half_cases(ctx, c, "all_masked_bias",
               lambda label, opts: expect_zero(ctx, c, label, _make(ctx, "all_masked", opts, bias=True)))
    half_cases(ctx, c, "sparse_bias",
               lambda label, opts: expect_faithful(ctx, c, label, _make(ctx, "sparse", opts, bias=True)))


def test_09_no_shift(ctx: Context, c: Checks) -> None:
    expect_zero(ctx, c, "all_masked_no_shift", ctx.batch("all_masked", shift_labels=False))
    expect_zero(ctx, c, "all_masked_no_shift_n_items_0",
                with_(ctx.batch("all_masked", shift_labels=False), n_items=_count(0.0)))
    # Pre-shifted labels with only position 0 trainable: not empty (no shift applies).
    expect_faithful(ctx, c, "first_only_no_shift", ctx.batch("first_only", shift_labels=False))
    expect_faithful(ctx, c, "dense_no_shift", ctx.batch("dense", shift_labels=False))
    expect_faithful(ctx, c, "mixed_rows_no_shift_chunked", chunked(ctx.batch("mixed_rows", shift_labels=False)))


def test_10_shift_empties(ctx: Context, c: Checks) -> None:
    expect_zero(ctx, c, "first_only", ctx.batch("first_only"))
    expect_zero(ctx, c, "first_only_chunked", chunked(ctx.batch("first_only")))
    # Only the last position trainable: it survives the shift (target of the one before).
    batch = ctx.batch("dense")
    batch.labels[:, :-1] = kernel.IGNORE
    expect_faithful(ctx, c, "last_only", batch)
    # Rows differ: row 0 keeps only its last label (survives), row 1 only its first (dropped).
    batch = ctx.batch("first_only")
    batch.labels[0] = kernel.IGNORE
    batch.labels[0, -1] = 3
    expect_faithful(ctx, c, "last_only_row0_first_only_row1", batch)


def test_14_n_items_zero(ctx: Context, c: Checks) -> None:
    """Every spelling of a zero count the trainer may send (DESIGN.md section 1)."""
    spellings: dict[str, Any] = {
        "tensor_0d": _count(0.0),
        "tensor_1_element": torch.zeros(1),
        "tensor_long": torch.tensor(0),
        "int": 0,
        "float": 0.0,
    }
    for name, zero in spellings.items():
        expect_zero(ctx, c, f"all_masked_n_items_0_{name}", with_(ctx.batch("all_masked"), n_items=zero))
    zero = _count(0.0)
    expect_zero(ctx, c, "all_masked_n_items_0_chunked", chunked(with_(ctx.batch("all_masked"), n_items=zero)))
    expect_zero(ctx, c, "all_masked_n_items_0_overwrite", with_(ctx.batch("all_masked"), n_items=zero,
                                                               overwrite=True))
    expect_zero(ctx, c, "mask_all_zero_n_items_0", with_(ctx.batch("dense", mask=True), n_items=zero))
    expect_zero(ctx, c, "first_only_n_items_0_bias", with_(ctx.batch("first_only", bias=True), n_items=zero))
    for route in ("public", "adapter"):
        run = expect_zero(ctx, c, f"all_masked_n_items_0_route_{route}",
                          with_(ctx.batch("all_masked"), n_items=zero), route=route)
        c.details[f"all_masked_n_items_0_route_{route}"]["grad_fn"] = run.summary.get("grad_fn")
    half_cases(ctx, c, "all_masked_n_items_0",
               lambda label, opts: expect_zero(ctx, c, label, with_(_make(ctx, "all_masked", opts), n_items=zero)))


# ---------------------------------------------------------------- tests 11-13: the guard object


def _check_cache_cleared(ctx: Context, c: Checks, action: str, fn: Callable[[], Any]) -> None:
    """Fill zoo's mapping cache, run ``fn``; when the forward object changed the cache must be empty."""
    cache = mapping_cache()
    if cache is None:
        c.details[f"cache_after_{action}"] = "n/a: zoo has no _get_mapping cache"
        return
    ctx.run(ctx.batch("dense"))
    before_entry = forward_entry()
    filled = cache.cache_info().currsize
    fn()
    changed = forward_entry() is not before_entry
    size = cache.cache_info().currsize
    c.details[f"cache_after_{action}"] = {"filled": filled, "forward_changed": changed, "size_after": size}
    if changed and filled:
        c.expect(size == 0, f"{action}() changed the forward but left _get_mapping's cache filled")


def _check_cache_consistent(c: Checks, label: str) -> None:
    cache = mapping_cache()
    if cache is None:
        return
    fresh = cache.__wrapped__(fused_class())
    cached = cache(fused_class())
    c.details[f"mapping_{label}"] = {"cached": list(cached[0]), "fresh": list(fresh[0])}
    c.expect(cached == fresh, f"{label}: _get_mapping cache disagrees with the current forward's signature")


def test_11_idempotent(ctx: Context, c: Checks) -> None:
    install, uninstall = ctx.hooks("install", "uninstall")
    raw_sig = ctx.raw["signature"] if ctx.raw else None
    uninstall()
    original = forward_entry()
    zoo_sig = fingerprint(original)["signature"]
    _check_cache_cleared(ctx, c, "install", install)
    first = forward_entry()
    second_result = install()
    second = forward_entry()
    c.details["install_results"] = {"second": second_result}
    c.details["forward_after_install"] = fingerprint(first)
    c.expect(second is first, "second install() replaced the forward again (not one wrapper)")
    sig = fingerprint(second)["signature"]
    c.details["signature"] = {"zoo": zoo_sig, "raw": raw_sig, "after_install": sig}
    c.expect(sig == zoo_sig, f"signature changed: {sig} != {zoo_sig}")
    if raw_sig is not None:
        c.expect(sig == raw_sig, "signature differs from the raw process's")
    _check_cache_consistent(c, "after_install_twice")
    for problem in is_zero_answer(ctx.run(ctx.batch("all_masked"))):
        c.expect(False, f"all-masked after two installs: {problem}")
    batch = ctx.batch("sparse", bias=True)
    twice = ctx.run(batch)
    uninstall()
    install()
    if first is not original:
        c.expect(forward_entry() is not original, "install() after uninstall() did nothing")
    once = ctx.run(batch)
    diffs = same_run(twice, once)
    c.expect(not diffs, "two installs behave unlike one: " + ", ".join(diffs))
    _check_cache_consistent(c, "after_reinstall")


def test_12_uninstall(ctx: Context, c: Checks) -> None:
    uninstall, install = ctx.hooks("uninstall", "install")
    as_found = forward_entry()
    _check_cache_cleared(ctx, c, "uninstall", uninstall)
    restored = forward_entry()
    c.details["forward_after_uninstall"] = fingerprint(restored)
    c.expect(is_zoo_forward(restored, ctx.raw), "after uninstall() the forward is not zoo's own function")
    c.expect(isinstance(restored, staticmethod), "after uninstall() forward is not a staticmethod entry")
    is_installed = ctx.guard.hook("is_installed")
    if is_installed is not None:
        c.expect(not is_installed(), "is_installed() is True after uninstall()")
    run = ctx.run(ctx.batch("all_masked"))
    c.details["all_masked_uninstalled"] = run.summary
    vulnerable = ctx.zoo_vulnerable
    if vulnerable is True:
        c.expect(not run.summary["loss_finite"], "uninstalled on a vulnerable zoo, but no NaN")
    elif vulnerable is False:
        c.note("zoo carries the fix: NaN-returns half n/a")
    needs = ctx.guard.hook("zoo_needs_guard")
    if needs is not None and vulnerable is not None:
        answer = bool(needs())
        c.details["zoo_needs_guard"] = answer
        c.expect(answer == vulnerable, f"zoo_needs_guard() says {answer}, raw kernel says {vulnerable}")
    install()
    uninstall()
    c.expect(forward_entry() is restored, "second uninstall() restored a different object")
    install()
    if as_found is not restored:
        c.expect(forward_entry() is not restored, "install() did not put the guard back")


def test_13_fixed_zoo(ctx: Context, c: Checks) -> None:
    if ctx.zoo_vulnerable is None:
        raise NotApplicableError("zoo state unknown (raw kernel not measured)")
    if ctx.zoo_vulnerable:
        raise NotApplicableError("zoo is vulnerable; this test is for a zoo that carries the fix")
    entry = forward_entry()
    untouched = is_zoo_forward(entry, ctx.raw)
    c.details["forward_after_import"] = fingerprint(entry)
    if ctx.guard.module is None and untouched:
        raise NotApplicableError("no guard in this build")
    c.expect(untouched, "a guard replaced the forward on a zoo that carries the fix")
    install = ctx.guard.hook("install")
    if install is None:
        c.note("guard exposes no install(): judged black-box")
        return
    result = install()
    c.details["install_result"] = result
    c.expect(forward_entry() is entry, "install() replaced the forward on a zoo that carries the fix")
    is_installed = ctx.guard.hook("is_installed")
    if is_installed is not None:
        c.expect(not is_installed(), "is_installed() is True on a zoo that carries the fix")
    needs = ctx.guard.hook("zoo_needs_guard")
    if needs is not None:
        c.expect(not needs(), "zoo_needs_guard() is True on a zoo that carries the fix")


AFTER_TESTS: dict[str, Callable[[Context, Checks], None]] = {
    "02-after": test_02_after,
    "03-dense": test_03_dense,
    "04-dense-n-items": test_04_dense_n_items,
    "05-sparse": test_05_sparse,
    "06-sparse-n-items": test_06_sparse_n_items,
    "07-mask": test_07_mask,
    "08-bias": test_08_bias,
    "09-no-shift": test_09_no_shift,
    "10-shift-empties": test_10_shift_empties,
    "11-idempotent": test_11_idempotent,
    "12-uninstall": test_12_uninstall,
    "13-fixed-zoo": test_13_fixed_zoo,
    "14-n-items-zero": test_14_n_items_zero,
}


# ---------------------------------------------------------------- extras


def _route_all_masked(ctx: Context, route: str, torch_compile: bool) -> Callable[[Checks], None]:
    def probe(c: Checks) -> None:
        run = execute(ctx.batch("all_masked"), torch_compile=torch_compile, route=route)
        c.details["all_masked"] = run.summary
        c.details["grad_fn"] = run.summary.get("grad_fn")
        problems = is_zero_answer(run)
        c.expect(not problems, ", ".join(problems))
        if torch_compile:
            batch = ctx.batch("dense")
            dense = execute(batch.fresh(), torch_compile=True, route=route)
            diffs = close_run(dense, reference(batch.fresh()))
            c.details["dense"] = dense.summary
            c.expect(not diffs, "dense compiled: " + ", ".join(diffs))

    return probe


def _compile_overwrite(c: Checks) -> None:
    cache = Path.cwd() / "unsloth_compiled_cache"
    files = sorted(cache.glob("*.py")) if cache.is_dir() else []
    mentions = [p.name for p in files if "fused_ce_loss" in p.read_text(errors="replace")
                or "UnslothFusedLoss" in p.read_text(errors="replace")]
    c.details["compiled_cache"] = {"dir": str(cache), "files": len(files), "mention_fused_ce": mentions,
                                   "UNSLOTH_COMPILE_OVERWRITE": os.environ.get("UNSLOTH_COMPILE_OVERWRITE")}
    raise NotApplicableError(
        "generated forwards in unsloth_compiled_cache/ run only through a loaded model, which needs a "
        "GPU; the cache was scanned for files that reach the fused CE instead (details)"
    )


def extra_probes(ctx: Context) -> list[TestResult]:
    results = [
        run_test("x-public-all-masked", _route_all_masked(ctx, "public", ctx.torch_compile),
                 "public route unsloth_fused_ce_loss, all-masked after import"),
        run_test("x-adapter-all-masked", _route_all_masked(ctx, "adapter", ctx.torch_compile),
                 "adapter route unsloth_fused_lm_head_loss, all-masked after import"),
    ]

    def compiled(c: Checks) -> None:
        if not ctx.torch_compile:
            raise NotApplicableError("run with --compile on (costs about a minute on CPU)")
        _route_all_masked(ctx, "public", True)(c)

    results.append(run_test("x-compiled", compiled, "torch_compile=True through the public route"))
    results.append(run_test("x-compile-overwrite-0", _compile_overwrite,
                            "UNSLOTH_COMPILE_OVERWRITE=0 (stale generated forwards)"))
    return results
