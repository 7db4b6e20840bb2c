"""What every renderer reads from a report of schema ``skewmatrix.report/2``, computed once.

A report lists its registered checks (``report["checks"]``, registry order)
and each cell carries one verdict per check (``cell["verdicts"][id]``) and the
evidence of each check (``cell["checks"][id]``: ``static`` and ``steps``).
This module turns those into the pieces every format shows: the short label
of a check, the one-line verdict of a check in a cell, the training label,
the evidence items (one per detector, step, behaviour test and extra) with
their outcomes, and the residual failures of a check that passes the gate.
JUnit writes the evidence items as testcases and the other formats count the
same items, so no format can pass what another fails.

Nothing here names a check: everything comes from the report. Any field may
be missing (an error cell has no checks at all); the helpers answer ``-``,
``n/a`` or an empty list, never raise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from reports.model import column_of, row_of

Outcome = Literal["pass", "failure", "error", "skipped"]

# Training outcomes that mean a user's run logged or stored a NaN, or crashed in the trainer.
NAN_TRAINING = frozenset({"nan-logged", "nan-weights", "crash"})
# Step statuses of the probe runner that mean the step did not finish.
STEP_ERRORS = frozenset({"error", "crash", "timeout"})
RESULT_JSON_CHARS = 2_000


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def report_checks(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's registered checks, in registry order (entries without an id are left out)."""
    return [c for c in _list(report.get("checks")) if isinstance(c, dict) and c.get("id")]


def short_labels(check_list: list[dict[str, Any]]) -> dict[str, str]:
    """A compact label per check id: its first two dash-separated words, or the full id where two would clash."""
    first = {str(c["id"]): "-".join(str(c["id"]).split("-")[:2]) for c in check_list}
    clash = {lab for lab in first.values() if list(first.values()).count(lab) > 1}
    return {cid: (cid if lab in clash else lab) for cid, lab in first.items()}


