"""From this check's evidence in a cell to the shared states. Stdlib only (``reports/`` imports it).

How the shared words read for a nanochat tree:

* "zoo" state = **the model's loss** (``GPT.forward`` in ``nanochat/gpt.py``),
  from two detectors that must agree: the static reading of the
  ``cross_entropy`` call and the runtime call on a tiny ``GPT`` with every
  target -1 (reduction default). ``vulnerable``: NaN; ``fixed``: finite.
  Where the static reading abstains (a fix in a shape it does not know) and
  the runtime detector answered, the runtime answer stands, with the
  abstention in the reason: it ran the tree's own ``GPT``, and a source tree
  is anyone's code, so a right fix written another way must not be an
  ``error``; the suite and the real run still judge it. ``unknown`` (no tree,
  the runtime detector failed) and ``inconsistent`` (the readings disagree)
  give ``error`` -- except where the runtime detector says fixed and the
  suite or the run fails: a wrong fix is the finding (``broken``), whatever
  the static reading thinks.
* the real run stands over a proxy: a failing n7 (the printed loss) in a
  case the clean ``chat_sft.py`` run covered with finite ``loss:`` lines (a
  step whose only / last micro-batch was all -1) counts ``n/a``, "proxy
  disagrees with the run", named in the reason.
* "guard" = **the SFT loop** in ``scripts/chat_sft.py``: present when its
  static reading finds a branch on the targets that keeps an all -1
  micro-batch from ``backward()`` (``loop.verdict == "guarded"``), or, where
  the loop cannot be read, when the suite's loop tests (n3, n4) pass.
* evidence = the behaviour suite (``behavior``: model and the script's own
  loop + optimizer step) and the real ``chat_sft.py`` runs (``train``).

States:

* model vulnerable, no loop guard -> ``missing`` (the symptom from the run:
  NaN logged, NaN weights or a crash); reach from the run (``exposed`` when
  it shows the symptom, ``latent`` when it fed the model all -1 micro-batches
  and stayed clean, ``unknown`` without a run).
* model vulnerable, loop guard -> ``activates`` when every suite test passes
  and the run is clean; else ``broken``.
* model fixed, no loop guard -> ``not-needed`` when every test passes and the
  run is clean; else ``broken`` (the fix is the model's own).
* model fixed and a loop guard -> ``no-ops`` / ``broken`` the same way.
* ``broken`` names the symptom: "the NaN became a crash" (the run raised),
  "the logged loss is still NaN", "non-finite weights", or the failing tests
  (another caller changed: ``reduction='sum'``/``'none'``, gradients).
* a passing state whose training run could not run (``error``) is ``error``;
  training turned off (``n/a``) judges by the suite alone.
"""

from __future__ import annotations

from typing import Any

from probes.checks.vocabulary import (
    BehaviorCounts,
    GuardState,
    Training,
    Verdict,
    ZooState,
    behavior_counts,
    reach,
    step_result,
    training,
    zoo_state,
)

FAULT = "a micro-batch whose targets are all -1 (mean cross-entropy over zero valid targets)"
SENT = "{} in a micro-batch that reached GPT.forward"
LOOP_TESTS = ("n3-all-masked-micro-batch", "n4-all-masked-step")
WORDS = {"crash": "the NaN became a crash", "nan-logged": "the logged loss is still NaN",
         "nan-weights": "the weights became non-finite"}


def _guard_present(check: dict[str, Any], tests: list[dict[str, Any]]) -> tuple[bool, str]:
    loop = (check.get("static") or {}).get("loop") or {}
    if loop.get("verdict") == "guarded":
        return True, f"chat_sft.py guards its micro-step loop (line {loop.get('guard_line')})"
    if loop.get("verdict") == "unguarded":
        return False, "chat_sft.py's micro-step loop runs forward and backward on every micro-batch"
    passed = {t.get("id") for t in tests if t.get("outcome") == "pass"}
    if all(t in passed for t in LOOP_TESTS):
        return True, "the loop could not be read, but the script's own step handles an all -1 micro-batch"
    return False, f"the loop could not be read ({loop.get('reason', 'no reading')})"


def _train_problem(train: Training | None) -> str:
    if train is None or not train.failed:
        return ""
    return f"{WORDS.get(train.outcome, train.outcome)} in chat_sft.py ({train.label()}): {train.reason}"


def _model_state(check: dict[str, Any], failing: bool) -> tuple[ZooState, str, str, str]:
    """``zoo_state``, except that the runtime detector's answer stands where the static reading abstains, and
    where it disagrees but the model, run fixed, fails its suite (``failing``): a wrong fix is then the finding
    whatever the static reading thinks, not an inconsistency to investigate."""
    zoo, reason, static, runtime = zoo_state(check)
    said = (step_result(check, "runtime") or {}).get("reason", "")
    why = (check.get("static") or {}).get("reason", "")
    if zoo is ZooState.UNKNOWN and static == "unknown" and runtime in (ZooState.VULNERABLE, ZooState.FIXED):
        return ZooState(runtime), f"runtime detector: {said}; the static reading abstained ({why})", static, runtime
    if zoo is ZooState.INCONSISTENT and runtime == ZooState.FIXED and failing:
        return (ZooState.FIXED, f"runtime detector: {said}; the static reading says {static} ({why}), but the "
                                "tree's own GPT returned a finite loss and its suite fails", static, runtime)
    return zoo, reason, static, runtime


