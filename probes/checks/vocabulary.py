"""The words every check's verdict is made of (docs/design.md#states), and helpers to read evidence.

Stdlib only: ``reports/`` imports this module and each check's ``verdict.py``.
A check's ``classify`` reads its own section of a cell JSON (``static`` and
``steps``) and returns a :class:`Verdict`; the states are shared by every
check so that the gate, the grid and every renderer treat all checks alike.
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


# The one definition of the failing states; a matrix's `[gate] fail_on` may replace it.
FAILING_BY_DEFAULT: frozenset[str] = frozenset({GuardState.MISSING.value, GuardState.BROKEN.value,
                                                GuardState.ERROR.value})
GUARD_STATES: tuple[str, ...] = tuple(s.value for s in GuardState)
ZOO_STATES: tuple[str, ...] = tuple(s.value for s in ZooState)

class Reach(str, enum.Enum):
    """Does a real training run on this cell, on the route by which the check's kernel is reached, show it?

    Judged for the failing guard states only (a passing state has no reach):

    * ``exposed`` -- the run shows the symptom (NaN logged loss, non-finite weights, or a crash), or
      its evaluation (``trainer.evaluate()`` after it) does through the check's kernel;
    * ``latent`` -- the run reached the kernel with fully masked micro-batches and stayed clean: the
      trainer of this stack does not send the input that breaks the kernel (the reason names both). An
      evaluation that fails apart from the kernel leaves it latent and is named a stack hazard;
    * ``unknown`` -- no run on that route, or the run could not run: no evidence, treated like exposed.
    """

    EXPOSED = "exposed"
    LATENT = "latent"
    UNKNOWN = "unknown"


REACHES: tuple[str, ...] = tuple(r.value for r in Reach)
TRAINING_OUTCOMES = ("clean", "nan-logged", "nan-weights", "crash", "n/a", "error")
# What a user's run would show: a NaN logged or stored, or the run dying inside the trainer.
SYMPTOM_OUTCOMES = frozenset({"nan-logged", "nan-weights", "crash"})


def fails_gate(guard: str, reach: str | None, failing: frozenset[str] = FAILING_BY_DEFAULT,
               strict: bool = False) -> bool:
    """The gate's rule, in one place: a failing state fails, except ``missing`` whose reach is ``latent``
    (a warning) unless ``strict``. ``broken`` and ``error`` fail whatever the route."""
    if guard not in failing:
        return False
    return strict or not (guard == GuardState.MISSING.value and reach == Reach.LATENT.value)


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
        text = f"{self.passed}/{self.passed + self.failed}"
        if self.na:
            text += f" (+{self.na} n/a)"
        return text


# What an evaluation run (``trainer.evaluate()`` after training) can show; who made a NaN ``eval_loss``.
EVAL_OUTCOMES = ("clean", "nan-logged", "crash", "n/a", "error")
EVAL_SOURCES = ("kernel", "stack")


@dataclass(frozen=True)
class Evaluation:
    """The evaluation run on the check's training route, as the verdict uses it.

    ``source`` says who produced a failing evaluation: ``kernel`` (the check's kernel answered NaN, or
    raised, on an eval batch) or ``stack`` (anything else: the model's own loss, the trainer's loss or
    its averaging -- a hazard of the trainer stack, never blamed on the check's kernel).
    """

    outcome: str = "n/a"  # one of EVAL_OUTCOMES
    reason: str = ""
    source: str | None = None  # one of EVAL_SOURCES for a failing evaluation, else None
    eval_loss: float | str | None = None
    kernel_calls: int | None = None  # calls of the check's kernel during evaluation
    masked_inputs: tuple[str, ...] = ()  # the counts the model got on eval batches with no label left

    @property
    def failed(self) -> bool:
        return self.outcome in SYMPTOM_OUTCOMES

    @property
    def kernel_failed(self) -> bool:
        """The check's kernel made the evaluation fail: judged like a failing training run."""
        return self.failed and self.source == "kernel"

    @property
    def stack_hazard(self) -> bool:
        """The evaluation fails, and not through the check's kernel: reported apart, as a stack hazard."""
        return self.failed and self.source != "kernel"

    def label(self) -> str:
        return f"eval_loss {self.eval_loss}" if self.outcome == "nan-logged" else self.outcome


@dataclass(frozen=True)
class Training:
    """The training run's outcome, as the verdict uses it; ``evaluation`` the evaluation run after it."""

    outcome: str = "n/a"  # one of TRAINING_OUTCOMES
    reason: str = "no training probe in this check"
    first_nan_step: int | None = None
    kernel_calls: int | None = None  # calls of the check's kernel during the run (None: not recorded)
    masked_inputs: tuple[str, ...] = ()  # the counts the kernel received on micro-batches with no label left
    stack: str = ""  # "transformers X, TRL Y": the trainer stack the run used
    evaluation: Evaluation | None = None

    def label(self) -> str:
        if self.outcome in ("nan-logged", "nan-weights") and self.first_nan_step is not None:
            text = f"{self.outcome} from step {self.first_nan_step}"
        else:
            text = self.outcome
        if self.evaluation is not None and self.evaluation.kernel_failed:
            text += f", evaluation {self.evaluation.label()}"
        return text

    @property
    def failed(self) -> bool:
        """What a user would see, through the check's kernel: a NaN logged or stored, a crash inside the
        trainer, or an evaluation that the kernel turned NaN (or crashed)."""
        return self.outcome in SYMPTOM_OUTCOMES or (self.evaluation is not None and self.evaluation.kernel_failed)

    @property
    def reached_masked(self) -> bool:
        """The kernel ran during the run and received at least one micro-batch with no label left."""
        return bool(self.kernel_calls) and bool(self.masked_inputs)


@dataclass(frozen=True)
class Verdict:
    zoo: ZooState
    zoo_reason: str
    static: str
    runtime: str
    guard: GuardState
    guard_reason: str
    behavior: BehaviorCounts = field(default_factory=BehaviorCounts)
    training: Training | None = None
    symptom: str = ""
    reach: Reach | None = None  # None for the passing states
    reach_reason: str = ""
    # The check's own word for this state, where the guard vocabulary does not fit its subject (a pair that
    # works is ``compatible``, not ``fixed / not-needed``); every renderer shows it instead of zoo / guard.
    word: str = ""
    # Why a passing state is still a warning (a ``degraded`` pair: the features it breaks); "" for none.
    warn: str = ""

    def to_dict(self, failing: frozenset[str] = FAILING_BY_DEFAULT, strict: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["zoo"] = self.zoo.value
        d["guard"] = self.guard.value
        d["reach"] = None if self.reach is None else self.reach.value
        d["behavior"] = {**asdict(self.behavior), "failing": list(self.behavior.failing),
                         "label": self.behavior.label()}
        d["training"] = None if self.training is None else {
            **asdict(self.training), "masked_inputs": list(self.training.masked_inputs),
            "label": self.training.label()}
        d["gate_fail"] = fails_gate(self.guard.value, d["reach"], failing, strict)
        # A failing state that the gate lets pass (missing, latent), or a passing one the check calls a warning
        # (``warn``): shown as a warning everywhere.
        d["gate_warn"] = (self.guard.value in failing or bool(self.warn)) and not d["gate_fail"]
        return d


# ---------------------------------------------------------------- reading a check's evidence


def step(check: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in check.get("steps", []) if s.get("name") == name), None)


def step_result(check: dict[str, Any], name: str) -> dict[str, Any] | None:
    s = step(check, name)
    return (s.get("result") or None) if s and s.get("status") == "ok" else None


def step_reason(s: dict[str, Any] | None, name: str) -> str:
    if s is None:
        return f"the {name} probe did not run"
    reason = s.get("reason") or f"{name}: {s.get('status')}"
    return f"{s.get('status')}: {reason}"


def zoo_state(check: dict[str, Any]) -> tuple[ZooState, str, str, str]:
    """(state, reason, static verdict, runtime verdict) from two detectors that must agree."""
    static = (check.get("static") or {}).get("verdict", "unknown")
    static_reason = (check.get("static") or {}).get("reason", "")
    s = step(check, "runtime")
    result = (s or {}).get("result") or {}
    runtime = result.get("verdict", "unknown") if s and s.get("status") == "ok" else "unknown"
    if runtime == "unknown":
        why = result.get("reason") if s and s.get("status") == "ok" else step_reason(s, "runtime")
        return ZooState.UNKNOWN, f"runtime detector: {why}", static, runtime
    if static == "unknown":
        return ZooState.UNKNOWN, f"static detector: {static_reason}", static, runtime
    if static != runtime:
        return (ZooState.INCONSISTENT,
                f"static says {static} ({static_reason}); runtime says {runtime} ({result.get('reason', '')})",
                static, runtime)
    return ZooState(static), f"both detectors: {result.get('reason', static_reason)}", static, runtime


# The suites whose tests count: the named behaviour suite and the differential oracle (a step that did
# not run leaves no count; a step that ran and died is one failure, never "0 failures").
SUITE_STEPS = ("behavior", "differential")
STEP_DIED = frozenset({"error", "crash", "timeout"})


def behavior_counts(check: dict[str, Any]) -> tuple[BehaviorCounts, dict[str, Any] | None]:
    """Pass / fail / n-a over every suite step of the check, and the ``behavior`` step's result."""
    passed = na = 0
    failing: list[str] = []
    for name in SUITE_STEPS:
        s = step(check, name)
        if s is None or s.get("status") == "skipped":
            continue
        if s.get("status") in STEP_DIED or (s.get("status") == "ok" and not isinstance(
                (s.get("result") or {}).get("tests"), list)):
            failing.append(f"{name} ({s.get('status')}: {str(s.get('reason') or 'no tests recorded')[:120]})")
            continue
        tests = (s.get("result") or {}).get("tests") or []
        failing += [str(t.get("id")) for t in tests if t.get("outcome") == "fail"]
        passed += sum(t.get("outcome") == "pass" for t in tests)
        na += sum(t.get("outcome") == "n/a" for t in tests)
    return (BehaviorCounts(passed=passed, failed=len(failing), na=na, failing=tuple(failing)),
            step_result(check, "behavior"))


def training(check: dict[str, Any]) -> Training | None:
    """The ``train`` step as a :class:`Training`; None when the check has no such step."""
    s = step(check, "train")
    if s is None:
        return None
    if s.get("status") == "skipped":
        return Training("n/a", str(s.get("reason") or "the training step was skipped"))
    if s.get("status") != "ok" or not s.get("result"):
        return Training("error", step_reason(s, "train"))
    r = s["result"]
    outcome = r.get("outcome") if r.get("outcome") in TRAINING_OUTCOMES else "error"
    first = r.get("first_nan_step")
    calls = r.get("kernel_calls")
    masked = r.get("masked_inputs")
    versions = r.get("versions") if isinstance(r.get("versions"), dict) else {}
    stack = ", ".join(f"{label} {versions[k]}" for k, label in (("transformers", "transformers"), ("trl", "TRL"))
                      if versions.get(k))
    ev = evaluation(r.get("evaluation"))
    reason = str(r.get("reason") or outcome)
    if ev is not None and ev.kernel_failed:
        reason += f"; evaluation: {ev.reason}"
    return Training(outcome, reason, first if isinstance(first, int) else None, _count(calls),
                    tuple(str(m) for m in masked) if isinstance(masked, list) else (), stack, ev)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def evaluation(raw: Any) -> Evaluation | None:
    """A training step's ``evaluation`` record as an :class:`Evaluation`; None when the run recorded none."""
    if not isinstance(raw, dict):
        return None
    outcome = raw.get("outcome") if raw.get("outcome") in EVAL_OUTCOMES else "error"
    source = raw.get("source") if raw.get("source") in EVAL_SOURCES else None
    loss = raw.get("eval_loss")
    masked = raw.get("masked_inputs")
    return Evaluation(outcome, str(raw.get("symptom") or outcome), source,
                      loss if isinstance(loss, (float, int, str)) and not isinstance(loss, bool) else None,
                      _count(raw.get("kernel_calls")),
                      tuple(str(m) for m in masked) if isinstance(masked, list) else ())


def reach(guard: GuardState, train: Training | None, fault: str, sent: str = "{}") -> tuple[Reach | None, str]:
    """(reach, plain words) of a guard state from the training run's evidence.

    ``fault`` names, in the check's words, the input that makes the kernel
    misbehave and who would send it; ``sent`` formats what the trainer sent
    at the fully masked micro-batches (``"count={}"``). Passing states have
    no reach.
    """
    if guard not in (GuardState.MISSING, GuardState.BROKEN, GuardState.ERROR):
        return None, ""
    if guard is GuardState.ERROR:
        return Reach.UNKNOWN, "no verdict, so no evidence from a training run either; treated as exposed"
    stack = f" ({train.stack})" if train is not None and train.stack else ""
    if train is None:
        return Reach.UNKNOWN, "this check has no training run for its route; treated as exposed"
    if train.failed:
        ev = train.evaluation
        if train.outcome not in SYMPTOM_OUTCOMES and ev is not None:  # the evaluation alone shows it
            return Reach.EXPOSED, (f"the training run on this cell{stack} stayed clean, but its evaluation "
                                   f"(trainer.evaluate()) shows it: {ev.reason}")
        return Reach.EXPOSED, f"a real training run on this cell{stack} shows it ({train.label()})"
    if train.outcome != "clean":
        return Reach.UNKNOWN, (f"the training run on this cell{stack} gave no evidence ({train.outcome}: "
                               f"{train.reason}); treated as exposed")
    if not train.reached_masked:
        return Reach.UNKNOWN, (f"the training run on this cell{stack} never sent the kernel a fully masked "
                               "micro-batch, so it says nothing about this hazard; treated as exposed")
    given = sent.format(" or ".join(train.masked_inputs))
    if guard is GuardState.BROKEN:
        return Reach.LATENT, (f"the training run on this cell{stack} stayed finite ({given} at the fully masked "
                              "micro-batches); the guard's defect shows on direct calls" + _eval_note(train, sent))
    return Reach.LATENT, (f"the trainer on this cell's stack{stack} sent {given} at every fully masked "
                          "micro-batch and its logged loss stayed finite, so its SFT runs are not affected; "
                          f"the kernel still misbehaves on {fault}" + _eval_note(train, sent))


def _eval_note(train: Training, sent: str) -> str:
    """What the evaluation run adds to a latent reach: finite, off the kernel's route, or a stack hazard."""
    ev = train.evaluation
    if ev is None:
        return ""
    if ev.stack_hazard:
        return f"; evaluation on this stack fails apart from this kernel (stack hazard: {ev.reason})"
    if ev.outcome != "clean":
        return f"; evaluation gave no evidence ({ev.outcome}: {ev.reason})"
    if not ev.kernel_calls:
        return "; its evaluation (trainer.evaluate()) stayed finite and does not call this kernel"
    given = sent.format(" or ".join(ev.masked_inputs)) if ev.masked_inputs else "a count"
    return f"; its evaluation (trainer.evaluate()) sent {given} at the fully masked eval batch and stayed finite"


def replaced_on_fixed_zoo(what: str, extra: str = "") -> tuple[GuardState, str]:
    """The one rule for every check: replacing a kernel that already carries the fix is ``broken`` (a guard
    must detect the fix structurally and stay idle: docs/design.md#the-guard-protocol), whatever its tests say."""
    return GuardState.BROKEN, f"{what} was replaced on a zoo that carries the fix" + (f"; {extra}" if extra else "")


def precondition(check: dict[str, Any], zoo: ZooState, zoo_reason: str) -> tuple[GuardState, str] | None:
    """The ``error`` every check shares: no guard probe result, or no agreed zoo state; None when it can judge."""
    s = step(check, "guard")
    if s is None or s.get("status") != "ok":
        return GuardState.ERROR, f"import unsloth / guard probe: {step_reason(s, 'guard')}"
    if zoo is ZooState.UNKNOWN:
        return GuardState.ERROR, f"zoo state unknown: {zoo_reason}"
    if zoo is ZooState.INCONSISTENT:
        return GuardState.ERROR, f"zoo detectors disagree: {zoo_reason}"
    return None