def grid_index(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(unsloth build, grid column) -> the report's cell there (the first one, should two claim the same pair).

    The column is the zoo build, with the cell's trainer stack where the matrix crosses stacks
    (``reports.model.column_of``)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for e in _list(report.get("cells")):
        key = (row_of(_dict(e)), column_of(_dict(e)))
        out.setdefault(key, e)
    return out


def grid_axes(report: dict[str, Any]) -> tuple[str, str]:
    """What the grid's rows and columns are (``reports.model.axes_of``), for its corner."""
    axes = [str(a) for a in _list(_dict(report.get("grid")).get("axes"))]
    return (axes[0], axes[1]) if len(axes) == 2 else ("unsloth", "zoo")


def verdict_of(entry: dict[str, Any], check_id: str) -> dict[str, Any]:
    return _dict(_dict(entry.get("verdicts")).get(check_id))


def section_of(entry: dict[str, Any], check_id: str) -> dict[str, Any]:
    return _dict(_dict(entry.get("checks")).get(check_id))


def steps_of(entry: dict[str, Any], check_id: str) -> list[dict[str, Any]]:
    return [s for s in _list(section_of(entry, check_id).get("steps")) if isinstance(s, dict)]


def step_of(entry: dict[str, Any], check_id: str, name: str) -> dict[str, Any] | None:
    return next((s for s in steps_of(entry, check_id) if s.get("name") == name), None)


def result_of(s: dict[str, Any] | None) -> dict[str, Any]:
    return _dict((s or {}).get("result"))


def state_of(v: dict[str, Any], key: str) -> str:
    """A state of a verdict (``zoo``, ``guard``) as text; ``-`` when absent."""
    value = v.get(key)
    return str(value) if value not in (None, "") else "-"


def behaviour_label(v: dict[str, Any]) -> str:
    return str(_dict(v.get("behavior")).get("label") or "")


def training_of(entry: dict[str, Any], check_id: str) -> dict[str, Any]:
    """The check's training verdict; from the ``train`` step's result when the verdict carries none."""
    t = _dict(verdict_of(entry, check_id).get("training"))
    if t:
        return t
    r = result_of(step_of(entry, check_id, "train"))
    if not r:
        return {}
    outcome = str(r.get("outcome") or "n/a")
    first = r.get("first_nan_step")
    label = f"{outcome} from step {first}" if outcome in NAN_TRAINING and first is not None else outcome
    return {"outcome": outcome, "first_nan_step": first, "label": label, "reason": r.get("reason") or ""}


def training_label(t: dict[str, Any]) -> str:
    return str(t.get("label") or t.get("outcome") or "n/a") if t else "n/a"


def training_shown(entry: dict[str, Any], check_id: str) -> bool:
    """Whether the check has a training run in this cell worth a grid segment (a step, or an outcome not n/a)."""
    t = training_of(entry, check_id)
    return step_of(entry, check_id, "train") is not None or (bool(t) and t.get("outcome") not in (None, "n/a"))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class Evidence:
    """One piece of a check's evidence in a cell, as JUnit writes it: one testcase."""

    group: str          # "step", "behavior", "behavior.extra"
    name: str
    outcome: Outcome
    message: str = ""   # one line: why it failed, errored or was skipped
    text: str = ""      # the longer story (log tail, details)
    out: str = ""       # what a passing item says
    seconds: float | None = None

    @property
    def failed(self) -> bool:
        return self.outcome in ("failure", "error")


def step_summary(r: dict[str, Any], limit: int = RESULT_JSON_CHARS) -> str:
    """A generic one-paragraph summary of a step's result: its verdict, its behaviour counts, or its JSON.

    Knows only the keys every check's steps share (``verdict``/``reason``, a
    behaviour suite's ``tests``/``extra``), never a check's own.
    """
    if r.get("verdict"):
        return f"verdict {r['verdict']}: {r.get('reason') or ''}".strip()
    if isinstance(r.get("tests"), list):
        outcomes = [t.get("outcome") for key in ("tests", "extra") for t in _list(r.get(key)) if isinstance(t, dict)]
        return (f"{plural(len(_list(r.get('tests'))), 'test')}, {plural(len(_list(r.get('extra'))), 'extra')}: "
                f"{outcomes.count('pass')} pass, {outcomes.count('fail')} fail, {outcomes.count('n/a')} n/a")
    text = json.dumps(r, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + " […]"


def _said(label: str, reason: str) -> str:
    return f"{label}: {reason}" if reason else label


def _train_evidence(entry: dict[str, Any], check_id: str, s: dict[str, Any] | None) -> Evidence:
    """The training run as one testcase: a NaN logged or stored is a failure, a step that died an error."""
    t = training_of(entry, check_id)
    seconds = (s or {}).get("seconds")
    if s is not None and s.get("status") in STEP_ERRORS:
        return Evidence("step", "train", "error", f"{s.get('status')}: {s.get('reason') or ''}",
                        f"exit code {s.get('returncode')}\n\n{s.get('log_tail') or ''}", seconds=seconds)
    if s is not None and s.get("status") == "skipped":
        return Evidence("step", "train", "skipped", str(s.get("reason") or "not run"), seconds=seconds)
    outcome = t.get("outcome")
    said = _said(training_label(t), str(t.get("reason") or ""))
    runs = "\n".join(run_title(r) for r in _list(result_of(s).get("runs")) if isinstance(r, dict))
    story = "\n".join(x for x in (said, runs) if x)
    if outcome in NAN_TRAINING:
        return Evidence("step", "train", "failure", said, story, seconds=seconds)
    if outcome == "error":
        return Evidence("step", "train", "error", said, story, seconds=seconds)
    if outcome == "clean":
        return Evidence("step", "train", "pass", out=story, seconds=seconds)
    why = str(t.get("reason") or "") or ("this check has no training run" if s is None
                                         else "no training outcome recorded")
    return Evidence("step", "train", "skipped", why if why.startswith("n/a") else f"n/a: {why}", seconds=seconds)


def evidence_of(entry: dict[str, Any], check_id: str) -> list[Evidence]:
    """Every piece of evidence of one check in one cell, in report order: detectors, steps, tests, extras."""
    sec = section_of(entry, check_id)
    if not sec:
        err = _dict(entry.get("error"))
        msg = str(err.get("message") or "").strip().splitlines()
        why = (f"not run: {err.get('kind')}: {msg[0] if msg else ''}" if err
               else "not run: the cell has no evidence for this check")
        return [Evidence("step", "steps", "skipped", why), Evidence("step", "train", "skipped", why)]
    out: list[Evidence] = []
    static = _dict(sec.get("static"))
    sv = static.get("verdict") or "unknown"
    if sv == "unknown":
        out.append(Evidence("step", "static", "error", f"static detector: {static.get('reason') or 'no verdict'}",
                            str(static.get("reason") or ""), seconds=static.get("seconds")))
    else:
        out.append(Evidence("step", "static", "pass", out=f"verdict {sv}: {static.get('reason') or ''}".strip(),
                            seconds=static.get("seconds")))
    seen_train = False
    for s in steps_of(entry, check_id):
        name = str(s.get("name"))
        if name == "train":
            seen_train = True
            out.append(_train_evidence(entry, check_id, s))
            continue
        status = s.get("status")
        if status == "ok":
            out.append(Evidence("step", name, "pass", out=step_summary(result_of(s)), seconds=s.get("seconds")))
        elif status == "skipped":
            out.append(Evidence("step", name, "skipped", str(s.get("reason") or "not run"), seconds=s.get("seconds")))
        else:
            out.append(Evidence("step", name, "error", f"{status}: {s.get('reason') or ''}",
                                f"exit code {s.get('returncode')}\n\n{s.get('log_tail') or ''}",
                                seconds=s.get("seconds")))
    if not seen_train:
        out.append(_train_evidence(entry, check_id, None))
    out += tests_evidence(result_of(step_of(entry, check_id, "behavior")))
    return out


def tests_evidence(behaviour: dict[str, Any]) -> list[Evidence]:
    """The behaviour tests and extras of a behaviour step's result: fail is a failure, n/a a skip."""
    out = []
    for group, tests in (("behavior", behaviour.get("tests")), ("behavior.extra", behaviour.get("extra"))):
        for t in (x for x in _list(tests) if isinstance(x, dict)):
            name = f"{t.get('id')}: {t.get('title')}" if t.get("title") else str(t.get("id"))
            outcome, reason, secs = t.get("outcome"), str(t.get("reason") or ""), t.get("duration_s")
            details = t.get("details")
            detail_text = json.dumps(details, indent=1, sort_keys=True, default=str) if details else ""
            if outcome == "pass":
                out.append(Evidence(group, name, "pass", out=reason, seconds=secs))
            elif outcome == "fail":
                out.append(Evidence(group, name, "failure", reason,
                                    f"{t.get('title') or ''}\n{reason}\n\n{detail_text}".strip(), seconds=secs))
            elif outcome == "n/a":
                out.append(Evidence(group, name, "skipped", reason, seconds=secs))
            else:
                out.append(Evidence(group, name, "error", f"unknown outcome {outcome!r}: {reason}", seconds=secs))
    return out


def residual_of(entry: dict[str, Any], check_id: str) -> list[Evidence]:
    """The failing evidence of a check that passes the gate (empty when the check fails the gate, or is a
    WARN: a latent finding's failing evidence is what the warning is about)."""
    v = verdict_of(entry, check_id)
    if v.get("gate_fail") or v.get("gate_warn"):
        return []
    return [e for e in evidence_of(entry, check_id) if e.failed]


def residual_note(entry: dict[str, Any], check_id: str) -> str:
    """``passes, N residual failures`` for a passing check with failing evidence; empty otherwise."""
    n = len(residual_of(entry, check_id))
    return f"passes, {plural(n, 'residual failure')}" if n else ""


def residual_names(entry: dict[str, Any], check_id: str) -> str:
    return ", ".join(e.name.split(": ")[0] for e in residual_of(entry, check_id))


def verdict_line(entry: dict[str, Any], check_id: str, label: str, *, mark: Any = None) -> str:
    """One check in one cell: ``label: zoo / guard 14/14 (+1 n/a) · train clean``.

    Suffixes: ``passes, N residual failures`` when the check passes the gate
    with failing evidence; ``expected`` when it fails in the state the matrix
    declares; ``expected <state>`` when the matrix declares another state.

    ``mark`` (optional) wraps the guard state, e.g. in bold for Markdown; it is
    called with the state text and whether the check fails the gate.
    """
    v = verdict_of(entry, check_id)
    guard = state_of(v, "guard")
    if v.get("word"):  # the check speaks its own words (a pair is compatible, not ``fixed / not-needed``)
        text = f"{label}: {mark(str(v['word']), bool(v.get('gate_fail'))) if mark else v['word']}"
    else:
        guard_txt = mark(guard, bool(v.get("gate_fail"))) if mark else guard
        text = f"{label}: {state_of(v, 'zoo')} / {guard_txt}"
    if v.get("reach"):
        text += f" ({v['reach']})"
    beh = behaviour_label(v)
    if beh:
        text += f" {beh}"
    if training_shown(entry, check_id):
        text += f" · train {training_label(training_of(entry, check_id))}"
    note = residual_note(entry, check_id)
    if note:
        text += f" · {note}"
    expected = _dict(entry.get("expect")).get(check_id)
    if expected is not None and v.get("gate_fail") and expected == guard:
        text += " · expected"  # pytest's xfail: the matrix declares this failing state
    elif expected is not None and expected != guard:
        text += f" · expected {expected}"
    return text


def status_word(report: dict[str, Any], entry: dict[str, Any], check_id: str) -> str:
    """FAIL, XFAIL (fails in the state the matrix expects), XPASS (an expected failure that no longer happens),
    WARN (a failing state the gate lets pass: ``missing`` whose reach is ``latent``), PASS."""
    v = verdict_of(entry, check_id)
    expected = _dict(entry.get("expect")).get(check_id)
    failing_states = _list(_dict(report.get("gate")).get("failing_states"))
    if v.get("gate_fail"):
        return "XFAIL" if expected is not None and expected == v.get("guard") else "FAIL"
    if expected is not None and expected in failing_states and expected != v.get("guard"):
        return "XPASS"
    return "WARN" if v.get("gate_warn") else "PASS"


def headline(report: dict[str, Any]) -> tuple[bool, str]:
    """(passes, words) that every format opens with: the run's exit code in words (``reports.gate``)."""
    from reports.gate import evaluate

    outcome = evaluate({**report, "cells": [e for e in _list(report.get("cells")) if isinstance(e, dict)]})
    return outcome.passed, outcome.headline()


def failing_checks(report: dict[str, Any], entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's checks that fail the gate in this cell."""
    return [c for c in report_checks(report) if verdict_of(entry, str(c["id"])).get("gate_fail")]


def cell_failed(report: dict[str, Any], entry: dict[str, Any]) -> bool:
    """A cell fails when the report's gate lists it, when it says so itself, or when one of its checks does."""
    failed = _list(_dict(report.get("gate")).get("failed_cells"))
    return entry.get("cell_id") in failed or bool(entry.get("gate_fail")) or bool(failing_checks(report, entry))


def state_counts(report: dict[str, Any], check_id: str) -> list[tuple[str, int]]:
    """The report's state counts of one check, non-zero only: its guard states in the report's order, or, for a
    check that speaks its own words (``word``), those words in the order the cells first show them."""
    verdicts = [verdict_of(_dict(e), check_id) for e in _list(report.get("cells"))]
    if any(v.get("word") for v in verdicts):
        words: dict[str, int] = {}
        for v in verdicts:
            if v:
                w = str(v.get("word") or v.get("guard") or "-")
                words[w] = words.get(w, 0) + 1
        return list(words.items())
    counts = _dict(_dict(report.get("summary")).get(check_id))
    return [(str(k), int(v)) for k, v in counts.items() if isinstance(v, int) and v]


def admissible_text(entry: dict[str, Any]) -> str:
    adm = _dict(entry.get("admissible"))
    if not adm:
        return "not checked"
    value = {True: "yes", False: "no (installed with overrides)"}.get(adm.get("value"), "unknown")
    return f"{value} [{adm.get('method') or '-'}]"


def run_title(run: dict[str, Any]) -> str:
    first = run.get("first_nan_step")
    outcome = f"{run.get('outcome') or 'n/a'}" + (f" from step {first}" if first is not None else "")
    return f"run {run.get('name') or '-'} (gradient accumulation {run.get('gradient_accumulation_steps') or '-'}): " \
           f"{outcome}"


def build_descriptions(cells: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """``(grid column -> describe, grid row -> describe)`` over the cells that carry their builds; a stack's
    column adds the packages it resolved (transformers and TRL; torch too where the column has no build)."""
    out: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for e in cells:
        builds = [b for b in (e.get("builds") or {}).values() if isinstance(b, dict)]
        if not builds:
            continue
        text = " × ".join(str(b.get("describe", "")) for b in builds[1:])
        stack = _dict(e.get("stack"))
        if stack.get("name"):
            resolved = _dict(stack.get("resolved"))
            shown = ", ".join(f"{k} {v}" for k, v in resolved.items() if v and (k != "torch" or len(builds) == 1))
            text = " · ".join(x for x in (text, shown) if x)
        out[0][column_of(e)] = text
        out[1][row_of(e)] = str(builds[0].get("describe", ""))
    return out
