"""``junit.xml``: one ``<testsuite>`` per cell, for GitHub, GitLab and Jenkins.

Each cell's suite holds, for every registered check in report order: the
check's verdict as a ``gate`` testcase (``<failure>`` when the check fails
the gate, ``<error>`` when its state is ``error``; the message carries the
reason and the plain words of ``reports.advice``), then one testcase per
piece of evidence (``reports.render.view.evidence_of``): the static detector
and each step (an ``<error>`` when the step did not finish; the ``train``
step is a ``<failure>`` when the run logged or stored a NaN), one per
behaviour test and extra probe (``fail`` is a ``<failure>``, ``n/a`` is
``<skipped>`` with its reason). A check that fails in the state the matrix
expects (pytest's strict xfail) is ``<skipped>`` throughout, with the
expectation in the message; an expected failure that no longer happens
(XPASS) is a ``<failure>``.

Every ``classname`` is ``<cell id>.<check id>.<group>``, because GitLab
groups and deduplicates by classname; Jenkins splits it at the last dot, so
``<cell id>.<check id>`` is the package and ``gate``/``step``/``behavior``
the class. Builds, digests, versions, admissibility and each check's states
are properties of the testsuite only: the xunit2 schema rejects properties on
a testcase. Counts and times follow the surefire/Jenkins schema
(``junit-10.xsd``): ``tests``/``failures``/``errors`` on the root, plus
``skipped`` on each suite, times in seconds with three decimals.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, ClassVar

from reports.advice import advice, fixed_since
from reports.render.base import Renderer
from reports.render.view import (
    Evidence,
    evidence_of,
    report_checks,
    residual_names,
    residual_note,
    state_of,
    status_word,
    training_label,
    training_of,
    verdict_of,
)

MESSAGE_CHARS = 500
TEXT_CHARS = 8_000
KEY_DISTRIBUTIONS = ("unsloth", "unsloth_zoo", "unsloth-zoo", "torch", "transformers", "trl", "peft", "triton")
# Characters XML 1.0 cannot carry at all (a log tail may hold ANSI escapes): shown as \xNN instead.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: Any, limit: int = TEXT_CHARS) -> str:
    s = "" if value is None else str(value)
    s = _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", s)
    return s if len(s) <= limit else "[…]" + s[-limit:]


def _message(value: Any) -> str:
    lines = str(value or "").strip().splitlines()
    return _text(lines[0] if lines else "", MESSAGE_CHARS)


def _time(seconds: Any) -> str:
    return f"{seconds:.3f}" if isinstance(seconds, (int, float)) and seconds >= 0 else "0.000"


class _Suite:
    """One cell's testsuite as it is filled; counts follow the testcases added."""

    def __init__(self, cell_id: str) -> None:
        self.cell_id = cell_id
        self.el = ET.Element("testsuite", name=cell_id)
        self.props = ET.SubElement(self.el, "properties")
        self.counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

    def prop(self, name: str, value: Any) -> None:
        if value is not None and value != "":
            ET.SubElement(self.props, "property", name=name, value=_text(value, MESSAGE_CHARS))

    def case(self, group: str, name: str, seconds: Any = None, *, outcome: str = "pass", message: str = "",
             text: str = "", out: str = "") -> ET.Element:
        """Add a testcase; ``outcome`` is pass, failure, error or skipped."""
        tc = ET.SubElement(self.el, "testcase", classname=f"{self.cell_id}.{group}", name=_text(name, MESSAGE_CHARS),
                           time=_time(seconds))
        self.counts["tests"] += 1
        if outcome != "pass":
            tag = {"failure": "failure", "error": "error", "skipped": "skipped"}[outcome]
            self.counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[outcome]] += 1
            child = ET.SubElement(tc, tag, message=_message(message))
            if tag != "skipped":
                child.set("type", group.rsplit(".", 1)[-1] if tag == "failure" else "error")
            if text:
                child.text = _text(text)
        if out:
            ET.SubElement(tc, "system-out").text = _text(out)
        return tc


