"""Tests 11-13 (the guard object: install twice, uninstall, fixed zoo) and the extra probes.

Tests 11-13 drive a guard through its protocol hooks and check what the
hooks answer (a bool that tells the truth) as well as what they do to
``UnslothFusedLoss.forward`` and zoo's mapping cache. A guard that replaced
the forward without exposing the hooks gets "n/a: guard exposes no
install/uninstall hook", never "no guard in this build".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .context import Context, zero_count_batches
from .support import (
    Checks,
    NotApplicableError,
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
)


def _expect_result(c: Checks, what: str, result: Any, expected: bool) -> None:
    """The protocol's hooks answer with a bool that tells the truth (docs/design.md#the-guard-protocol)."""
    c.details.setdefault("hook_results", {})[what] = result
    c.expect(isinstance(result, bool) and result == expected, f"{what} returned {result!r}, expected {expected}")


def _check_cache_cleared(ctx: Context, c: Checks, action: str, fn: Callable[[], Any]) -> Any:
    """Fill zoo's mapping cache, run ``fn``; when the forward object changed the cache must be empty."""
    cache = mapping_cache()
    if cache is None:
        c.details[f"cache_after_{action}"] = "n/a: zoo has no _get_mapping cache"
        return fn()
    ctx.run(ctx.batch("dense"))
    before_entry = forward_entry()
    filled = cache.cache_info().currsize
    result = fn()
    changed = forward_entry() is not before_entry
    size = cache.cache_info().currsize
    c.details[f"cache_after_{action}"] = {"filled": filled, "forward_changed": changed, "size_after": size}
    if changed and filled:
        c.expect(size == 0, f"{action}() changed the forward but left _get_mapping's cache filled")
    return result


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
    first_result = _check_cache_cleared(ctx, c, "install", install)
    first = forward_entry()
    active = first is not original
    _expect_result(c, "install()", first_result, active)
    second_result = install()
    second = forward_entry()
    _expect_result(c, "second install()", second_result, active)
    is_installed = ctx.guard.hook("is_installed")
    if is_installed is not None:
        _expect_result(c, "is_installed() after install()", is_installed(), active)
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
    result = _check_cache_cleared(ctx, c, "uninstall", uninstall)
    restored = forward_entry()
    _expect_result(c, "uninstall()", result, as_found is not restored)
    c.details["forward_after_uninstall"] = fingerprint(restored)
    c.expect(is_zoo_forward(restored, ctx.raw), "after uninstall() the forward is not zoo's own function")
    c.expect(isinstance(restored, staticmethod), "after uninstall() forward is not a staticmethod entry")
    is_installed = ctx.guard.hook("is_installed")
    if is_installed is not None:
        c.expect(not is_installed(), "is_installed() is True after uninstall()")
    # The NaN returns on the counts that gave it before (test 1): None, or tensor(0) on a zoo fixed for None only.
    form, batch = next(((f, b) for f, b in zero_count_batches(ctx) if f in ctx.nan_forms),
                       zero_count_batches(ctx)[0])
    run = ctx.run(batch)
    c.details["all_masked_uninstalled"] = {**run.summary, "n_items": form}
    vulnerable = ctx.zoo_vulnerable
    if vulnerable is True:
        c.expect(not run.summary["loss_finite"], f"uninstalled on a vulnerable zoo, but no NaN (n_items {form})")
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
    # Nothing installed: uninstall() has nothing to restore and must leave zoo's forward alone.
    _expect_result(c, "uninstall() with nothing installed", uninstall(), False)
    c.expect(forward_entry() is restored, "uninstall() with nothing installed changed the forward")
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
    _expect_result(c, "install()", install(), False)
    c.expect(forward_entry() is entry, "install() replaced the forward on a zoo that carries the fix")
    is_installed = ctx.guard.hook("is_installed")
    if is_installed is not None:
        c.expect(not is_installed(), "is_installed() is True on a zoo that carries the fix")
    needs = ctx.guard.hook("zoo_needs_guard")
    if needs is not None:
        c.expect(not needs(), "zoo_needs_guard() is True on a zoo that carries the fix")


# ---------------------------------------------------------------- extras


def route_all_masked(ctx: Context, route: str, torch_compile: bool) -> Callable[[Checks], None]:
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
        run_test("x-public-all-masked", route_all_masked(ctx, "public", ctx.torch_compile),
                 "public route unsloth_fused_ce_loss, all-masked after import"),
        run_test("x-adapter-all-masked", route_all_masked(ctx, "adapter", ctx.torch_compile),
                 "adapter route unsloth_fused_lm_head_loss, all-masked after import"),
    ]

    def compiled(c: Checks) -> None:
        if not ctx.torch_compile:
            raise NotApplicableError("run with --compile on (costs about a minute on CPU)")
        route_all_masked(ctx, "public", True)(c)

    results.append(run_test("x-compiled", compiled, "torch_compile=True through the public route"))
    results.append(run_test("x-compile-overwrite-0", _compile_overwrite,
                            "UNSLOTH_COMPILE_OVERWRITE=0 (stale generated forwards)"))
    return results
