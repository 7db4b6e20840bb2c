"""Guard against a NaN loss from zoo's fused cross-entropy on a microbatch with no trainable label.

Older ``unsloth_zoo`` releases divide the summed loss of
``unsloth_zoo.fused_losses.cross_entropy_loss.UnslothFusedLoss`` by the
caller's ``n_items``, else by the count of labels that survive the causal
shift and the ``mask``. On a microbatch with no label left that divisor is
zero both when the caller passes no ``n_items`` and when it passes ``0``
(what zoo's own trainer patch sends for a fully masked accumulation step),
and the loss is ``0 / 0 = NaN``. This module, installed as
``unsloth/fused_ce_guard.py`` and called once from ``import unsloth``,
replaces ``UnslothFusedLoss.forward`` at class level with a thin wrapper that
answers exactly that case (no label left AND a zero divisor) with a finite
``0.0`` loss and zero gradients, and hands every other call to zoo's own
forward untouched: a NaN that comes from the inputs stays NaN.

Why class level: callers bind ``unsloth_fused_ce_loss`` by value
(``from ... import``), but every route ends in ``UnslothFusedLoss.apply``,
which looks ``cls.forward`` up at call time, so one attribute covers them all
(eager and ``torch_compile=True`` alike: the compiled part lives inside the
forward we delegate to).

Why a probe call, not a source check, decides whether zoo needs us: the
property we care about is behavioural ("does an all-masked batch with no
``n_items``, or with ``n_items = 0``, give a non-finite loss?"), and the fix can be spelled many ways
(a helper such as a non-zero count, a clamp, a ``torch.where`` in the forward
or in the inner loss function). Reading the AST of ``forward`` would have to
follow helper calls and guess at spellings, and it goes stale on the next
refactor; running zoo's ORIGINAL forward on a 1x2 all-masked CPU batch
(``torch_compile=False``, explicit ``target_gb``, deterministic values so the
global RNG is not consumed, no CUDA query) asks the question directly and
costs a few milliseconds. No version is compared anywhere. If the probe
cannot run (a zoo whose forward no longer fits this shape), we do not know
what we would be patching, so the guard stays out and logs a warning.

Protocol (driven by the behaviour suite): ``install()``, ``uninstall()``,
``is_installed()``, ``zoo_needs_guard()``. Set ``UNSLOTH_FUSED_CE_GUARD=0``
to keep the guard from installing at import.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import math
import os
from typing import Any

__all__ = ["install", "is_installed", "uninstall", "zoo_needs_guard"]

_CE_MODULE = "unsloth_zoo.fused_losses.cross_entropy_loss"
_CLASS = "UnslothFusedLoss"
# Set on our wrapper function; holds the class-dict entry it replaced.
_MARK = "__unsloth_fused_ce_guard_original__"
_DEFAULT_IGNORE = -100

logger = logging.getLogger(__name__)

# The answer of the probe, keyed by the original forward function it ran on.
_verdicts: dict[int, tuple[Any, tuple[bool, bool]]] = {}


class _ProbeCtx:
    """Stand-in for autograd's ctx during the probe call: keeps what forward saves."""

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors


def _target() -> tuple[Any, type] | None:
    """zoo's loss module and the Function class, or None when this zoo has none."""
    try:
        module = importlib.import_module(_CE_MODULE)
    except Exception:
        return None
    cls = getattr(module, _CLASS, None)
    if not isinstance(cls, type) or "forward" not in cls.__dict__:
        return None
    return module, cls


def _wrapper_of(entry: Any) -> Any:
    """The function behind a class-dict entry (a staticmethod or a plain function)."""
    return entry.__func__ if isinstance(entry, staticmethod) else entry


def _original_entry(cls: type) -> Any:
    """zoo's own class-dict entry for ``forward``, whether or not we are installed."""
    entry = cls.__dict__["forward"]
    return getattr(_wrapper_of(entry), _MARK, entry)


def _clear_mapping_cache(module: Any) -> None:
    # apply_autograd_function reads the positional order from a functools.cache of
    # inspect.signature(forward); drop it whenever the forward object changes.
    cached = getattr(module, "_get_mapping", None)
    clear = getattr(cached, "cache_clear", None)
    if callable(clear):
        clear()