class JunitRenderer(Renderer):
    filename: ClassVar[str | None] = "junit.xml"

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        root = ET.Element("testsuites", name=f"skewmatrix {report.get('matrix', '')}".strip())
        totals = {"tests": 0, "failures": 0, "errors": 0}
        total_time = 0.0
        for cell in report.get("cells") or []:
            if not isinstance(cell, dict):
                continue
            suite = self._suite(report, cell)
            root.append(suite.el)
            for k in totals:
                totals[k] += suite.counts[k]
            seconds = cell.get("seconds")
            total_time += seconds if isinstance(seconds, (int, float)) and seconds >= 0 else 0.0
        for k, v in totals.items():
            root.set(k, str(v))
        root.set("time", _time(total_time))
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

    def _suite(self, report: dict[str, Any], cell: dict[str, Any]) -> _Suite:
        suite = _Suite(str(cell.get("cell_id")))
        if cell.get("started"):
            suite.el.set("timestamp", _text(str(cell["started"]).replace("+00:00", ""), 64))
        self._properties(report, suite, cell)
        for check in report_checks(report):
            self._check_cases(report, suite, cell, check)
        for k, v in suite.counts.items():
            suite.el.set(k, str(v))
        suite.el.set("time", _time(cell.get("seconds")))
        return suite

    @staticmethod
    def _properties(report: dict[str, Any], suite: _Suite, cell: dict[str, Any]) -> None:
        suite.prop("cell_id", cell.get("cell_id"))
        suite.prop("matrix", cell.get("matrix"))
        suite.prop("gate", "fail" if cell.get("gate_fail") else "pass")
        for check in report_checks(report):
            v = verdict_of(cell, check["id"])
            suite.prop(f"check.{check['id']}.guard_state", v.get("guard"))
            suite.prop(f"check.{check['id']}.zoo_state", v.get("zoo"))
            if v.get("word"):  # the check's own word for the state (a pair is compatible, degraded, ...)
                suite.prop(f"check.{check['id']}.state", v.get("word"))
            suite.prop(f"check.{check['id']}.training", training_label(training_of(cell, check["id"])))
            suite.prop(f"check.{check['id']}.reach", v.get("reach"))
            suite.prop(f"check.{check['id']}.gate",
                       "fail" if v.get("gate_fail") else ("warn" if v.get("gate_warn") else "pass"))
        for role in ("unsloth", "zoo"):
            b = (cell.get("builds") or {}).get(role) or {}
            suite.prop(f"{role}.build", b.get("name"))
            suite.prop(f"{role}.source", b.get("describe"))
            suite.prop(f"{role}.version", b.get("installed_version") or b.get("version"))
            suite.prop(f"{role}.digest", b.get("digest"))
        torch = cell.get("torch") or {}
        suite.prop("torch.version", torch.get("version"))
        suite.prop("torch.local", torch.get("local"))
        adm = cell.get("admissible") or {}
        if adm:
            suite.prop("admissible", {True: "yes", False: "no", None: "unknown"}.get(adm.get("value"), "unknown"))
            suite.prop("admissible.method", adm.get("method"))
        options = cell.get("options") or {}
        probes = cell.get("probes") or {}
        for key in ("python", "device", "compile", "cpu_mode"):
            suite.prop(key, probes.get(key) or options.get(key))
        rank = {n: i for i, n in enumerate(KEY_DISTRIBUTIONS)}
        dists = sorted((d for d in cell.get("installed") or [] if isinstance(d, dict)
                        and str(d.get("name")).lower() in rank), key=lambda d: rank[str(d.get("name")).lower()])
        for d in dists:
            suite.prop(f"installed.{d.get('name')}", d.get("version"))
            suite.prop(f"installed.{d.get('name')}.tree_sha256", d.get("tree_sha256"))
            suite.prop(f"installed.{d.get('name')}.wheel_sha256", d.get("wheel_sha256"))
        suite.prop("installed.count", len(cell.get("installed") or []))

    def _check_cases(self, report: dict[str, Any], suite: _Suite, cell: dict[str, Any], check: dict[str, Any]) -> None:
        cid = check["id"]
        word = status_word(report, cell, cid)
        expected = (cell.get("expect") or {}).get(cid)
        self._gate_case(report, suite, cell, check, word)
        # What the gate lets pass is not a red test: XFAIL (expected) and WARN (reach latent) failures are skips.
        hold = {"XFAIL": f"XFAIL (the matrix expects {expected})",
                "WARN": "WARN (reach latent: passes the gate, fails it in strict mode)"}.get(word, "")
        for ev in evidence_of(cell, cid):
            self._evidence_case(suite, f"{cid}.{ev.group}", ev, xfail=hold)

    @staticmethod
    def _gate_case(report: dict[str, Any], suite: _Suite, cell: dict[str, Any], check: dict[str, Any],
                   word: str) -> None:
        cid = check["id"]
        v = verdict_of(cell, cid)
        # a check that speaks its own words is judged in them (``word``); the others in the guard vocabulary
        guard, reason = str(v.get("word") or state_of(v, "guard")), str(v.get("guard_reason") or "")
        story = ([f"{guard}: {reason}"] if v.get("word") else
                 [f"guard {guard}: {reason}", f"zoo {state_of(v, 'zoo')}: {v.get('zoo_reason') or ''}"])
        story.append(f"training: {training_label(training_of(cell, cid))}")
        failing = (v.get("behavior") or {}).get("failing") or []
        if failing:
            story.append(f"failing behaviour tests: {', '.join(map(str, failing))}")
        if v.get("symptom"):
            story.append(f"symptom: {v['symptom']}")
        group = f"{cid}.gate"
        expected = (cell.get("expect") or {}).get(cid)
        if word == "XPASS":
            suite.case(group, "guard state", outcome="failure",
                       message=f"XPASS: expected {expected}, got {guard}: the expectation is stale",
                       text="\n".join(story))
            return
        if v.get("reach"):
            story.insert(1, f"reach {v['reach']}: {v.get('reach_reason') or ''}")
        if word == "WARN":
            why = v.get("warn") or f"reach latent: {v.get('reach_reason') or ''}"
            suite.case(group, "guard state", outcome="skipped", message=f"WARN: {guard}, {why}", text="\n".join(story))
            return
        if not v.get("gate_fail"):
            note = residual_note(cell, cid)
            if note:
                story.insert(0, f"{note}: {residual_names(cell, cid)}")
            suite.case(group, "guard state", out="\n".join(story))
            return
        a = advice(cell, check, fixed=fixed_since(report, cid))
        story += [f"{label}: {text}" for label, text in a.lines()]
        message = (f"{guard}: {reason}. " + (f"Reach: {a.reach}. " if a.reach else "")
                   + f"Install: {a.install}. Next step: {a.next_step}")
        if word == "XFAIL":
            suite.case(group, "guard state", outcome="skipped",
                       message=f"XFAIL (the matrix expects {expected}): {message}", text="\n".join(story))
            return
        text = "\n".join(story)
        err = cell.get("error")
        if v.get("guard") == "error" and isinstance(err, dict):
            text += f"\n\n{err.get('kind')}: {err.get('message', '')}\n\n{err.get('log_tail', '')}"
        suite.case(group, "guard state", outcome="error" if v.get("guard") == "error" else "failure", message=message,
                   text=text)

    @staticmethod
    def _evidence_case(suite: _Suite, group: str, ev: Evidence, *, xfail: str) -> None:
        if xfail and ev.failed:
            suite.case(group, ev.name, ev.seconds, outcome="skipped", message=f"{xfail}: {ev.message}", text=ev.text)
            return
        suite.case(group, ev.name, ev.seconds, outcome=ev.outcome, message=ev.message, text=ev.text, out=ev.out)
