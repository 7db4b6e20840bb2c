"""The per-example properties: zoo's answer (raw process) against the guarded answer (unsloth process).

Each property is a function ``(zoo, guarded, twin) -> (applies, failure)``
over the compact answers of ``inputs.run``: ``applies`` says whether the
example is one the property judges, ``failure`` is None or the one-line
difference. ``twin`` is zoo's answer on the non-empty twin of an input in
the empty region (its meta is what an empty answer must carry). The
side-effect properties have a per-example part here (what one call changed)
and a process-wide part in ``judge.py`` (what ``import unsloth`` changed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .oracle import in_region

Answer = dict[str, Any]
Verdict = tuple[bool, str | None]


def loss_value(ans: Answer) -> str:
    """The loss of a compact answer, printed (``float.hex`` back to a value)."""
    try:
        return f"{float.fromhex(ans['l']):.8g}"
    except (KeyError, ValueError, TypeError):
        return str(ans.get("l"))


def _exc_type(text: str | None) -> str | None:
    return None if text is None else text.split(":", 1)[0]


def _loss_text(a: Answer) -> str:
    if "e" in a:
        return f"raised {a['e']}"
    return f"{loss_value(a)} (bits {a.get('l')})"


def _meta_text(meta: str | None) -> str:
    if not meta:
        return "no answer"
    kind, dtype, shape, device, rg = (meta.split("|") + ["?"] * 5)[:5]
    if kind != "Tensor":
        return f"a Python {kind}"
    return f"{dtype} shape {shape} on {device} requires_grad={bool(int(rg))}"


def _grad(text: str | None) -> tuple[str, bool, bool] | None:
    if text is None:
        return None
    d, f, z = text.split("|")
    return d, f == "1", z == "1"


def _grad_text(text: str | None) -> str:
    g = _grad(text)
    if g is None:
        return "none"
    return "zero" if g[2] else ("finite" if g[1] else "non-finite") + f" {g[0][:8]}"


def _answered(a: Answer) -> bool:
    return "e" not in a


def same_answer(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    if not (_answered(zoo) and zoo.get("f")):
        return False, None
    if "e" in guarded:
        return True, f"zoo loss {_loss_text(zoo)}, guarded raised {guarded['e']}"
    if (guarded.get("m"), guarded.get("l"), guarded.get("d")) != (zoo.get("m"), zoo.get("l"), zoo.get("d")):
        return True, f"zoo loss {_loss_text(zoo)}, guarded {_loss_text(guarded)}"
    return True, None


def same_gradients(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    if not _answered(zoo) or in_region(zoo) or "b" in zoo or "e" in guarded or "b" in guarded:
        return False, None
    zg, gg = zoo.get("g") or {}, guarded.get("g") or {}
    for leaf in sorted(set(zg) | set(gg)):
        a, b = zg.get(leaf), gg.get(leaf)
        if (a is None) != (b is None) or (a is not None and b is not None and a.split("|")[0] != b.split("|")[0]):
            return True, f"grad of {leaf}: zoo {_grad_text(a)}, guarded {_grad_text(b)}"
    return True, None


def _reference_meta(zoo: Answer, twin: Answer | None) -> str | None:
    if in_region(zoo) and twin is not None and _answered(twin):
        return twin.get("m")  # type: ignore[no-any-return]
    return zoo.get("m")  # type: ignore[no-any-return]


def same_meta(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    if not _answered(zoo) or not _answered(guarded):
        return False, None
    ref = _reference_meta(zoo, twin)
    if guarded.get("m") != ref:
        what = "zoo answers a non-empty batch with" if in_region(zoo) else "zoo answers"
        return True, f"{what} {_meta_text(ref)}, guarded {_meta_text(guarded.get('m'))}"
    return True, None


def same_exception(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    ze, ge = _exc_type(zoo.get("e")), _exc_type(guarded.get("e"))
    if ze != ge:
        left = f"zoo raises {zoo['e']}" if ze else f"zoo answers loss {_loss_text(zoo)}"
        right = f"guarded raises {guarded['e']}" if ge else f"guarded answers loss {_loss_text(guarded)}"
        return True, f"{left}; {right}"
    if ze is None:
        zb, gb = _exc_type(zoo.get("b")), _exc_type(guarded.get("b"))
        if zb != gb:
            left = f"zoo's backward raises {zoo['b']}" if zb else "zoo's backward works"
            right = f"the guarded backward raises {guarded['b']}" if gb else "the guarded backward works"
            return True, f"{left}; {right}"
    return True, None


def defined_empty_answer(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    if not in_region(zoo):
        return False, None
    if "e" in guarded:
        return True, f"zoo loss {_loss_text(zoo)}, guarded raised {guarded['e']} (expected 0)"
    problems = []
    if not (guarded.get("z") and guarded.get("f")):
        problems.append(f"guarded {_loss_text(guarded)} (expected 0)")
    ref = _reference_meta(zoo, twin)
    if guarded.get("m") != ref:
        problems.append(f"loss is {_meta_text(guarded.get('m'))}, zoo's non-empty answer {_meta_text(ref)}")
    if "b" in guarded and "b" not in zoo:
        problems.append(f"backward raised {guarded['b']}")
    zg, gg = zoo.get("g") or {}, guarded.get("g") or {}
    if "b" not in zoo:
        for leaf in sorted(set(zg) | set(gg)):
            g = _grad(gg.get(leaf))
            if zg.get(leaf) is not None and g is None:
                problems.append(f"no gradient for {leaf}")
            elif g is not None and not (g[1] and g[2]):
                problems.append(f"grad of {leaf} {_grad_text(gg.get(leaf))} (expected zero)")
    zc, gc = zoo.get("c") or {}, guarded.get("c") or {}
    if "hidden" in zc and not gc.get("hidden", "").endswith("|1"):
        problems.append("overwrite=True: hidden_states not left as the zero gradient")
    if problems:
        return True, f"zoo loss {_loss_text(zoo)}; " + ", ".join(problems)
    return True, None


def non_finite_stays(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    if not _answered(zoo) or zoo.get("f") or in_region(zoo) or not _answered(guarded):
        return False, None
    if guarded.get("f"):
        return True, f"zoo loss {_loss_text(zoo)} (non-finite from the inputs), guarded {_loss_text(guarded)}"
    return True, None


def env_per_call(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    extra = sorted(set(guarded.get("env") or ()) - set(zoo.get("env") or ()))
    return True, (f"the guarded call changed os.environ {', '.join(extra)} (zoo's call did not)" if extra else None)


def globals_per_call(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    changed = guarded.get("globals_changed") or []
    return True, (f"the guarded call changed {', '.join(changed)}" if changed else None)


def caller_tensors(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    zc, gc = zoo.get("c") or {}, guarded.get("c") or {}
    extra = sorted(set(gc) - set(zc))
    if extra:
        return True, f"the guarded call changed the caller's {', '.join(extra)} (zoo's call leaves them alone)"
    if in_region(zoo) or "e" in zoo or "e" in guarded:
        return True, None
    differ = sorted(k for k in zc if gc.get(k, "").split("|")[:2] != zc[k].split("|")[:2])
    if differ:
        return True, f"the caller's {', '.join(differ)} end differently from zoo's call (zoo changes them too)"
    return True, None


PER_EXAMPLE: dict[str, Callable[[Answer, Answer, Answer | None], Verdict]] = {
    "d1-same-answer": same_answer,
    "d2-same-gradients": same_gradients,
    "d3-same-meta": same_meta,
    "d4-same-exception": same_exception,
    "d5-defined-empty-answer": defined_empty_answer,
    "d6-non-finite-stays": non_finite_stays,
    "d7-no-side-effects-env": env_per_call,
    "d8-no-side-effects-globals": globals_per_call,
    "d9-caller-tensors-unchanged": caller_tensors,
}
