"""Gate decisions: expected states, exit codes, and plain-words recommendations.

``evaluate(report)`` judges every (cell, check) like pytest's strict xfail:

* ``pass``  -- the state passes the gate and nothing else was expected;
* ``xfail`` -- a failing state the matrix file expected (``expect``);
* ``fail``  -- a failing state nobody expected, or a state other than the
  expected one;
* ``xpass`` -- a failing state was expected and a passing one came: the
  expectation is stale, so the run fails until the matrix file is updated.

Which states fail is the report's ``gate.failing_states`` (the matrix file's
``[gate] fail_on``, default :data:`probes.checks.vocabulary.FAILING_BY_DEFAULT`);
nothing here spells a state list of its own. The outcome is data: whether
it ``passed`` (no ``fail``, no ``xpass``) and whether some cell gave
``no_verdict`` (an unexpected ``error``). The harness turns it into an exit
code (``matrix.errors``); no number is chosen here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from probes.checks.vocabulary import FAILING_BY_DEFAULT

Kind = Literal["pass", "xfail", "fail", "xpass"]
# Worst first: a cell's kind is the worst of its checks'.
KIND_ORDER: tuple[Kind, ...] = ("fail", "xpass", "xfail", "pass")


@dataclass(frozen=True)
class CheckOutcome:
    """One check of one cell, judged against what the matrix file expects."""

    cell_id: str
    check: str
    state: str
    expected: str | None
    kind: Kind
    reach: str | None = None
    warn: bool = False  # a state the gate lets pass with a warning (``missing``, reach ``latent``; a check's ``warn``)
    reach_reason: str = ""  # why it warns: the reach's words, or the check's ``warn``
    word: str = ""  # the check's own word for the state (``Verdict.word``); "" when the state is the word

    @property
    def shown(self) -> str:
        """The state as every format shows it: the check's own word where it has one."""
        return self.word or self.state

    def finding(self, brief: bool = False) -> str:
        """What happened without the cell (the same words for every cell it happened in); ``brief`` leaves the
        reason of a warning out (it is printed once, grouped, by the report)."""
        head = f"{self.check}: {self.shown}" + (f" ({self.reach})" if self.reach else "")
        if self.warn and self.kind == "pass":
            if brief:
                return f"{head} (WARN: passes the gate)"
            strict = "; strict mode fails it" if self.reach == "latent" else ""
            return f"{head} (WARN: passes the gate; {self.reach_reason}{strict})"
        if self.kind == "xfail":
            return f"{head} (XFAIL: expected)"
        if self.kind == "xpass":
            return (f"{head} (XPASS: expected {self.expected}, which no longer happens; the expectation is stale: "
                    "remove or update it in the matrix file)")
        if self.kind == "fail" and self.expected is not None:
            return f"{head} (FAIL: expected {self.expected})"
        if self.kind == "fail":
            return f"{head} (FAIL: fails the gate)"
        return head

    def describe(self, brief: bool = False) -> str:
        """One line: the cell, what happened and, for a failure, why it counts as one."""
        return f"{self.cell_id} {self.finding(brief)}"


