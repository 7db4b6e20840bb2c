"""What the behaviour tests share: results, checks, the guard handle and kernel runs.

A test is a function that receives a :class:`Context` and a :class:`Checks`;
it records what it saw in ``checks.details``, states expectations with
``checks.expect`` and raises :class:`NotApplicableError` when it does not
apply. :func:`run_test` turns that into a :class:`TestResult` (a crash is a
``fail`` carrying the exception text).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import torch

from probes.checks import installed

from .. import kernel
from . import TITLES

Outcome = Literal["pass", "fail", "n/a"]
ATOL, RTOL = 1e-5, 1e-4
# bf16 inputs round the logits to 8 bits of mantissa; the reference rounds differently.
HALF_TOL = 2e-2


class NotApplicableError(Exception):
    """The test does not apply to this cell; the message is the reason."""


@dataclass
class TestResult:
    id: str
    title: str
    outcome: Outcome
    reason: str
    duration_s: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "outcome": self.outcome,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 4),
            "details": self.details,
        }


class Checks:
    """Expectations of one test: every failed one is named in the reason."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.notes: list[str] = []
        self.details: dict[str, Any] = {}

    def expect(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failed.append(what)
        return ok

    def note(self, text: str) -> None:
        self.notes.append(text)


def run_test(test_id: str, fn: Callable[[Checks], None], title: str | None = None) -> TestResult:
    checks = Checks()
    start = time.perf_counter()
    try:
        fn(checks)
    except NotApplicableError as exc:
        outcome: Outcome = "n/a"
        reason = f"n/a: {exc}"
    except Exception as exc:
        checks.details["traceback"] = traceback.format_exc(limit=8)
        # Expectations that failed before the crash usually name its cause.
        outcome, reason = "fail", "; ".join([*checks.failed, f"crashed: {type(exc).__name__}: {exc}"])
    else:
        outcome = "fail" if checks.failed else "pass"
        reason = "; ".join(checks.failed) if checks.failed else "ok"
    if checks.notes and outcome != "n/a":
        reason += " (" + "; ".join(checks.notes) + ")"
    return TestResult(test_id, title or TITLES.get(test_id, test_id), outcome, reason,
                      time.perf_counter() - start, checks.details)


# ---------------------------------------------------------------- the kernel


def fused_class() -> type:
    return getattr(kernel.ce_module(), kernel.FUNCTION_NAME)  # type: ignore[no-any-return]


def forward_entry() -> Any:
    """The class-dict entry of ``UnslothFusedLoss.forward`` (a staticmethod for zoo's own)."""
    return fused_class().__dict__["forward"]


def fingerprint(fn: Any) -> dict[str, Any]:
    """Where a forward function comes from, comparable across processes."""
    fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    try:
        signature = str(inspect.signature(fn))
    except (TypeError, ValueError) as exc:
        signature = f"<no signature: {exc}>"
    return {**installed.fingerprint(fn), "signature": signature}


def is_zoo_forward(fn: Any, raw: dict[str, Any] | None) -> bool:
    """Black-box: is ``fn`` zoo's own forward (not a replacement)?"""
    fp = fingerprint(fn)
    if raw is not None:
        keys = ("file", "line", "code_sha256", "qualname")
        return all(fp[k] == raw.get(k) for k in keys)
    return fp["file"] == getattr(kernel.ce_module(), "__file__", object())


@dataclass
class Run:
    loss: torch.Tensor
    grads: dict[str, torch.Tensor | None]
    summary: dict[str, Any]
    # hidden_states after the call when overwrite=True (zoo writes the gradient there).
    overwritten: torch.Tensor | None = None


def execute(
    batch: kernel.Batch,
    *,
    torch_compile: bool,
    route: str = "function",
    target_gb: Any = kernel._FROM_BATCH,
) -> Run:
    """Forward and backward once; keep the loss, every gradient and the summary.

    The caller's tensors are compared before and after (forward and
    backward): ``summary["caller_tensors_changed"]`` names those that
    changed, except hidden_states under overwrite=True, which zoo's contract
    lets it replace with the gradient (kept in ``Run.overwritten``).
    """
    before = {k: v.detach().clone() for k, v in batch.tensors().items()}
    loss = kernel.call(batch, route, torch_compile=torch_compile, target_gb=target_gb)
    overwritten = batch.hidden.detach().clone() if batch.overwrite else None
    summary = kernel.outcome(loss, batch)
    after = batch.tensors()
    summary["caller_tensors_changed"] = sorted(
        k for k, v in before.items()
        if not (k == "hidden_states" and batch.overwrite) and (k not in after or not identical(v, after[k].detach()))
    )
    if overwritten is not None:
        summary["overwritten_hidden_all_zero"] = bool((overwritten == 0).all())
    grads: dict[str, torch.Tensor | None] = {}
    for name, t in (("hidden", batch.hidden), ("weight", batch.weight), ("bias", batch.bias)):
        if t is not None and t.requires_grad:
            grads[name] = None if t.grad is None else t.grad.detach().clone()
    return Run(loss.detach().clone(), grads, summary, overwritten)


def reference(batch: kernel.Batch) -> Run:
    loss = kernel.reference_loss(batch)
    loss.backward()
    grads: dict[str, torch.Tensor | None] = {}
    for name, t in (("hidden", batch.hidden), ("weight", batch.weight), ("bias", batch.bias)):
        if t is not None and t.requires_grad:
            grads[name] = None if t.grad is None else t.grad.detach().clone()
    return Run(loss.detach().clone(), grads, {"loss": float(loss.detach())})


def asked_the_accelerator(exc: BaseException) -> bool:
    """True when ``exc`` was raised inside torch's CUDA or XPU package: a memory or device query on a host
    without that accelerator. Judged by where it was raised, not by its text, which differs across torch
    builds ("Torch not compiled with CUDA enabled" on a CPU wheel, "Found no NVIDIA driver on your system"
    on a CUDA wheel without a driver)."""
    packages = [str(Path(torch.__file__).parent / sub) + os.sep for sub in ("cuda", "xpu")]
    frames = traceback.extract_tb(exc.__traceback__)
    return any(f.filename.startswith(tuple(packages)) for f in frames) or "cuda" in str(exc).lower()


def zoo_received(exc: BaseException) -> tuple[bool, Any]:
    """``(found, n_items)``: the count zoo's own forward was called with, read from its frame in ``exc``'s
    traceback (the innermost one), so a test can tell a guard that handed zoo a safe count from one that let
    zoo divide by the count it NaNs on, even where zoo then failed for another reason before answering."""
    try:
        target = inspect.getsourcefile(fused_class())
    except (TypeError, OSError):
        return False, None
    found: tuple[bool, Any] = (False, None)
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "forward" and frame.f_code.co_filename == target and "n_items" in frame.f_locals:
            found = (True, frame.f_locals["n_items"])
        tb = tb.tb_next
    return found


def count_form(n_items: Any) -> str | None:
    """The zero-count form ``n_items`` is (``"None"`` or ``"tensor(0)"``, as test 1 names them), or None for a
    count that is not zero."""
    if n_items is None:
        return "None"
    try:
        zero = (n_items.numel() == 1 and float(n_items) == 0) if torch.is_tensor(n_items) else float(n_items) == 0
    except (TypeError, ValueError, RuntimeError):
        return None
    return "tensor(0)" if zero else None


def identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and values, NaN equal to NaN (torch.equal says NaN != NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def same_run(a: Run, b: Run) -> list[str]:
    """What differs between two runs, bit for bit; empty when nothing does."""
    diffs = []
    if not identical(a.loss, b.loss):
        diffs.append(f"loss {float(a.loss)!r} vs {float(b.loss)!r}")
    if (a.overwritten is None) != (b.overwritten is None):
        diffs.append("hidden_states overwritten in one run only")
    elif a.overwritten is not None and b.overwritten is not None and not identical(a.overwritten, b.overwritten):
        diffs.append("hidden_states overwritten with different values")
    for name in sorted(set(a.grads) | set(b.grads)):
        ga, gb = a.grads.get(name), b.grads.get(name)
        if (ga is None) != (gb is None):
            diffs.append(f"grad {name} present in one run only")
        elif ga is not None and gb is not None and not identical(ga, gb):
            diffs.append(f"grad {name} differs (max abs {float((ga - gb).abs().max())!r})")
    return diffs


def close_run(a: Run, ref: Run) -> list[str]:
    """What is not close (atol 1e-5, rtol 1e-4) to the unchunked reference."""
    diffs = []
    half = any(g is not None and g.dtype in (torch.bfloat16, torch.float16) for g in a.grads.values())
    atol, rtol = (HALF_TOL, HALF_TOL) if half else (ATOL, RTOL)
    if not torch.allclose(a.loss.float(), ref.loss.float(), atol=atol, rtol=rtol):
        diffs.append(f"loss {float(a.loss)!r} vs reference {float(ref.loss)!r}")
    for name, gr in ref.grads.items():
        ga = a.grads.get(name)
        if ga is None or gr is None:
            diffs.append(f"grad {name} missing")
        elif not torch.allclose(ga.float(), gr.float(), atol=atol, rtol=rtol):
            diffs.append(f"grad {name} not close to reference")
    return diffs


def is_zero_answer(run: Run) -> list[str]:
    """Why ``run`` is not loss exactly 0.0 with every gradient present, finite and 0."""
    problems = []
    value = float(run.loss)
    if not math.isfinite(value):
        problems.append(f"loss {value!r}")
    elif value != 0.0:
        problems.append(f"loss {value!r}, expected 0.0")
    if not run.grads:
        problems.append("no input requires grad")
    if run.overwritten is not None and not bool((run.overwritten == 0).all()):
        problems.append("overwrite=True left hidden_states unlike the zero gradient")
    for name, g in run.grads.items():
        if g is None:
            problems.append(f"grad {name} absent")
        elif not bool(torch.isfinite(g).all()):
            problems.append(f"grad {name} not finite")
        elif not bool((g == 0).all()):
            problems.append(f"grad {name} not zero")
    return problems


# ---------------------------------------------------------------- the guard


@dataclass
class Guard:
    """The guard protocol module of this cell, if any, and what happened loading it."""

    name: str
    module: ModuleType | None
    error: str | None = None
    installed_at_load: bool | None = None

    @property
    def found(self) -> bool:
        return self.module is not None

    def hook(self, name: str) -> Callable[[], Any] | None:
        fn = getattr(self.module, name, None) if self.module is not None else None
        return fn if callable(fn) else None

    def require(self, name: str) -> Callable[[], Any]:
        fn = self.hook(name)
        if fn is not None:
            return fn
        if self.module is None:
            raise NotApplicableError("no guard in this build")
        raise NotApplicableError(f"guard exposes no {name}()")

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "found": self.found,
            "file": getattr(self.module, "__file__", None),
            "hooks": [h for h in ("install", "uninstall", "is_installed", "zoo_needs_guard") if self.hook(h)],
            "error": self.error,
            "installed_at_load": self.installed_at_load,
        }


def load_guard(name: str, file: str | None) -> Guard:
    """Import the guard module; with ``file``, load it from there and install it (simulates a backport)."""
    if file is None:
        try:
            return Guard(name, importlib.import_module(name))
        except ImportError as exc:
            return Guard(name, None, f"{type(exc).__name__}: {exc}")
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        return Guard(name, None, f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    guard = Guard(name, module)
    install = guard.hook("install")
    if install is not None:
        guard.installed_at_load = bool(install())
    return guard


@contextlib.contextmanager
def unguarded(guard: Guard) -> Iterator[None]:
    """uninstall() for the body, install() after it: the same zoo without the guard."""
    uninstall, install = guard.require("uninstall"), guard.require("install")
    uninstall()
    try:
        yield
    finally:
        install()


def mapping_cache() -> Any:
    """zoo's functools.cache behind apply_autograd_function, or None."""
    cached = getattr(kernel.ce_module(), "_get_mapping", None)
    return cached if hasattr(cached, "cache_info") else None
