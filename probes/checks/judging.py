"""The opening every kernel check's ``classify`` shares. Stdlib only (``reports/`` imports the verdicts).

A kernel check judges one cell from the same evidence: the zoo's state from
both detectors, the behaviour suite's counts, the training run, the guard
step's result, and whether a step that everything else needs failed first
(:func:`~probes.checks.vocabulary.precondition`). :func:`opening` reads them
once; :meth:`Opening.out` builds the check's :class:`Verdict` with the reach
its own ``reach_of`` gives a state (each check words the fault differently).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probes.checks.vocabulary import (
    BehaviorCounts,
    GuardState,
    Reach,
    Training,
    Verdict,
    ZooState,
    behavior_counts,
    precondition,
    step_result,
    training,
    zoo_state,
)

ReachOf = Callable[[GuardState, "Training | None"], "tuple[Reach | None, str]"]


@dataclass(frozen=True)
class Opening:
    zoo: ZooState
    zoo_reason: str
    static: str
    runtime: str
    counts: BehaviorCounts
    behavior: dict[str, Any] | None
    train: Training | None
    guard: dict[str, Any]  # the guard step's result ({} when it has none)
    blocked: tuple[GuardState, str] | None  # the state a failed earlier step decides, if one did
    reach_of: ReachOf

    @property
    def train_text(self) -> str:
        """The failed training run in words, or ``""`` when it passed or did not run."""
        t = self.train
        return f"the training run {t.label()}: {t.reason}" if t is not None and t.failed else ""

    @property
    def fails(self) -> str:
        return ", ".join(self.counts.failing)

    def out(self, state: GuardState, reason: str, symptom: str = "") -> Verdict:
        return Verdict(self.zoo, self.zoo_reason, self.static, self.runtime, state, reason, self.counts,
                       self.train, symptom, *self.reach_of(state, self.train))

    def settled(self, absent: str, replaced: str) -> Verdict | None:
        """The verdict due before a check weighs its guard, if one is: the state a failed earlier step
        decides; ``not-needed`` where the zoo has no kernel (``absent`` says so); ``error`` where the guard
        probe had no raw fingerprint to tell whether ``replaced`` (what a guard replaces) was replaced."""
        if self.blocked is not None:
            return self.out(*self.blocked)
        if self.zoo is ZooState.ABSENT:
            return self.out(GuardState.NOT_NEEDED, absent)
        if self.guard.get("original") is None:
            return self.out(GuardState.ERROR, f"cannot tell whether {replaced} was replaced (no raw fingerprint)")
        return None


def opening(check: dict[str, Any], reach_of: ReachOf) -> Opening:
    zoo, zoo_reason, static, runtime = zoo_state(check)
    counts, behavior = behavior_counts(check)
    return Opening(zoo, zoo_reason, static, runtime, counts, behavior, training(check),
                   step_result(check, "guard") or {}, precondition(check, zoo, zoo_reason), reach_of)
