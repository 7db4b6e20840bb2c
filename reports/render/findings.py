"""The findings of a report, grouped: one per (status, check, state, words), with the cells it covers.

A matrix repeats itself: the same check in the same state for the same reason in four cells is one thing a
person has to read, not four. :func:`findings` turns a report's failing, stale, warning and residual checks
into :class:`Finding` values, identical words merged and their cells listed, worst first (FAIL, XPASS,
XFAIL, WARN, then passes with residual failures). The terminal and ``report.md`` print each finding's full
text once and open with :func:`summary_lines`, one short line per finding. :func:`compact_line` is a grid
cell's line for a narrow screen (the state in the check's own words, its reach, a failing training run).

Nothing here names a check: the words come from the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reports.advice import advice, fixed_since
from reports.render.view import (
    NAN_TRAINING,
    report_checks,
    residual_names,
    residual_note,
    status_word,
    training_of,
    verdict_of,
)

ORDER = ("FAIL", "XPASS", "XFAIL", "WARN", "PASS")


@dataclass(frozen=True)
class Finding:
    """One thing that happened, in the same words, in one or more cells."""

    word: str  # FAIL, XPASS, XFAIL, WARN or PASS (a pass with residual failures)
    check: str
    state: str  # the state in the check's own words, with its reach
    reason: str
    details: tuple[tuple[str, str], ...] = ()  # (label, text): symptom, reach, install, fix, next step
    cells: tuple[str, ...] = ()

    def head(self) -> str:
        """``WARN some-check: missing (latent) in 4 cells: a, b, c, d``: the finding without its words."""
        where = self.cells[0] if len(self.cells) == 1 else f"{len(self.cells)} cells: {', '.join(self.cells)}"
        return f"{self.word} {self.check}: {self.state} in {where}"


def shown_state(v: dict[str, Any]) -> str:
    """A verdict's state as every format shows it: the check's own word where it has one, else the guard state."""
    return str(v.get("word") or v.get("guard") or "-")


def _one(report: dict[str, Any], entry: dict[str, Any], check: dict[str, Any]) -> Finding | None:
    cid = str(check["id"])
    v = verdict_of(entry, cid)
    word = status_word(report, entry, cid)
    state = shown_state(v) + (f" ({v['reach']})" if v.get("reach") else "")
    if v.get("gate_fail"):
        symptom = str(v.get("symptom") or "")
        shown = symptom and symptom not in str(v.get("guard_reason") or "")  # said once, where the reason has it
        details = ([("symptom", symptom)] if shown else []) + list(
            advice(entry, check, fixed=fixed_since(report, cid)).lines())
        return Finding(word, cid, state, str(v.get("guard_reason") or ""), tuple(details))
    if word == "XPASS":
        expected = (entry.get("expect") or {}).get(cid)
        return Finding(word, cid, state, f"expected {expected}, which no longer happens: the expectation is stale; "
                                         "remove or update it in the matrix file")
    if word == "WARN":
        strict = "; strict mode fails it" if v.get("reach") == "latent" else ""
        return Finding(word, cid, state, f"passes the gate{strict}: {v.get('warn') or v.get('reach_reason') or ''}")
    note = residual_note(entry, cid)
    if note:
        return Finding("PASS", cid, state, f"{note} ({residual_names(entry, cid)})")
    return None


def findings(report: dict[str, Any]) -> list[Finding]:
    """Every finding of the report, identical ones merged with their cells listed, worst first."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    first: dict[tuple[Any, ...], Finding] = {}
    for entry in report.get("cells") or []:
        if not isinstance(entry, dict):
            continue
        for check in report_checks(report):
            f = _one(report, entry, check)
            if f is None:
                continue
            key = (f.word, f.check, f.state, f.reason, f.details)
            first.setdefault(key, f)
            groups.setdefault(key, []).append(str(entry.get("cell_id")))
    out = [Finding(f.word, f.check, f.state, f.reason, f.details, tuple(groups[k])) for k, f in first.items()]
    return sorted(out, key=lambda f: ORDER.index(f.word) if f.word in ORDER else len(ORDER))


def summary_lines(found: list[Finding]) -> list[str]:
    """One short line per finding that is not a plain pass (what a person reads first)."""
    return [f.head() for f in found if f.word != "PASS"]


def compact_line(entry: dict[str, Any], check_id: str, label: str) -> str:
    """A grid cell's line for a narrow screen: ``label: state (reach) · train nan-logged from step 4``."""
    v = verdict_of(entry, check_id)
    text = f"{label}: {shown_state(v)}" + (f" ({v['reach']})" if v.get("reach") else "")
    t = training_of(entry, check_id)
    if t.get("outcome") in NAN_TRAINING:
        step = t.get("first_nan_step")
        text += f" · train {t['outcome']}" + (f" from step {step}" if isinstance(step, int) else "")
    expected = (entry.get("expect") or {}).get(check_id)
    if expected is not None and v.get("gate_fail") and expected == v.get("guard"):
        text += " · expected"
    elif expected is not None and expected != v.get("guard"):
        text += f" · expected {expected}"
    return text