@dataclass(frozen=True)
class Outcome:
    """The gate's judgement of a whole report."""

    checks: tuple[CheckOutcome, ...]
    failing_states: frozenset[str]

    def of_kind(self, kind: Kind) -> list[CheckOutcome]:
        return [c for c in self.checks if c.kind == kind]

    def cell_kind(self, cell_id: str) -> Kind:
        kinds = {c.kind for c in self.checks if c.cell_id == cell_id}
        return next((k for k in KIND_ORDER if k in kinds), "pass")

    @property
    def passed(self) -> bool:
        """Everything passes or is as expected: no unexpected failure and no XPASS."""
        return not (self.of_kind("fail") or self.of_kind("xpass"))

    @property
    def no_verdict(self) -> bool:
        """Some cell could not be probed and nobody expected it (an unexpected ``error``)."""
        return any(c.state == "error" for c in self.of_kind("fail"))

    def summary(self) -> str:
        """The closing line of a run: counts, then the exit code and what it means."""
        counts = ", ".join(f"{len(self.of_kind(k))} {k}" for k in ("pass", "xfail", "fail", "xpass"))
        verdict = "ok" if self.passed else "FAILED"
        return f"gate {verdict}: {counts} (cell x check; failing states: {', '.join(sorted(self.failing_states))})"

    def warnings(self) -> list[CheckOutcome]:
        """Failing states the gate lets pass (``missing``, reach ``latent``), neither expected nor failing."""
        return [c for c in self.checks if c.warn and c.kind == "pass"]

    def lines(self, brief: bool = False) -> list[str]:
        """One line per finding that is not a plain pass, worst first, warnings last; the cells with the same
        finding share one line (``finding: N cells: a, b``)."""
        ordered = [c for k in KIND_ORDER[:3] for c in self.of_kind(k)] + self.warnings()
        groups: dict[str, list[str]] = {}
        for c in ordered:
            groups.setdefault(c.finding(brief), []).append(c.cell_id)
        return [f"{cells[0]} {text}" if len(cells) == 1 else f"{text}: {len(cells)} cells: {', '.join(cells)}"
                for text, cells in groups.items()]

    def headline(self) -> str:
        """What every format opens with: the exit code's verdict in words (``GATE PASS``/``GATE FAIL``)."""
        n = len({c.cell_id for c in self.checks})
        cells = f"{n} cell" + ("" if n == 1 else "s")
        fails = self.of_kind("fail") + self.of_kind("xpass")
        if fails:
            bad = len({c.cell_id for c in fails})
            stale = len(self.of_kind("xpass"))
            stale_words = f" ({stale} stale expectation(s), XPASS)" if stale else ""
            return f"GATE FAIL: {bad} of {cells} fail{'s' if n == 1 else ''}{stale_words}"
        extra = [f"{len(self.of_kind('xfail'))} expected failure(s), XFAIL"] if self.of_kind("xfail") else []
        latent = [c for c in self.warnings() if c.reach == "latent"]
        extra += [f"{len(latent)} latent warning(s), WARN"] if latent else []
        others: dict[str, int] = {}
        for c in self.warnings():
            if c.reach != "latent":
                others[c.shown] = others.get(c.shown, 0) + 1
        extra += [f"{n} {word} warning(s), WARN" for word, n in others.items()]
        notes = f" ({'; '.join(extra)})" if extra else ""
        return f"GATE PASS: {'all ' if n > 1 else ''}{cells} pass{'es' if n == 1 else ''}{notes}"


def judge(state: str, failing: bool, expected: str | None, failing_states: frozenset[str]) -> Kind:
    if expected is None:
        return "fail" if failing else "pass"
    if state == expected:
        return "xfail" if failing else "pass"
    if expected in failing_states and not failing:
        return "xpass"
    return "fail"


def evaluate(report: dict[str, Any]) -> Outcome:
    """Judge every cell and check of ``report`` (schema ``skewmatrix.report/2``); pure."""
    gate = report.get("gate") or {}
    failing_states = frozenset(gate.get("failing_states", FAILING_BY_DEFAULT))
    out: list[CheckOutcome] = []
    for entry in report["cells"]:
        cell_id = str(entry.get("cell_id"))
        verdicts: dict[str, Any] = entry.get("verdicts") or {}
        expect: dict[str, str] = entry.get("expect") or {}
        for check, verdict in verdicts.items():
            state = verdict["guard"]
            failing = bool(verdict.get("gate_fail", state in failing_states))
            kind = judge(state, failing, expect.get(check), failing_states)
            out.append(CheckOutcome(cell_id, check, state, expect.get(check), kind, verdict.get("reach"),
                                    bool(verdict.get("gate_warn")),
                                    str(verdict.get("warn") or verdict.get("reach_reason") or ""),
                                    str(verdict.get("word") or "")))
        for check in expect.keys() - verdicts.keys():
            # An expectation about a check the cell has no verdict for cannot be met: stale.
            out.append(CheckOutcome(cell_id, check, "no verdict", expect[check], "fail"))
    return Outcome(tuple(out), failing_states)


