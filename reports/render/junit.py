"""``junit.xml``: one ``<testsuite>`` per cell, for GitHub, GitLab and Jenkins.

Each cell's suite holds, in this order: the cell's guard state as a testcase
(``<failure>`` when the cell fails the gate, ``<error>`` when its state is
``error``), one testcase per probe (static, runtime, guard, behavior: an
``<error>`` when the probe did not finish), and one per behaviour test and
extra probe (``fail`` is a ``<failure>``, ``n/a`` is ``<skipped>`` with its
reason). Every ``classname`` starts with the cell id, because GitLab groups and
deduplicates by classname; Jenkins splits it at the last dot, so the cell id
is the package and ``gate``/``probe``/``behavior`` the class. Builds, digests,
versions and admissibility are properties of the testsuite only: the xunit2
schema rejects properties on a testcase. Counts and times follow the
surefire/Jenkins schema (``junit-10.xsd``): ``tests``/``failures``/``errors``
on the root, plus ``skipped`` on each suite, times in seconds with three
decimals.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any, ClassVar

from reports.render.base import Renderer

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


def _probe_step(cell: dict[str, Any], name: str) -> dict[str, Any] | None:
    probes = cell.get("probes") or {}
    return next((s for s in probes.get("steps") or [] if s.get("name") == name), None)


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
                child.set("type", group if tag == "failure" else "error")
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
        for cell in report.get("cells", []):
            suite = self._suite(cell)
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

    def _suite(self, cell: dict[str, Any]) -> _Suite:
        cid = str(cell.get("cell_id"))
        suite = _Suite(cid)
        if cell.get("started"):
            suite.el.set("timestamp", _text(str(cell["started"]).replace("+00:00", ""), 64))
        self._properties(suite, cell)
        self._gate_case(suite, cell)
        self._probe_cases(suite, cell)
        self._behaviour_cases(suite, cell)
        for k, v in suite.counts.items():
            suite.el.set(k, str(v))
        suite.el.set("time", _time(cell.get("seconds")))
        return suite

    def _properties(self, suite: _Suite, cell: dict[str, Any]) -> None:
        c = cell.get("classification") or {}
        suite.prop("cell_id", cell.get("cell_id"))
        suite.prop("matrix", cell.get("matrix"))
        suite.prop("guard_state", c.get("guard"))
        suite.prop("zoo_state", c.get("zoo"))
        suite.prop("gate", "fail" if cell.get("gate_fail") else "pass")
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

    def _gate_case(self, suite: _Suite, cell: dict[str, Any]) -> None:
        c = cell.get("classification") or {}
        guard, reason = c.get("guard"), c.get("guard_reason", "")
        summary = f"guard {guard}: {reason}\nzoo {c.get('zoo')}: {c.get('zoo_reason', '')}"
        failing = (c.get("behavior") or {}).get("failing") or []
        if failing:
            summary += f"\nfailing behaviour tests: {', '.join(map(str, failing))}"
        if not cell.get("gate_fail"):
            suite.case("gate", "guard state", out=summary)
            return
        err = cell.get("error")
        if guard == "error":
            text = summary
            if isinstance(err, dict):
                text += f"\n\n{err.get('kind')}: {err.get('message', '')}\n\n{err.get('log_tail', '')}"
            suite.case("gate", "guard state", outcome="error", message=f"{guard}: {reason}", text=text)
        else:
            suite.case("gate", "guard state", outcome="failure", message=f"{guard}: {reason}", text=summary)

    def _probe_cases(self, suite: _Suite, cell: dict[str, Any]) -> None:
        probes = cell.get("probes")
        if not probes:
            err = cell.get("error") or {}
            why = f"not run: {err.get('kind', 'no probes')}: {_message(err.get('message'))}"
            for name in ("static", "runtime", "guard", "behavior"):
                suite.case("probe", name, outcome="skipped", message=why)
            return
        static = probes.get("static") or {}
        verdict = static.get("verdict", "unknown")
        if verdict == "unknown":
            suite.case("probe", "static", probes.get("static_s"), outcome="error",
                       message=f"static detector failed: {static.get('reason', '')}", text=static.get("reason", ""))
        else:
            suite.case("probe", "static", probes.get("static_s"), out=f"verdict {verdict}: {static.get('reason', '')}")
        for name in ("runtime", "guard", "behavior"):
            step = _probe_step(cell, name)
            if step is None:
                if name == "behavior":
                    suite.case("probe", name, outcome="skipped", message="the behaviour suite was not run")
                else:
                    suite.case("probe", name, outcome="error", message=f"the {name} probe did not run")
                continue
            result = step.get("result") if isinstance(step.get("result"), dict) else {}
            if step.get("status") == "ok":
                suite.case("probe", name, step.get("seconds"), out=self._probe_summary(name, result))
            elif step.get("status") == "skipped":
                suite.case("probe", name, outcome="skipped", message=str(step.get("reason") or "not run"))
            else:
                suite.case("probe", name, step.get("seconds"), outcome="error",
                           message=f"{step.get('status')}: {step.get('reason') or ''}",
                           text=f"exit code {step.get('returncode')}\n\n{step.get('log_tail') or ''}")

    @staticmethod
    def _probe_summary(name: str, result: dict[str, Any]) -> str:
        if name == "guard":
            public = (result.get("routes") or {}).get("public") or {}
            original = (result.get("forward") or {}).get("original")
            return (f"forward replaced: {'unknown' if original is None else not original}; "
                    f"all-masked finite: {result.get('all_masked_finite')}; "
                    f"public route loss {public.get('loss')} ({public.get('grad_fn')})")
        if result.get("verdict"):
            return f"verdict {result['verdict']}: {result.get('reason', '')}"
        return str(result.get("reason") or "ok")

    def _behaviour_cases(self, suite: _Suite, cell: dict[str, Any]) -> None:
        step = _probe_step(cell, "behavior")
        result = (step or {}).get("result")
        if not isinstance(result, dict):
            return
        for group, tests in (("behavior", result.get("tests") or []), ("behavior.extra", result.get("extra") or [])):
            for t in tests:
                if not isinstance(t, dict):
                    continue
                name = f"{t.get('id')}: {t.get('title')}" if t.get("title") else str(t.get("id"))
                outcome, reason = t.get("outcome"), t.get("reason") or ""
                details = t.get("details")
                detail_text = json.dumps(details, indent=1, sort_keys=True, default=str) if details else ""
                if outcome == "pass":
                    suite.case(group, name, t.get("duration_s"), out=reason)
                elif outcome == "fail":
                    suite.case(group, name, t.get("duration_s"), outcome="failure", message=reason,
                               text=f"{t.get('title', '')}\n{reason}\n\n{detail_text}".strip())
                elif outcome == "n/a":
                    suite.case(group, name, t.get("duration_s"), outcome="skipped", message=reason)
                else:
                    suite.case(group, name, t.get("duration_s"), outcome="error",
                               message=f"unknown outcome {outcome!r}: {reason}")
