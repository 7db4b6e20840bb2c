"""The runtime detector's judgement of its probe record: pure, stdlib only (unit-tested on records of our making).

A loss type is *judged* when its loss depends on the count (two positive
counts gave two losses), a *control* when it does not, *not taken* when
this zoo refuses it. ``vulnerable``: a judged type gives a non-finite loss
or gradient at a zero count; ``fixed``: none does; ``absent``: no type
depends on the count. The KL sibling is reported beside the verdict.
"""

from __future__ import annotations

from typing import Any

# Every loss type zoo's function has had; one a release does not know raises, and is recorded "not taken".
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "vespo", "sapo", "luspo")


def finite(out: dict[str, Any]) -> bool:
    return "error" not in out and bool(out.get("loss_finite")) and bool(out.get("grads_finite"))


def _what(out: dict[str, Any]) -> str:
    if "error" in out:
        return f"raised {out['error']}"
    grads = "gradients finite" if out.get("grads_finite") else "gradients non-finite"
    return f"loss {out.get('loss')}, {grads}"


def classes(probe: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(judged, controls, not taken) loss types."""
    judged, controls, refused = [], [], []
    for lt, entry in probe["loss_types"].items():
        dep = entry.get("dependence") or {}
        if "error" in dep:
            refused.append(lt)
        elif dep.get("depends"):
            judged.append(lt)
        else:
            controls.append(lt)
    return judged, controls, refused


def kl_text(probe: dict[str, Any]) -> tuple[bool | None, str]:
    kl = probe.get("kl_one_masked") or {}
    if "error" in kl or kl.get("kl_finite") is None:
        return None, f"KL sibling not judged ({kl.get('error', 'no KL returned')})"
    if kl["kl_finite"]:
        return True, f"KL with one completion masked out of two: finite ({kl.get('kl')})"
    return False, f"KL with one completion masked out of two: {kl.get('kl')} (the logged kl goes NaN)"


def judge(probe: dict[str, Any]) -> tuple[str, str]:
    """``(verdict, reason)``."""
    judged, controls, refused = classes(probe)
    tail = []
    if controls:
        odd = [lt for lt in controls if not all(finite(o) for o in probe["loss_types"][lt]["zero"].values())]
        tail.append(f"controls (the count is no divisor): {', '.join(controls)}"
                    + (f", of which non-finite when all masked: {', '.join(odd)}" if odd else ", all finite"))
    if refused:
        tail.append(f"not taken by this zoo: {', '.join(refused)}")
    tail.append(kl_text(probe)[1])
    if not judged:
        return "absent", "no loss type's loss depends on num_items_in_batch; " + "; ".join(tail)
    bad = [(lt, form, out) for lt in judged for form, out in probe["loss_types"][lt]["zero"].items()
           if not finite(out)]
    if bad:
        lt, form, out = bad[0]
        names = sorted({f"{b[0]} (count {b[1]})" for b in bad})
        return "vulnerable", (f"every completion masked: {', '.join(names)} not finite ({_what(out)} for {lt} "
                              f"with count {form}); " + "; ".join(tail))
    return "fixed", (f"every completion masked: finite for {', '.join(judged)} at counts "
                     f"{', '.join(probe['loss_types'][judged[0]]['zero'])}; " + "; ".join(tail))
