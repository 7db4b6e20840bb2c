"""From a cell's evidence to its zoo state and guard state (DESIGN.md section 3).

Zoo state, from two detectors that must agree: the static reading of the
forward's source and the raw-kernel run. Guard state, after ``import
unsloth``: whether the forward was replaced (black-box identity check), whether
the all-masked call through the public entry is finite, whether a guard hook
was found, and the behaviour suite's outcomes.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class ZooState(str, enum.Enum):
    VULNERABLE = "vulnerable"
    FIXED = "fixed"
    ABSENT = "absent"
    INCONSISTENT = "inconsistent"
    UNKNOWN = "unknown"


class GuardState(str, enum.Enum):
    ACTIVATES = "activates"
    NO_OPS = "no-ops"
    MISSING = "missing"
    NOT_NEEDED = "not-needed"
    BROKEN = "broken"
    ERROR = "error"


FAILING_BY_DEFAULT = frozenset({GuardState.MISSING, GuardState.BROKEN, GuardState.ERROR})

ZOO_MEANING = {
    ZooState.VULNERABLE: "an all-masked microbatch with n_items=None gives a NaN loss",
    ZooState.FIXED: "the zero divisor is guarded: the all-masked loss is finite",
    ZooState.ABSENT: "this zoo has no fused cross-entropy kernel",
    ZooState.INCONSISTENT: "the static and runtime detectors disagree (investigate)",
    ZooState.UNKNOWN: "a detector failed; see the reason",
}
GUARD_MEANING = {
    GuardState.ACTIVATES: "zoo vulnerable; a guard replaced the forward and the behaviour suite passes",
    GuardState.NO_OPS: "zoo fixed; a guard is present and left the forward untouched",
    GuardState.MISSING: "zoo vulnerable and nothing replaced the forward: NaN reaches users",
    GuardState.NOT_NEEDED: "zoo fixed (or no fused CE) and no guard",
    GuardState.BROKEN: "a guard is present but a behaviour test fails",
    GuardState.ERROR: "the cell could not be built, imported or probed",
}


@dataclass(frozen=True)
class BehaviorCounts:
    passed: int = 0
    failed: int = 0
    na: int = 0
    failing: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.na

    def label(self) -> str:
        if not self.total:
            return ""
        ran = self.passed + self.failed
        text = f"{self.passed}/{ran}"
        if self.na:
            text += f" (+{self.na} n/a)"
        return text


@dataclass(frozen=True)
class Classification:
    zoo: ZooState
    zoo_reason: str
    static: str
    runtime: str
    guard: GuardState
    guard_reason: str
    behavior: BehaviorCounts = field(default_factory=BehaviorCounts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["zoo"] = self.zoo.value
        d["guard"] = self.guard.value
        d["behavior"] = {**asdict(self.behavior), "failing": list(self.behavior.failing),
                         "label": self.behavior.label()}
        return d


def _step(cell: dict[str, Any], name: str) -> dict[str, Any] | None:
    probes = cell.get("probes") or {}
    return next((s for s in probes.get("steps", []) if s.get("name") == name), None)


def _step_reason(step: dict[str, Any] | None, name: str) -> str:
    if step is None:
        return f"the {name} probe did not run"
    reason = step.get("reason") or f"{name}: {step.get('status')}"
    return f"{step.get('status')}: {reason}"


def zoo_state(cell: dict[str, Any]) -> tuple[ZooState, str, str, str]:
    """(state, reason, static verdict, runtime verdict)."""
    probes = cell.get("probes") or {}
    static = (probes.get("static") or {}).get("verdict", "unknown")
    static_reason = (probes.get("static") or {}).get("reason", "")
    step = _step(cell, "runtime")
    result = (step or {}).get("result") or {}
    runtime = result.get("verdict", "unknown") if step and step.get("status") == "ok" else "unknown"
    if runtime == "unknown":
        return ZooState.UNKNOWN, f"runtime detector: {_step_reason(step, 'runtime')}", static, runtime
    if static == "unknown":
        return ZooState.UNKNOWN, f"static detector: {static_reason}", static, runtime
    if static != runtime:
        return (ZooState.INCONSISTENT,
                f"static says {static} ({static_reason}); runtime says {runtime} ({result.get('reason', '')})",
                static, runtime)
    return ZooState(static), f"both detectors: {result.get('reason', static_reason)}", static, runtime


def behavior_counts(cell: dict[str, Any]) -> tuple[BehaviorCounts, dict[str, Any] | None]:
    step = _step(cell, "behavior")
    if step is None or not step.get("result"):
        return BehaviorCounts(), None
    result = step["result"]
    tests = result.get("tests", [])
    failing = tuple(t["id"] for t in tests if t.get("outcome") == "fail")
    return BehaviorCounts(
        passed=sum(t.get("outcome") == "pass" for t in tests),
        failed=len(failing),
        na=sum(t.get("outcome") == "n/a" for t in tests),
        failing=failing,
    ), result


def classify(cell: dict[str, Any]) -> Classification:
    """Classify one cell JSON. Pure: the same evidence always gives the same states."""
    error = cell.get("error")
    zoo, zoo_reason, static, runtime = (ZooState.UNKNOWN, "not probed", "unknown", "unknown")
    if cell.get("probes"):
        zoo, zoo_reason, static, runtime = zoo_state(cell)
    counts, behavior = behavior_counts(cell)

    def out(state: GuardState, reason: str) -> Classification:
        return Classification(zoo, zoo_reason, static, runtime, state, reason, counts)

    if error:
        return out(GuardState.ERROR, f"{error.get('kind')}: {error.get('message', '').splitlines()[0][:300]}")
    guard_step = _step(cell, "guard")
    if guard_step is None or guard_step.get("status") != "ok":
        return out(GuardState.ERROR, f"import unsloth / guard probe: {_step_reason(guard_step, 'guard')}")
    g = guard_step["result"] or {}
    if zoo is ZooState.UNKNOWN:
        return out(GuardState.ERROR, f"zoo state unknown: {zoo_reason}")
    if zoo is ZooState.INCONSISTENT:
        return out(GuardState.ERROR, f"zoo detectors disagree: {zoo_reason}")
    if zoo is ZooState.ABSENT:
        return out(GuardState.NOT_NEEDED, "no fused cross-entropy kernel in this zoo")
    replaced = not (g.get("forward") or {}).get("original", True)
    finite = bool(g.get("all_masked_finite"))
    hook = bool(behavior and behavior.get("guard_found"))
    present = replaced or hook
    fails = ", ".join(counts.failing)
    if zoo is ZooState.VULNERABLE:
        if not replaced:
            if finite:
                return out(GuardState.BROKEN, "the forward is zoo's own yet the all-masked call is finite: "
                           "the guard probe contradicts the runtime detector")
            why = "a guard hook exists but did not replace the forward" if hook else "no guard replaced the forward"
            return out(GuardState.MISSING, f"{why}; the all-masked loss through the public entry is "
                       f"{(g.get('routes') or {}).get('public', {}).get('loss')}")
        if not finite:
            return out(GuardState.BROKEN, "a guard replaced the forward but the all-masked call is still not finite"
                       + (f"; behaviour tests failing: {fails}" if fails else ""))
        if counts.failed:
            return out(GuardState.BROKEN, f"behaviour tests failing: {fails}")
        return out(GuardState.ACTIVATES, "a guard replaced the forward; the all-masked loss is finite"
                   + (f"; behaviour {counts.label()}" if counts.total else ""))
    # zoo fixed
    if replaced:
        return out(GuardState.BROKEN, "a guard replaced the forward of a zoo that carries the fix"
                   + (f"; behaviour tests failing: {fails}" if fails else ""))
    if not finite:
        return out(GuardState.BROKEN if present else GuardState.ERROR,
                   "the zoo is fixed by both detectors but the all-masked call after import unsloth is not finite")
    if present:
        if counts.failed:
            return out(GuardState.BROKEN, f"behaviour tests failing: {fails}")
        return out(GuardState.NO_OPS, "a guard is present and left zoo's forward untouched")
    if counts.failed:
        return out(GuardState.ERROR, f"no guard, zoo fixed, yet behaviour tests fail: {fails}")
    return out(GuardState.NOT_NEEDED, "zoo carries the fix; no guard")