# The suite tests that stand in for what chat_sft.py logs (test id -> its cases). A real run that logged finite
# losses at a step of the case's shape contradicts a failing case: the run stands.
PROXIES = {"n7-logged-loss-finite": {"ga1-masked": "the step's only micro-batch",
                                     "ga2-last-masked": "the step's last micro-batch"}}


def _covering(case: str, runs: list[dict[str, Any]]) -> str | None:
    """Where a run logged a finite loss at a step shaped like ``case`` (and at every step after it)."""
    for r in runs:
        ga = r.get("gradient_accumulation_steps") or 0
        if (ga == 1) != (case == "ga1-masked"):
            continue
        steps = r.get("steps") or []
        for i, s in enumerate(steps):
            mbs = s.get("micro_batches") or []
            if mbs and mbs[-1].get("labels_left") == 0 and all(
                    isinstance(t.get("logged_loss"), (int, float)) for t in steps[i:]):
                return f"{r.get('name')} step {s.get('step')}"
    return None


def _overruled(tests: list[dict[str, Any]], train: Training | None,
               check: dict[str, Any]) -> dict[str, str]:
    """Failing proxy tests the real run contradicts, with the words saying so."""
    runs = ((step_result(check, "train") or {}).get("runs") or []) if train is not None else []
    if train is None or train.outcome != "clean" or not runs:
        return {}
    out = {}
    for t in tests:
        cases = ((t.get("details") or {}).get("cases") or {}) if t.get("outcome") == "fail" else {}
        failed = [k for k, c in cases.items() if not c.get("ok")]
        if t.get("id") not in PROXIES or not failed or any(k not in PROXIES[t["id"]] for k in failed):
            continue
        where = [(k, _covering(k, runs)) for k in failed]
        if all(w for _, w in where):
            out[t["id"]] = ("n/a: proxy disagrees with the run: chat_sft.py logged finite losses where "
                            + ", ".join(f"{PROXIES[t['id']][k]} was all -1 ({w})" for k, w in where))
    return out


def classify(check: dict[str, Any], cell: dict[str, Any]) -> Verdict:
    counts, _ = behavior_counts(check)
    train = training(check)
    tests = (step_result(check, "behavior") or {}).get("tests") or []
    overruled = _overruled(tests, train, check)
    if overruled:
        counts = BehaviorCounts(counts.passed, counts.failed - len(overruled), counts.na + len(overruled),
                                tuple(f for f in counts.failing if f not in overruled))
    note = "".join(f"; {k}: {w}" for k, w in overruled.items())
    zoo, zoo_reason, static, runtime = _model_state(check, bool(counts.failed or _train_problem(train)))

    def out(state: GuardState, reason: str, symptom: str = "") -> Verdict:
        reason += note
        return Verdict(zoo, zoo_reason, static, runtime, state, reason, counts, train, symptom,
                       *reach(state, train, FAULT, SENT))

    if zoo in (ZooState.UNKNOWN, ZooState.INCONSISTENT):
        return out(GuardState.ERROR, f"model state {zoo.value}: {zoo_reason}")
    if zoo is ZooState.ABSENT:
        return out(GuardState.NOT_NEEDED, "no loss to judge in this tree")
    guarded, guard_text = _guard_present(check, tests)
    problem = _train_problem(train)
    fails = ", ".join(counts.failing)
    if zoo is ZooState.VULNERABLE and not guarded:
        symptom = problem or f"GPT.forward returns NaN for an all -1 micro-batch; {guard_text}"
        return out(GuardState.MISSING, f"nothing handles the model's NaN: {guard_text}"
                   + (f"; {problem}" if problem else "") + (f"; failing: {fails}" if fails else ""), symptom)
    where = "the loop's guard" if guarded else "the model's fix"
    if problem or counts.failed:
        symptom = problem or f"behaviour tests failing: {fails}"
        reason = f"{where} is present but " + "; ".join(
            x for x in (problem, f"behaviour tests failing: {fails}" if fails else "") if x)
        return out(GuardState.BROKEN, reason, symptom)
    if train is not None and train.outcome == "error":
        return out(GuardState.ERROR, f"{where} passes its suite but the chat_sft.py run could not run: {train.reason}")
    ran = f"; chat_sft.py {train.label()}" if train is not None else ""
    if zoo is ZooState.VULNERABLE:
        return out(GuardState.ACTIVATES, f"GPT.forward NaNs on an all -1 batch and {guard_text}; "
                                         f"suite {counts.label()}{ran}")
    if guarded:
        return out(GuardState.NO_OPS, f"GPT.forward is fixed and {guard_text} too; suite {counts.label()}{ran}")
    return out(GuardState.NOT_NEEDED, f"GPT.forward is fixed; suite {counts.label()}{ran}")
