"""From this check's evidence in a cell to its states. Stdlib only (``reports/`` imports it).

Zoo state: the static reading and the runtime detector must agree. Guard
state, after ``import unsloth``: a guard is *present* when unsloth's
hand-off changes the count on its way to zoo (anything but the count as
read) or zoo's function is no longer its own. Present and the suite passes
(zoo's own function the oracle, the guarded route the same but in 0 / 0)
and the all-masked call is finite: ``activates`` on a vulnerable zoo,
``no-ops`` on a fixed one; present and anything fails: ``broken``. Absent:
``missing`` on a vulnerable zoo, ``not-needed`` elsewhere. Reach comes from
the GRPO training runs: which count did the trainer of this stack send when
every completion was truncated, and what did the run show? Where the stack's
TRL counts after the truncation mask, the steps through unsloth's generated
``UnslothGRPOTrainer`` (step ``unsloth_train``) are the evidence; elsewhere
(``n/a`` there, with its reason) the run with TRL's ``GRPOTrainer`` and zoo's
loss (step ``train``) is, and the reach's words say which route it came from.
"""

from __future__ import annotations

from typing import Any

from probes.checks.judging import opening
from probes.checks.vocabulary import (
    GuardState,
    Reach,
    Training,
    Verdict,
    ZooState,
    reach,
    replaced_on_fixed_zoo,
    step,
    step_result,
    training,
)

FAULT = ("a GRPO batch whose completions are all masked with a count of 0 (TRL >= 1.9 counts after "
         "mask_truncated_completions, so every completion truncated sends 0)")
SENT = "num_items_in_batch={}"


