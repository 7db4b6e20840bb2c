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


def _fixed(zoo: Answer) -> Answer | None:
    """What a zoo carrying the fix answers on an input of the empty region (the raw process's ``fx``)."""
    fx = zoo.get("fx") if in_region(zoo) else None
    return fx if isinstance(fx, dict) and _answered(fx) else None


def _same_as_fixed(fx: Answer, guarded: Answer) -> str | None:
    """None when the guarded answer is the fixed zoo's, bit for bit; else the first difference."""
    if "e" in guarded:
        return f"raised {guarded['e']}"
    if (guarded.get("m"), guarded.get("l"), guarded.get("d")) != (fx.get("m"), fx.get("l"), fx.get("d")):
        return f"loss {_loss_text(guarded)}, the fixed zoo's {_loss_text(fx)}"
    if _exc_type(guarded.get("b")) != _exc_type(fx.get("b")):
        return f"backward {guarded.get('b') or 'works'}, the fixed zoo's {fx.get('b') or 'works'}"
    fg, gg = fx.get("g") or {}, guarded.get("g") or {}
    for leaf in sorted(set(fg) | set(gg)):
        a, b = fg.get(leaf), gg.get(leaf)
        if (a or "").split("|")[0] != (b or "").split("|")[0]:
            return f"grad of {leaf} {_grad_text(b)}, the fixed zoo's {_grad_text(a)}"
    fc, gc = fx.get("c") or {}, guarded.get("c") or {}
    if {k: v.split("|")[:2] for k, v in fc.items()} != {k: v.split("|")[:2] for k, v in gc.items()}:
        return f"changed the caller's {', '.join(sorted(gc)) or 'nothing'}, the fixed zoo {', '.join(sorted(fc))}"
    return None


def same_meta(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    if not _answered(zoo) or not _answered(guarded):
        return False, None
    ref = _reference_meta(zoo, twin)
    fx = _fixed(zoo)
    if guarded.get("m") != ref and not (fx is not None and guarded.get("m") == fx.get("m")):
        what = "zoo answers a non-empty batch with" if in_region(zoo) else "zoo answers"
        return True, f"{what} {_meta_text(ref)}, guarded {_meta_text(guarded.get('m'))}"
    return True, None


ARTEFACTS = {
    "host": "zoo asked for an accelerator this host does not have",
    "count-shape": "zoo rejects a count of that shape on every batch, empty or not, before and after its fix, "
                   "and no trainer sends it (transformers hands the kernel a 0-d tensor or None)",
}


def defined_zero(guarded: Answer) -> bool:
    """The guarded call answered loss 0 (finite) with gradients that are zero or absent, and a backward that works."""
    grads = [_grad(v) for v in (guarded.get("g") or {}).values()]
    return ("e" not in guarded and "b" not in guarded and bool(guarded.get("z") and guarded.get("f"))
            and all(g is None or (g[1] and g[2]) for g in grads))


def excused(zoo: Answer, guarded: Answer) -> bool:
    """zoo raised on a fully masked batch with a zero count for a reason outside the contract (``ARTEFACTS``)
    and the guarded call gave the defined empty answer instead: not a failure."""
    return zoo.get("ca") in ARTEFACTS and "e" not in guarded and defined_zero(guarded)


def same_exception(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    ze, ge = _exc_type(zoo.get("e")), _exc_type(guarded.get("e"))
    if ze != ge and excused(zoo, guarded):
        return True, None
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


def empty_reference(zoo: Answer, guarded: Answer, twin: Answer | None) -> str | None:
    """Which reference of the empty region the guarded answer matched: ``defined-zero``, ``fixed-zoo``,
    ``both`` (they coincide when no NaN/inf reaches the gradients), or None (neither, or not in the region)."""
    if not in_region(zoo):
        return None
    zero = _zero_problems(zoo, guarded, twin) == []
    fx = _fixed(zoo)
    fixed = fx is not None and _same_as_fixed(fx, guarded) is None
    return "both" if zero and fixed else "defined-zero" if zero else "fixed-zoo" if fixed else None


def defined_empty_answer(zoo: Answer, guarded: Answer, twin: Answer | None) -> Verdict:
    """In the region the guarded answer is the defined zero or what a fixed zoo answers (either passes)."""
    if not in_region(zoo):
        return False, None
    problems = _zero_problems(zoo, guarded, twin)
    if not problems:
        return True, None
    fx = _fixed(zoo)
    nor = ""
    if fx is not None:
        other = _same_as_fixed(fx, guarded)
        if other is None:
            return True, None
        nor = f"; nor is it the fixed zoo's answer ({other})"
    if "e" in guarded:
        return True, f"zoo loss {_loss_text(zoo)}, guarded raised {guarded['e']} (expected 0){nor}"
    return True, f"zoo loss {_loss_text(zoo)}; " + ", ".join(problems) + nor


def _zero_problems(zoo: Answer, guarded: Answer, twin: Answer | None) -> list[str]:
    """How the guarded answer differs from the defined zero (empty: it is the defined zero)."""
    if "e" in guarded:
        return [f"guarded raised {guarded['e']}"]
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
    return problems


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
    if extra == ["hidden"] and excused(zoo, guarded) and gc["hidden"].endswith("|1"):
        extra = []  # overwrite=True: the defined empty answer leaves the zero gradient in hidden_states
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