def _probe(module: Any, forward: Any) -> tuple[bool, bool]:
    """Run zoo's original ``forward`` on a tiny all-masked batch: (NaN with no ``n_items``, NaN with 0).

    Asked twice: a zoo that fixed one of the two still needs the guard for
    the other, and only for that one (where zoo answers, its answer stands).
    """
    import torch

    hidden = torch.linspace(-1.0, 1.0, 8).reshape(1, 2, 4)
    weight = torch.linspace(-0.5, 0.5, 12).reshape(3, 4)
    labels = torch.full((1, 2), _DEFAULT_IGNORE, dtype=torch.long)
    given = {
        "loss_function": module.compute_fused_ce_loss,
        "hidden_states": hidden,
        "lm_head_weight": weight,
        "lm_head_bias": None,
        "labels": labels,
        "mask": None,
        "n_items": None,
        "scaling": None,
        "shift_labels": True,
        "target_gb": 1.0,
        "torch_compile": False,
        "overwrite": False,
        "extra_kwargs": {},
    }
    parameters = list(inspect.signature(forward).parameters.values())[1:]
    args = [given.get(p.name, p.default) for p in parameters]
    if any(a is inspect.Parameter.empty for a in args):
        raise TypeError(f"{_CLASS}.forward takes a parameter the probe does not know: {parameters}")
    at = [p.name for p in parameters].index("n_items")
    losses = []
    # autograd.Function.apply runs forward with grad disabled; do the same.
    with torch.no_grad():
        for n_items in (None, torch.zeros(())):
            args[at] = n_items
            losses.append(float(forward(_ProbeCtx(), *args)))
    return not math.isfinite(losses[0]), not math.isfinite(losses[1])


def _nan_forms() -> tuple[bool, bool]:
    """(zoo NaNs with no count, zoo NaNs with a count of 0) for zoo's original forward, probed once per
    forward object; (False, False) when zoo has no fused loss or the probe cannot run (a warning says why)."""
    found = _target()
    if found is None:
        return False, False
    module, cls = found
    forward = _wrapper_of(_original_entry(cls))
    known = _verdicts.get(id(forward))
    if known is not None and known[0] is forward:
        return known[1]
    try:
        verdict = _probe(module, forward)
    except Exception as exc:
        logger.warning("Unsloth: fused CE guard could not probe %s.%s.forward (%r); leaving it as is.",
                       _CE_MODULE, _CLASS, exc)
        return False, False
    _verdicts[id(forward)] = (forward, verdict)
    return verdict


def zoo_needs_guard() -> bool:
    """True when zoo's original forward gives a non-finite loss on an all-masked batch (n_items None or 0)."""
    return any(_nan_forms())


def _bind(names: tuple[str, ...], defaults: tuple[Any, ...], args: tuple, kwargs: dict) -> dict[str, Any]:
    """Name every argument of a forward call the way zoo's signature would."""
    values = dict(kwargs)
    for i, name in enumerate(names):
        if i < len(args):
            values[name] = args[i]
        elif name not in values:
            values[name] = defaults[i]
    return values


def _zero_count(n_items: Any) -> bool:
    """True when the caller's count is exactly 0 in a form zoo answers: a Python or NumPy number or a 0-d
    tensor. A count of another shape (zoo raises for a (1,) tensor: its forward must return a scalar) is
    left to zoo, and so is NaN (not 0: it stays NaN)."""
    import torch

    try:
        value = torch.as_tensor(n_items)
    except Exception:
        return False  # zoo's torch.tensor() rejects it too: let zoo raise
    return value.dim() == 0 and bool(value == 0)


def _zero_divisor(n_items: Any, forms: tuple[bool, bool]) -> bool:
    """True when zoo would divide by zero for want of a count, on a form it NaNs for (``_nan_forms``):
    ``n_items`` None, or exactly 0."""
    if n_items is None:
        return forms[0]
    return forms[1] and _zero_count(n_items)