def _trl_counts_before_the_mask(trl: str | None) -> bool:
    """TRL before 1.9 counts the completion tokens before ``mask_truncated_completions`` (TRL #6439)."""
    try:
        major, minor = (int(p) for p in (trl or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < (1, 9)


UNSLOTH_STEP = "unsloth_train"
UNSLOTH_ROUTE = "the GRPO steps through unsloth's generated UnslothGRPOTrainer"


def unsloth_training(check: dict[str, Any]) -> Training | None:
    """The ``unsloth_train`` step as a :class:`Training` (None: the cell has no such step)."""
    s = step(check, UNSLOTH_STEP)
    return None if s is None else training({"steps": [{**s, "name": "train"}]})


def _ran(t: Training | None) -> bool:
    return t is not None and t.outcome not in ("n/a", "error")


def _unsloth_text(t: Training | None) -> str:
    """The failed unsloth-route run in words, or ``""``."""
    return f"{UNSLOTH_ROUTE} {t.label()}: {t.reason}" if t is not None and t.failed else ""


def _reach(state: GuardState, train: Training | None, raw: dict[str, Any] | None = None,
           via_unsloth: Training | None = None) -> tuple[Reach | None, str]:
    if _ran(via_unsloth):
        r, text = reach(state, via_unsloth, FAULT, SENT)
        return r, (f"through unsloth's own route ({UNSLOTH_ROUTE}): {text}" if r is not None else text)
    r, text = _reach_raw(state, train, raw)
    if r is None or via_unsloth is None:
        return r, text
    return r, (f"{text} (the reach comes from the check's run with TRL's GRPOTrainer and zoo's loss; "
               f"{UNSLOTH_ROUTE}: {_said(via_unsloth)})")


def _said(t: Training) -> str:
    return t.reason if t.reason.startswith(t.outcome) else f"{t.outcome}: {t.reason}"


def _reach_raw(state: GuardState, train: Training | None, raw: dict[str, Any] | None = None,
               ) -> tuple[Reach | None, str]:
    unavailable = (raw or {}).get("unavailable")
    if state is GuardState.MISSING and unavailable:
        trl = ((raw or {}).get("versions") or {}).get("trl")
        if _trl_counts_before_the_mask(trl):
            return Reach.LATENT, (f"the check's own GRPO run (zoo's loss, no unsloth) cannot run on this cell's "
                                  f"stack: {unavailable}; where one runs (through unsloth, whose import fixes may "
                                  "make the trainer importable), "
                                  f"the stack's TRL {trl} counts the completion tokens before "
                                  "mask_truncated_completions (TRL < 1.9 does), so a fully truncated batch sends a "
                                  "positive count; a TRL >= 1.9 counts after the mask, sends 0, and the loss is "
                                  "0 / 0")
        return Reach.UNKNOWN, (f"the check's own GRPO run cannot run on this cell's stack ({unavailable}), and its "
                               f"TRL {trl} would "
                               "count after the truncation mask; treated as exposed")
    r, text = reach(state, train, FAULT, SENT)
    if r is Reach.LATENT and state is GuardState.MISSING and train is not None:
        sent = " or ".join(train.masked_inputs)
        text = (f"the trainer on this cell's stack ({train.stack}) counts the completion tokens before "
                f"mask_truncated_completions (TRL < 1.9 does): with every completion truncated it sent "
                f"num_items_in_batch={sent} and the logged loss stayed finite; a TRL >= 1.9 counts after the mask, "
                "sends 0, and the loss is 0 / 0")
    return r, text


def _finite(route: dict[str, Any]) -> bool:
    return "error" not in route and bool(route.get("loss_finite")) and bool(route.get("grads_finite"))


def classify(check: dict[str, Any], cell: dict[str, Any]) -> Verdict:
    raw_train = step_result(check, "train")
    via = unsloth_training(check)
    j = opening(check, lambda state, train: _reach(state, train, raw_train, via))
    zoo, counts, out, g = j.zoo, j.counts, j.out, j.guard
    # Where the steps through unsloth's trainer ran, they are the user's route: the raw run (zoo's loss under
    # TRL's trainer, no unsloth) never passes a guard in unsloth, so its symptom does not judge one.
    train_text = _unsloth_text(via) if _ran(via) else "; ".join(x for x in (j.train_text, _unsloth_text(via)) if x)
    if (early := j.settled("zoo's GRPO loss never divides by the count", "zoo's function")) is not None:
        return early
    h = g.get("handoff") or {}
    replaced = not g["original"]
    changed = bool(h.get("found")) and not h.get("plain")
    trainer = g.get("trainer") or {}
    th = trainer.get("handoff") or {}
    t_changed = bool(th.get("found")) and not th.get("plain")
    t_replaced = sorted(n for n, same in (trainer.get("original") or {}).items() if same is False)
    what = ", ".join(x for x in (
        "unsloth's hand-off changes the count (" + "; ".join(h.get("statements") or h.get("passes") or []) + ")"
        if changed else "", "zoo's grpo_compute_loss was replaced" if replaced else "",
        "the generated UnslothGRPOTrainer's hand-off changes the count" if t_changed and not changed else "",
        f"the generated UnslothGRPOTrainer's {' and '.join(t_replaced)} replaced" if t_replaced else "") if x)
    routes = g.get("routes") or {}
    route = next(iter(routes.values()), {})
    missed = [f"the all-masked dapo call through {name} is not finite (loss {r.get('loss')}"
              f"{', ' + str(r.get('error')) if r.get('error') else ''}): the guard misses that route"
              for name, r in routes.items() if not _finite(r)]
    unprobed = ("" if trainer.get("state") in (None, "generated") else
                f" (the generated UnslothGRPOTrainer's route could not be probed: {trainer.get('state')}: "
                f"{trainer.get('reason')})")
    first = next((t for t in (j.behavior or {}).get("tests") or [] if t.get("outcome") == "fail"), None)
    fails = j.fails + (f" (first: {str(first.get('reason'))[:320]})" if first else "")
    present = changed or replaced or t_changed or bool(t_replaced)
    if zoo is ZooState.VULNERABLE:
        if not present:
            symptom = train_text or (f"every completion masked with count tensor(0.): loss {route.get('loss')} "
                                     "through unsloth's hand-off into zoo's dapo loss")
            where = "" if h.get("found") else f" ({h.get('reason')})"
            return out(GuardState.MISSING, f"unsloth hands zoo the count as it came{where}; " + symptom + unprobed,
                       symptom)
        problems = missed + ([f"suite failing: {fails}"] if counts.failed else []) + (
                    [train_text] if train_text else [])
        if problems:
            return out(GuardState.BROKEN, f"{what}, but " + "; ".join(problems) + unprobed, train_text)
        return out(GuardState.ACTIVATES, f"{what}; the all-masked loss is {route.get('loss')} on "
                                         f"{len(routes)} route(s); suite {counts.label()}" + unprobed
                   + _finite_note(via, step_result(check, UNSLOTH_STEP)))
    if replaced:
        return out(*replaced_on_fixed_zoo("zoo's grpo_compute_loss", f"behaviour tests failing: {fails}" if fails
                                          else ""), train_text)
    # The generated trainer's copies are unsloth's, not zoo's kernel: on a fixed zoo the suite judges a change.
    if changed or t_changed or t_replaced:
        if counts.failed or train_text:
            return out(GuardState.BROKEN, f"{what} on a fixed zoo, and " + "; ".join(
                x for x in (f"suite failing: {fails}" if fails else "", train_text) if x), train_text)
        return out(GuardState.NO_OPS, f"{what}; zoo floors the count itself and every guarded route matches it "
                                      f"(suite {counts.label()})" + unprobed
                   + _finite_note(via, step_result(check, UNSLOTH_STEP)))
    if train_text:
        return out(GuardState.ERROR, f"the zoo is fixed by both detectors but {train_text}", train_text)
    if counts.failed:
        return out(GuardState.ERROR, f"no guard, zoo fixed, yet the suite fails: {fails}")
    return out(GuardState.NOT_NEEDED, "zoo floors the count: an all-masked GRPO batch gives a finite loss")


def _finite_note(t: Training | None, raw: dict[str, Any] | None) -> str:
    """A passing guard's evidence from the unsloth route: what the trainer sent and what the loss got."""
    if not _ran(t) or t is None or t.failed:
        return ""
    handed = " or ".join(str(h) for h in (raw or {}).get("handed_inputs") or []) or "?"
    return (f"; {UNSLOTH_ROUTE} stayed finite (the trainer sent num_items_in_batch={' or '.join(t.masked_inputs)} "
            f"at the fully truncated steps, the loss got {handed})")
