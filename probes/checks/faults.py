"""Faults injected below a guard: zoo's own kernel made to raise, to see whether the guarded call passes it on.

The contract of a kernel guard (docs/design.md#the-differential-contract): on
a batch with labels left, whatever zoo raises, the guarded call raises the
same. A guard that catches a ``RuntimeError`` from zoo and answers a zero
loss turns an out-of-memory or a compile failure into a silent zero. What a
host happens to raise cannot show that, so a check makes zoo raise: it
replaces something zoo's kernel calls at call time (a torch function, or a
helper looked up in zoo's module globals; never the kernel itself, which a
guard captured at import) with a function that raises, calls the kernel
through the guarded routes, and puts the original back.

Stdlib only (no torch): the checks' phases do the calls; this module names
the faults, injects one into an attribute, and judges a case from the two
processes' records. A case is judged only where the same injection made
zoo's own kernel raise it in the raw process; elsewhere it is ``n/a`` with
the reason, never a silent pass.

Where every label is masked and the count is zero, the defined answer of the
empty region is right too, but only from a guard that answered without
calling zoo's kernel (the injected function never ran): a guard that reached
zoo, saw it raise, and answered anyway has swallowed an exception zoo raised
before it divided, which is no answer about the batch.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MARK = "[injected by skewmatrix]"  # zoo's and the guard's records keep 100 characters of a message
# kind -> (exception type, message): an out-of-memory as torch words it, and a type error as a version skew
# between zoo and torch gives one.
FAULTS: dict[str, tuple[type[Exception], str]] = {
    "oom": (RuntimeError, f"CUDA out of memory. Tried to allocate 2.00 GiB. {MARK}"),
    "type-error": (TypeError, f"unsupported operand type(s) for *: 'Tensor' and 'NoneType' {MARK}"),
}


def exception_type(text: str | None) -> str | None:
    """``"RuntimeError"`` from a recorded ``"RuntimeError: message"``; None when nothing was raised."""
    return None if text is None else text.split(":", 1)[0]


def make(kind: str) -> Exception:
    cls, message = FAULTS[kind]
    return cls(message)


@dataclass
class Fired:
    """How many times the injected function ran (and raised) while the injection was in place."""

    count: int = 0


def resolve(target: str) -> tuple[Any, str]:
    """``"module:attr.attr"`` -> (the object that holds the last attribute, its name). Raises when absent."""
    module, _, path = target.partition(":")
    owner: Any = importlib.import_module(module)
    *parents, name = path.split(".")
    for p in parents:
        owner = getattr(owner, p)
    getattr(owner, name)  # AttributeError: this build has no such thing
    return owner, name


@contextlib.contextmanager
def injected(target: str, kind: str) -> Iterator[Fired]:
    """Replace ``target`` (``resolve``) with a function that raises fault ``kind``; restore it on exit."""
    owner, name = resolve(target)
    had = name in vars(owner)
    original = getattr(owner, name)
    fired = Fired()

    def failing(*args: Any, **kwargs: Any) -> Any:
        fired.count += 1
        raise make(kind)

    setattr(owner, name, failing)
    try:
        yield fired
    finally:
        if had:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


def first_raising(targets: tuple[str, ...], cases: Callable[[str], dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """``{"target", "tried", "records", "seconds"}``: the first of ``targets`` that resolves and at which the
    injected faults make zoo's kernel raise (``cases(target)``: its records by case), or ``target`` None with
    the first resolvable target's records (the property is then ``n/a``)."""
    start = time.perf_counter()
    tried: list[str] = []
    first: dict[str, dict[str, Any]] | None = None
    for target in targets:
        try:
            resolve(target)
        except (ImportError, AttributeError):
            continue
        tried.append(target)
        found = cases(target)
        if any(r.get("fired") and "e" in r for r in found.values()):
            return {"target": target, "tried": tried, "records": found,
                    "seconds": round(time.perf_counter() - start, 3)}
        first = first if first is not None else found
    return {"target": None, "tried": tried, "records": first or {}, "seconds": round(time.perf_counter() - start, 3)}