def _version(build: Any) -> str:
    b = build if isinstance(build, dict) else {}
    return str(b.get("installed_version") or b.get("version") or b.get("describe") or "-")


def recommendation(cell: dict[str, Any], checks: list[dict[str, Any]], fixed_since: str | None = None,
                   confirmed_by: str | None = None, scan_check: str | None = None) -> str:
    """What a maintainer can act on for one classified cell: one line per check, in the check's own words.

    ``fixed_since`` is the scan's first fixed zoo release after the last vulnerable one (never ``first_fixed``,
    which a regression can follow), for the check the scan covered (``scan_check``; all checks when None);
    ``confirmed_by`` says whether the runtime detector confirmed it.
    """
    builds = cell.get("builds") or {}
    zoo_v, uns_v = (_version(builds.get(role)) for role in ("zoo", "unsloth"))
    pair = "zoo" in builds and "unsloth" in builds
    # a cell of another subject (a source tree): its builds, named by package and what they are
    code = " and ".join(f"{(b or {}).get('package', role)} {(b or {}).get('name', '')} ({_version(b)})"
                        for role, b in builds.items())
    subject = f"unsloth_zoo {zoo_v} and unsloth {uns_v}" if pair else code
    how = "confirmed by running the kernel" if confirmed_by == "runtime" else "static reading"
    lines = []
    for check in checks:
        v = (cell.get("verdicts") or {}).get(check["id"])
        if v is None:
            continue
        since = fixed_since if scan_check in (None, check["id"]) else None
        fix = (f"unsloth_zoo>={since} (no vulnerable release from it on, per the scan; {how})" if since
               else check["fix_hint"])
        guard, reason, reach = v["guard"], v["guard_reason"], v.get("reach")
        head = f"{check['id']}: "
        if guard == "missing" and reach == "latent":
            text = (f"LATENT: with {subject}, {check['hazard']}, and nothing guards "
                    f"it; but {v.get('reach_reason')}. "
                    + ("The gate fails it in strict mode. " if not v.get("gate_fail") else "Strict mode fails it. ")
                    + f"Fix: {fix}.")
        elif guard == "missing":
            how = ("a real training run on this stack shows it" if reach == "exposed"
                   else "no training run shows whether your trainer reaches it, so it counts as exposed")
            text = (f"EXPOSED: with {subject}, {check['hazard']}; nothing guards it, "
                    f"and {how} ({v.get('symptom') or v.get('reach_reason') or reason}). Fix: {fix}.")
        elif guard == "broken":
            text = (f"BROKEN: a guard is present but misbehaves ({reason}); a defective guard fails the gate "
                    f"whatever the route ({reach}: {v.get('reach_reason')}). Fix: {fix}.")
        elif guard == "error":
            text = f"NO VERDICT: the environment could not be probed ({reason}). Fix the cause and rerun."
        elif not pair and guard in ("activates", "no-ops", "not-needed"):
            text = f"Safe: {code}: {check['guard_meaning'].get(guard, guard)}."
        elif guard == "activates":
            text = (f"Protected: unsloth_zoo {zoo_v} is vulnerable, but a guard in unsloth {uns_v} activates and "
                    f"passes. Upgrading (fix: {fix}) would remove the need for it.")
        elif guard == "no-ops":
            text = f"Safe: unsloth_zoo {zoo_v} carries the fix; the guard in unsloth {uns_v} stays idle."
        else:
            text = f"Safe: unsloth_zoo {zoo_v} is not exposed ({check['zoo_meaning'].get(v['zoo'], v['zoo'])})."
        lines.append(head + text)
    return "\n  ".join(lines)
