"""The runtime detector: the raw kernel, in a process that never imported unsloth.

Run by the raw phase (``probes.phases``), which sets
``UNSLOTH_IS_PRESENT=1 UNSLOTH_ALLOW_CPU=1`` so zoo imports on a
driverless host without unsloth. A tiny all-masked CPU batch goes through
``UnslothFusedLoss`` directly once per form of the caller's count
(``ZERO_FORMS``): ``None`` (a custom loop), the Python numbers 0 and 0.0, a
0-d tensor 0 (what zoo's trainer patch sends as ``num_items_in_batch`` when a
whole accumulation step is masked, README.md#the-evidence) and a one-element
tensor ``[0]``; and once per control (``CONTROL_FORMS``): the same forms with a
positive count, which every zoo should answer with a finite 0.0.

Verdict: ``fixed`` only when every zero/None form gives a finite loss and finite
gradients; ``vulnerable`` when any of them does not -- a non-finite value, or a
raise while the same form with a positive count goes through: a kernel that
raises on the trainer's ``tensor(0)`` crashes the user's run, the hazard in
another shape, so such a raise counts against the zoo, never as finite. A form
that raises with a positive count too is one this zoo does not take at all
(zoo 2026.9.3 and 2026.10.9 refuse any one-element ``[n]`` count: the loss keeps the
count's shape); that says nothing about the zero divisor, so it is left out of
the verdict and named in the reason. The reason names the forms on each side.
``absent`` when zoo has no such module or class. Each form's outcome is kept
under ``forms``; ``outcome`` is the ``None`` row (the detector's original probe,
kept for compatibility). When no call goes through at all, the first error is
raised: the probe cannot run the kernel, and the step reads ``error``, not a
finding. Loss and each gradient are reported separately (on CPU the vulnerable
kernel gives a NaN loss with finite, zero gradients).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from probes.common import dist_version, error_text, import_raw_kernel

# The caller's count on a fully masked micro-batch, as each caller hands it over:
# (name, factory, the same form with a positive count or None). Factories, so that every call gets its own
# value (zoo may move or overwrite a tensor it is given).
ZERO_FORMS: tuple[tuple[str, Callable[[Any], Any], str | None], ...] = (
    ("None", lambda torch: None, None),
    ("0", lambda torch: 0, "5"),
    ("0.0", lambda torch: 0.0, "5.0"),
    ("tensor(0)", lambda torch: torch.tensor(0), "tensor(5)"),
    ("tensor([0])", lambda torch: torch.tensor([0]), "tensor([5])"),
)
# The controls: a positive count in each form, on the same batch (sum 0 over 5 items is 0.0 on every zoo).
# Not part of the verdict; they tell a raise caused by the zero from a form this zoo does not take at all.
CONTROL_FORMS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("5", lambda torch: 5),
    ("5.0", lambda torch: 5.0),
    ("tensor(5)", lambda torch: torch.tensor(5)),
    ("tensor([5])", lambda torch: torch.tensor([5])),
)


def _finite(out: dict[str, Any]) -> bool:
    return "error" not in out and bool(out.get("loss_finite")) and bool(out.get("grads_finite", True))


def _first_line(out: dict[str, Any]) -> str:
    return str(out["error"]).splitlines()[0][:160]


def _what(out: dict[str, Any]) -> str:
    """How one form went wrong, in a few words."""
    if "error" in out:
        return f"raised {_first_line(out)}"
    if not out.get("loss_finite"):
        return f"loss {out.get('loss')}" + ("" if out.get("grads_finite", True) else ", gradients non-finite too")
    return "gradients non-finite (loss finite)"


def judge_forms(forms: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """``(verdict, reason)`` from each form's outcome (``{form name: outcome}``). Pure; no torch.

    A zero/None form is finite (loss and gradients), bad (a non-finite value; or a raise while the same
    form with a positive count goes through: the zero crashes the caller, so it counts against the zoo) or
    not taken (it raises and so does its positive control: this zoo does not accept that form at all, which
    says nothing about the zero divisor; left out of the verdict and named in the reason). ``fixed`` when no
    zero/None form is bad and at least one is finite; ``vulnerable`` when any is bad.
    """
    zero = [(name, control) for name, _, control in ZERO_FORMS if name in forms]
    if not zero:
        raise ValueError("no zero/None count form was probed")

    def not_taken(name: str, control: str | None) -> bool:
        return "error" in forms[name] and control is not None and "error" in forms.get(control, {})

    skipped = [n for n, c in zero if not_taken(n, c)]
    judged = [n for n, _ in zero if n not in skipped]
    bad = [n for n in judged if not _finite(forms[n])]
    good = [n for n in judged if n not in bad]
    nan = [n for n in bad if "error" not in forms[n]]
    raised = [n for n in bad if "error" in forms[n]]
    if not judged:
        raise ValueError("no zero/None count form could be judged")
    if not bad:
        reason = f"all-masked batch: finite for n_items={', '.join(good)} (loss {forms[good[0]].get('loss')})"
    else:
        parts = []
        if nan:
            first = forms[nan[0]]
            grads = "gradients non-finite" if not first.get("grads_finite", True) else "gradients finite"
            word = "NaN" if all(str(forms[n].get("loss")).lower() == "nan" for n in nan) else "non-finite"
            parts.append(f"{word} for n_items={', '.join(nan)} (loss {first.get('loss')}, {grads})")
        if raised:
            parts.append("raised for n_items=" + "; ".join(f"{n} ({_first_line(forms[n])})" for n in raised)
                         + " while the same form with a positive count goes through (a crash on a count a "
                         "caller sends: counted as vulnerable)")
        parts.append(f"finite for {', '.join(good)}" if good else "finite for none of the zero/None forms")
        reason = "all-masked batch: " + "; ".join(parts)
    if skipped:
        reason += (f"; not judged: n_items={', '.join(skipped)} (raises with a positive count too, so this zoo "
                   f"does not take that form: {_what(forms[skipped[0]])})")
    odd = [c for c, _ in CONTROL_FORMS if c in forms and "error" not in forms[c] and not _finite(forms[c])]
    if odd:
        reason += (f"; control n_items={', '.join(odd)} is not finite ({_what(forms[odd[0]])}): the kernel "
                   "misbehaves on an all-masked batch even with a positive count")
    return ("fixed" if not bad else "vulnerable"), reason


def _run_form(kernel: Any, torch: Any, device: str, make: Callable[[Any], Any]) -> dict[str, Any]:
    batch = kernel.make_batch("all_masked", device=device)
    value = make(torch)
    batch.n_items = value.to(device) if torch.is_tensor(value) else value
    try:
        return kernel.outcome(kernel.call(batch, "function"), batch)  # type: ignore[no-any-return]
    except Exception as exc:  # a form the kernel refuses is evidence about that form, not a probe crash
        return {"error": error_text(exc, limit=3), "exception": type(exc).__name__, "loss": None,
                "loss_finite": False, "grads_finite": False}


def run(device: str) -> dict[str, Any]:
    if "unsloth" in sys.modules:  # pragma: no cover - a wiring bug, not a finding
        raise RuntimeError("the runtime detector must run in a process that never imported unsloth")
    import torch

    from . import kernel

    result: dict[str, Any] = {"zoo_version": dist_version("unsloth_zoo"), "torch_version": torch.__version__,
                              "device": device}
    if import_raw_kernel(result, kernel.CE_MODULE, lambda: importlib.import_module(kernel.CE_MODULE),
                         kernel.FUNCTION_NAME) is None:
        return result
    forms = {name: _run_form(kernel, torch, device, make)
             for name, make in [*((n, m) for n, m, _ in ZERO_FORMS), *CONTROL_FORMS]}
    if all("error" in out for out in forms.values()):
        # Not one call went through, a positive count included: the probe cannot run this kernel.
        raise RuntimeError("the raw kernel raised for every count form, so the detector cannot judge it; "
                           f"n_items=None: {forms['None']['error']}")
    result["forms"] = forms
    result["outcome"] = forms["None"]
    verdict, reason = judge_forms(forms)
    result.update(verdict=verdict, reason=reason)
    return result