def judge_case(kind: str, empty: bool, zoo: dict[str, Any], guarded: dict[str, Any]) -> tuple[str, str | None]:
    """(outcome, why) of one case: zoo's record from the raw process against the guarded call's record.

    A record has ``e`` (``"Type: message"``, when the call raised), ``fired`` (how often the injected function
    ran), and, when the call answered, ``loss`` (its words) and ``defined_zero`` (loss 0, zero gradients, a
    working backward). ``empty``: every label masked and the count zero.
    """
    want = FAULTS[kind][0].__name__
    if exception_type(zoo.get("e")) != want or not zoo.get("fired"):
        did = (f"zoo raised {zoo['e']}" if zoo.get("e") else f"zoo answered loss {zoo.get('loss')}") + (
            "" if zoo.get("fired") else ", and the injected function never ran")
        return "n/a", f"the injection does not make zoo's own kernel raise {want} here ({did})"
    got = exception_type(guarded.get("e"))
    if got == want:
        return "pass", None
    if got is not None:
        return "fail", f"zoo raises {zoo['e']}; guarded raises {guarded['e']}"
    answer = f"answers loss {guarded.get('loss')}"
    if not empty:
        return "fail", f"zoo raises {zoo['e']}; guarded {answer} (labels are left: it must raise alike)"
    if guarded.get("fired"):
        return "fail", (f"zoo raises {zoo['e']}; the guard reached zoo's kernel, which raised, and {answer} "
                        "(it swallowed zoo's exception)")
    if guarded.get("defined_zero"):
        return "pass", None  # answered the empty batch itself, before zoo's kernel ran: nothing was swallowed
    return "fail", f"zoo raises {zoo['e']}; guarded {answer} without calling zoo's kernel, not the defined zero"


def summarize(target: str | None, tried: list[str], cases: list[dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    """(outcome, reason, details) of the property over its cases (each ``{"case", "kind", "empty", "zoo",
    "guarded"}``): ``fail`` on any failing case (the first named, with the count), ``n/a`` when zoo raised on
    no case, else ``pass`` with how the guard passed (raised alike, or answered an empty batch itself)."""
    judged = [(c, *judge_case(c["kind"], bool(c["empty"]), c["zoo"], c["guarded"])) for c in cases]
    failing = [(c, why) for c, outcome, why in judged if outcome == "fail"]
    na = [(c, why) for c, outcome, why in judged if outcome == "n/a"]
    ran = len(judged) - len(na)
    details: dict[str, Any] = {"target": target, "tried": tried, "cases": len(judged), "judged": ran,
                               "failed": len(failing), "n/a": len(na)}
    if failing:
        c, why = failing[0]
        details["failing"] = [f"{f['case']} ({f['kind']})" for f, _ in failing]
        return "fail", f"{c['case']}, {c['kind']} injected at {target}: {why} ({len(failing)} of {ran} cases fail)", \
            details
    if not ran:
        why = na[0][1] if na else "no case ran"
        where = f"at {target}" if target else f"at any of {', '.join(tried) or 'no target'}"
        return "n/a", f"n/a: an injection {where} does not make zoo's own kernel raise on this zoo ({why})", details
    itself = sum(1 for c, outcome, _ in judged if outcome == "pass" and "e" not in c["guarded"])
    note = f", {itself} fully masked ones answered by the guard itself before zoo's kernel ran" if itself else ""
    skipped = f"; {len(na)} n/a: {na[0][1]}" if na else ""
    kinds = " and ".join(sorted({FAULTS[c['kind']][0].__name__ for c, outcome, _ in judged if outcome != "n/a"}))
    return "pass", (f"ok ({ran} cases: zoo's kernel made to raise {kinds} at {target}, the guarded call raised "
                    f"the same{note}{skipped})"), details