def _nothing_to_learn(values: dict[str, Any], forms: tuple[bool, bool] = (True, True)) -> bool:
    """True only when zoo's forward would divide by zero: a zero divisor and no label left.

    Mirrors zoo's own label handling: the causal shift drops position 0 and
    the last position, ``mask[..., 1:] == 0`` removes positions, and the
    ignore index comes from ``extra_kwargs`` (default -100). With
    ``shift_labels`` falsy zoo uses the labels as given and ignores ``mask``,
    so do we. Anything unusual returns False and zoo decides.
    """
    import torch

    if not _zero_divisor(values.get("n_items"), forms):
        return False
    labels = values.get("labels")
    if not torch.is_tensor(labels) or labels.dim() == 0:
        return False
    extra = values.get("extra_kwargs") or {}
    ignore_index = int(extra.get("ignore_index", _DEFAULT_IGNORE))
    if values.get("shift_labels"):
        keep = labels[..., 1:] != ignore_index
        mask = values.get("mask")
        if mask is not None:
            if not torch.is_tensor(mask) or mask.shape != labels.shape:
                return False
            keep = keep & (mask[..., 1:].to(keep.device) != 0)
    else:
        keep = labels != ignore_index
    return not bool(keep.any())


def _zero_answer(ctx: Any, values: dict[str, Any]) -> Any:
    """Loss 0.0 and zero gradients, saved where zoo's backward reads them (ctx.saved_tensors, ctx.scaling)."""
    import torch

    hidden = values["hidden_states"]
    weight = values["lm_head_weight"]
    bias = values.get("lm_head_bias")
    device = weight.device
    # zoo builds no gradient (and leaves hidden_states alone) when asked for the loss only.
    if values.get("compute_gradients", True):
        if values.get("overwrite"):
            # zoo writes the hidden-state gradient (here 0) into hidden_states under overwrite=True.
            grad_inputs = hidden
            grad_inputs.zero_()
        else:
            grad_inputs = torch.zeros_like(hidden, device=device)
        grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
        grad_bias = torch.zeros_like(bias) if bias is not None and bias.requires_grad else None
        ctx.save_for_backward(grad_inputs, grad_weight, grad_bias)
        ctx.scaling = values.get("scaling")
    return torch.zeros((), device=device)


def _make_wrapper(original_entry: Any) -> Any:
    original = _wrapper_of(original_entry)
    signature = inspect.signature(original)
    parameters = list(signature.parameters.values())
    names = tuple(p.name for p in parameters)
    defaults = tuple(None if p.default is inspect.Parameter.empty else p.default for p in parameters)
    forms = _nan_forms()  # where zoo answers a count by itself, its answer stands

    def forward(*args: Any, **kwargs: Any) -> Any:
        try:
            values = _bind(names[1:], defaults[1:], args[1:], kwargs)
            empty = _nothing_to_learn(values, forms)
        except Exception:
            empty = False
        if not empty:
            return original(*args, **kwargs)
        return _zero_answer(args[0], values)

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(forward, attr, getattr(original, attr, None))
    # apply_autograd_function builds positional arguments from this signature.
    forward.__signature__ = signature  # type: ignore[attr-defined]
    forward.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(forward, _MARK, original_entry)
    return forward


def is_installed() -> bool:
    """True when ``UnslothFusedLoss.forward`` is this guard's wrapper."""
    found = _target()
    if found is None:
        return False
    return hasattr(_wrapper_of(found[1].__dict__["forward"]), _MARK)


def install() -> bool:
    """Put the guard in place if zoo needs it. True when the guard is active afterwards.

    Idempotent (a second call keeps the first wrapper); a no-op on a zoo that
    carries the fix or has no fused loss. Never raises: a failure logs a
    warning and leaves zoo as it was.
    """
    try:
        found = _target()
        if found is None:
            return False
        module, cls = found
        if is_installed():
            return True
        if not zoo_needs_guard():
            return False
        entry = cls.__dict__["forward"]
        cls.forward = staticmethod(_make_wrapper(entry))
        _clear_mapping_cache(module)
        return True
    except Exception as exc:
        logger.warning("Unsloth: fused CE guard not installed (%r).", exc)
        return False


def uninstall() -> bool:
    """Restore zoo's original ``forward`` object. True when something was restored."""
    try:
        found = _target()
        if found is None:
            return False
        module, cls = found
        entry = cls.__dict__["forward"]
        original = getattr(_wrapper_of(entry), _MARK, None)
        if original is None:
            return False
        cls.forward = original
        _clear_mapping_cache(module)
        return True
    except Exception as exc:
        logger.warning("Unsloth: fused CE guard could not be removed (%r).", exc)
        return False


def install_at_import() -> bool:
    """What ``import unsloth`` calls: ``install()`` unless UNSLOTH_FUSED_CE_GUARD=0."""
    if os.environ.get("UNSLOTH_FUSED_CE_GUARD", "1") == "0":
        return False
    return install()
