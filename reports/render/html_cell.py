"""The drill-down of one cell in ``report.html``: one section per check, then builds, installs and timings.

Per check: its verdict with the reason of each detector, the training
outcome and the user-visible symptom, the plain words of ``reports.advice``
when it fails the gate, what the check's own renderer makes of its steps
(``reports.render.details``), one row per step, the behaviour tests and
extras, the training run's per-step table and the log tails. Every string is
escaped (``esc``).
"""

from __future__ import annotations

import re
from typing import Any

from probes.checks import DetailTable
from reports.render.base import fmt_seconds, short_digest
from reports.render.details import check_details, train_table
from reports.render.html_base import (
    KEY_DISTRIBUTIONS,
    OUTCOME_CLASSES,
    esc,
    guard_class,
    short,
    table,
    tail,
    yes_no,
)
from reports.render.view import (
    cell_failed,
    evidence_of,
    report_checks,
    residual_names,
    residual_note,
    result_of,
    run_title,
    section_of,
    short_labels,
    state_of,
    step_of,
    steps_of,
    tests_evidence,
    training_label,
    training_of,
    verdict_of,
)


def cell_details(report: dict[str, Any], e: dict[str, Any]) -> str:
    cid = str(e.get("cell_id"))
    fail = cell_failed(report, e)
    checks = report_checks(report)
    labels = short_labels(checks)
    chips = " ".join(
        f'<span class="chip {"g-warn" if verdict_of(e, c["id"]).get("gate_warn") else guard_class(guard)}">'
        f'{esc(labels[c["id"]])} {esc(guard)}</span>'
        for c in checks for guard in [state_of(verdict_of(e, c["id"]), "guard")])
    summary = (f"<code>{esc(cid)}</code> — {chips}"
               + (' · <b class="bad">fails the gate</b>' if fail else " · passes"))
    body = [_error(e), *(_check(report, e, c) for c in checks), _builds(e), _installed(e), _timings(e)]
    return (f'<details class="cell {"fail" if fail else "pass"}{" g-error" if e.get("error") else ""}" '
            f'id="cell-{esc(cid)}" data-cell="{esc(cid)}">'
            f'<summary>{summary}</summary><div class="body">{"".join(b for b in body if b)}</div></details>')

def _check(report: dict[str, Any], e: dict[str, Any], check: dict[str, Any]) -> str:
    cid = check["id"]
    v = verdict_of(e, cid)
    guard = state_of(v, "guard")
    sec = section_of(e, cid)
    static = sec.get("static") if isinstance(sec.get("static"), dict) else {}
    where = ""
    if static.get("file"):
        where = (f' <span class="mono">({esc(str(static.get("file")).rpartition("site-packages/")[2])}:'
                 f'{esc(static.get("evidence_line"))})</span>')
    rt = step_of(e, cid, "runtime") or {}
    rt_reason = result_of(rt).get("reason") or rt.get("reason") or "not run"
    t = training_of(e, cid)
    items = [
        ("guard", f"<b>{esc(guard)}</b>: {esc(v.get('guard_reason'))}"),
        ("zoo", f"<b>{esc(state_of(v, 'zoo'))}</b>: {esc(_zoo_reason(v, rt_reason))}"),
        ("static detector", f"<b>{esc(v.get('static') or static.get('verdict') or '-')}</b>: "
                            f"{esc(static.get('reason') or 'not run')}{where}"),
        ("runtime detector", f"<b>{esc(v.get('runtime') or '-')}</b>: {esc(rt_reason)}"),
        ("training", f"<b>{esc(training_label(t))}</b>" + (f": {esc(_unsaid(t.get('reason'), v))}"
                                                           if t.get("reason") else "")),
    ]
    if v.get("symptom") and str(v["symptom"]) not in str(v.get("guard_reason")):
        items.append(("symptom", f'<span class="bad">{esc(v["symptom"])}</span>'))
    note = residual_note(e, cid)
    if note:
        items.append(("gate", f"{esc(note)}: {esc(residual_names(e, cid))}"))
    details = check_details(e, cid)
    items += [(label, with_code(text)) for label, text in details.items]
    details_html = "".join(_detail_table(t) for t in details.tables)
    kv = "".join(f"<dt>{esc(k)}</dt><dd>{val}</dd>" for k, val in items)
    return (f'<section class="check {"fail" if v.get("gate_fail") else "pass"}" data-check="{esc(cid)}" '
            f'data-guard="{esc(guard)}">'
            f'<h3><code>{esc(cid)}</code>: zoo {esc(state_of(v, "zoo"))} · guard '
            f'<span class="chip {guard_class(guard)}">{esc(guard)}</span>'
            + (' · <b class="bad">fails the gate</b>' if v.get("gate_fail") else "")
            + f'</h3><dl class="kv">{kv}</dl>{details_html}{_steps(e, cid)}'
            f"{_behaviour(e, cid, v)}{_training(e, cid)}{_logs(e, cid)}</section>")

def _unsaid(text: Any, v: dict[str, Any]) -> str:
    """``text``, or a pointer to the guard line when that line already says it in full."""
    text = str(text or "")
    return "as the guard line says" if len(text) > 40 and text in str(v.get("guard_reason") or "") else text


def _zoo_reason(v: dict[str, Any], rt_reason: str) -> str:
    """The zoo state's reason, without the runtime detector's words that the line below says in full."""
    reason = str(v.get("zoo_reason") or "")
    return reason.replace(rt_reason, "as the runtime detector says") if len(rt_reason) > 40 else reason


def with_code(text: str) -> str:
    """Escaped text with its backtick spans as ``<code>``."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", esc(text))


def _detail_table(t: DetailTable) -> str:
    rows = []
    for i, row in enumerate(t.rows):
        cells = []
        for j, value in enumerate(row):
            cls = "bad" if (i, j) in t.bad else ("mono" if j in t.code else "")
            cells.append(f'<td class="{cls}">{esc(value)}</td>' if cls else f"<td>{esc(value)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<h4>{esc(t.title)}</h4>" + table(list(t.headers), rows)


STEP_CHARS = 300
ROW_FAIL = ' class="row-fail"'


def _train_rows(rows: list[list[str]]) -> tuple[list[tuple[list[str], bool]], str]:
    """The rows a reader needs from a run's per-step table -- the fully masked steps and the non-finite ones --
    each with whether it is bad, and a note on what was left out (every step is in report.json)."""
    marked = [(row, any("nan" in x or "inf" in x for x in row[3:6]) or row[6] not in ("0", "-")) for row in rows]
    keep = [(row, bad) for row, bad in marked if bad or row[1] == "0"]
    if len(keep) == len(rows) or not keep:
        return marked, ""
    return keep, (f"{len(keep)} of {len(rows)} steps: the fully masked and the non-finite ones "
                  "(every step in report.json)")


def _steps(e: dict[str, Any], cid: str) -> str:
    """Every step on one line with its outcome and time; the ones that did not pass again as rows, with why."""
    line, rows = [], []
    for ev in evidence_of(e, cid):
        if ev.group != "step":
            continue
        cls = {"pass": "o-pass", "failure": "o-fail", "error": "o-fail", "skipped": "o-na"}[ev.outcome]
        line.append(f'<span class="{cls}">{esc(ev.name)} {esc(ev.outcome)}'
                    + (f" {esc(fmt_seconds(ev.seconds))}" if ev.seconds is not None else "") + "</span>")
        if ev.outcome != "pass":
            rows.append(f'<tr{ROW_FAIL if ev.failed else ""} data-step="{esc(ev.name)}"><td class="mono">'
                        f'{esc(ev.name)}</td><td class="{cls}">{esc(ev.outcome)}</td>'
                        f"<td>{esc(short(ev.message, STEP_CHARS))}</td></tr>")
    if not line:
        return ""
    return (f'<p class="steps">Steps: {" · ".join(line)}</p>'
            + (table(["step", "outcome", "why"], rows) if rows else ""))

def _behaviour(e: dict[str, Any], cid: str, v: dict[str, Any]) -> str:
    s = step_of(e, cid, "behavior")
    if s is None:
        return "<h4>Behaviour suite</h4><p>not run in this cell.</p>"
    result = result_of(s)
    status = "" if s.get("status") == "ok" else (
        f'<p>step status <b class="bad">{esc(s.get("status"))}</b>: {esc(s.get("reason"))}</p>')
    out = [f"<h4>Behaviour suite ({esc((v.get('behavior') or {}).get('label') or '-')})</h4>", status]
    if result.get("guard_found") is not None:
        out.append(f"<p>guard hook found: {esc(yes_no(result.get('guard_found')))}"
                   + (f" (<code>{esc(result.get('guard_module'))}</code>)" if result.get("guard_module") else "")
                   + "</p>")
    by_id = {str(t.get("id")): t for key in ("tests", "extra") for t in result.get(key) or []
             if isinstance(t, dict)}
    for label, group in (("", "behavior"), ("Probes outside the suite", "behavior.extra")):
        # Failing tests get a row each (what, why); passing ones their ids on one line, n/a ones one line per
        # reason: the titles and times of those are in report.json.
        rows, passed, na = [], [], {}
        for ev in (x for x in tests_evidence(result) if x.group == group):
            tid = ev.name.split(": ")[0]
            t = by_id.get(tid, {})
            outcome = str(t.get("outcome"))
            if outcome == "pass":
                passed.append(esc(tid))
            elif outcome == "n/a":
                na.setdefault(str(t.get("reason") or "n/a"), []).append(tid)
            else:
                rows.append(f'<tr{ROW_FAIL if ev.failed else ""} data-test="{esc(tid)}"><td class="mono">{esc(tid)}'
                            f'</td><td class="{OUTCOME_CLASSES.get(outcome, "o-fail")}">{esc(outcome)}</td>'
                            f'<td>{esc(t.get("title"))}</td>'
                            f'<td>{esc(short(str(t.get("reason") or ""), STEP_CHARS))}</td></tr>')
        if not rows and not passed and not na:
            continue
        if label:
            out.append(f"<h4>{esc(label)}</h4>")
        if rows:
            out.append(table(["test", "outcome", "what", "reason"], rows))
        if passed:
            out.append(f'<p class="passed">{len(passed)} pass: {", ".join(passed)}</p>')
        out += [f'<p class="passed" data-na="{esc(" ".join(ids))}">{len(ids)} '
                f'{esc(why if why.startswith("n/a") else "n/a: " + why)}: {esc(", ".join(ids))}</p>'
                for why, ids in na.items()]
    return "".join(out)

def _training(e: dict[str, Any], cid: str) -> str:
    t = train_table(e, cid)
    if not t.runs:
        return ""
    out = ["<h4>Training run, per step</h4>"]
    if t.na:  # the runs' outcomes still; their per-step rows need the check's renderer
        return "".join(out) + "".join(f'<div class="run" data-run="{esc(run.get("name"))}"><p>{esc(run_title(run))}'
                                      "</p></div>" for run, _ in t.runs) + f"<p>{esc(t.na)}</p>"
    r = result_of(step_of(e, cid, "train"))
    if r.get("trainer") or r.get("route"):
        out.append(f'<p>trainer <code>{esc(r.get("trainer") or "-")}</code> · route {esc(r.get("route") or "-")}'
                   "</p>")
    for run, rows in t.runs:
        if run.get("outcome") == "clean":  # the training line above says what its masked steps logged
            out.append(f'<div class="run" data-run="{esc(run.get("name"))}"><p>{esc(run_title(run))}</p></div>')
            continue
        shown, note = _train_rows(rows)
        kernels = {row[-1] for row in rows}
        one = len(kernels) == 1  # the same kernels every step: said once, not in a column
        body = [f"<tr{ROW_FAIL if bad else ''}>" + "".join(f"<td>{esc(x)}</td>" for x in row[:-1])
                + ("" if one else f'<td class="mono">{esc(row[-1])}</td>') + "</tr>" for row, bad in shown]
        said = [x for x in (note, f"kernels every step: {next(iter(kernels))}" if one else "") if x]
        out.append(f'<div class="run" data-run="{esc(run.get("name"))}"><p>{esc(run_title(run))}'
                   + (f' <span class="meta">({esc("; ".join(said))})</span>' if said else "") + "</p>"
                   + table(t.headers[:-1] if one else t.headers, body, "t num") + "</div>")
    return "".join(out)

def _builds(e: dict[str, Any]) -> str:
    rows = []
    for role in ("unsloth", "zoo"):
        b = (e.get("builds") or {}).get(role) or {}
        rows.append(f"<tr><td>{role}</td><td>{esc(b.get('name'))}</td><td>{esc(b.get('describe'))}</td>"
                    f"<td>{esc(b.get('installed_version') or '-')}</td>"
                    f'<td class="mono">{esc(short_digest(b.get("digest")))}</td></tr>')
    t = e.get("torch") or {}
    o = e.get("options") or {}
    p = e.get("probes") or {}
    adm = e.get("admissible") or {}
    adm_value = {True: "yes", False: "no: installed with overrides", None: "unknown"}.get(adm.get("value"), "-")
    adm_html = f"{esc(adm_value)} <span class=\"meta\">[{esc(adm.get('method'))}]</span>" if adm else "not checked"
    if adm.get("message") and adm.get("value") is not True:
        adm_html += f"<pre>{esc(adm.get('message'))}</pre>"
    env = f"torch {esc(t.get('version') or '-')}" + (f" ({esc(t.get('local'))})" if t.get("local") else "")
    for key in ("python", "device", "compile", "cpu_mode"):
        env += f" · {key.replace('_', ' ')} {esc(p.get(key) or o.get(key))}"
    return ("<h3>Builds</h3>"
            + table(["role", "build", "source", "installed", "sha256 (first 12; whole in report.json)"], rows)
            + f'<dl class="kv"><dt>environment</dt><dd>{env}</dd>'
            f"<dt>plain install admits the pair</dt><dd>{adm_html}</dd></dl>")

def _installed(e: dict[str, Any]) -> str:
    """The versions of the distributions a reader looks for first, on one line; every distribution with its
    digests is in report.json (the two builds' digests are in the table above)."""
    dists = [d for d in e.get("installed") or [] if isinstance(d, dict)]
    if not dists:
        return "<p>Installed distributions: none recorded.</p>"
    rank = {n: i for i, n in enumerate(KEY_DISTRIBUTIONS)}
    key = sorted((d for d in dists if str(d.get("name")).lower() in rank),
                 key=lambda d: rank[str(d.get("name")).lower()])
    line = " · ".join(f"{esc(d.get('name'))} {esc(d.get('version'))}" for d in key)
    return (f'<p class="installed">Installed ({len(key)} key of {len(dists)}; all, with digests, in report.json): '
            f"{line or '-'}</p>")


PROBE_STEP = "probe:"  # a cell step that times one probe step: its check's steps table shows it


def _timings(e: dict[str, Any]) -> str:
    """The cell's own steps with their times, on one line (each probe step's time is in its check's table)."""
    steps = " · ".join(f"{esc(s.get('name'))} {esc(fmt_seconds(s.get('seconds')))}"
                       + ("" if s.get("ok") else ' <b class="bad">not ok</b>')
                       for s in e.get("steps") or [] if isinstance(s, dict)
                       and not str(s.get("name")).startswith(PROBE_STEP))
    return f'<p class="timings">Timings: {steps or "-"} · total {esc(fmt_seconds(e.get("seconds")))}</p>'

def _error(e: dict[str, Any]) -> str:
    err = e.get("error")
    if not isinstance(err, dict):
        return ""
    out = [f'<h3 class="bad">Error ({esc(err.get("kind"))})</h3><pre>{esc(err.get("message"))}</pre>']
    if err.get("log_tail"):
        out.append(f'<h3>Cell log tail</h3><pre class="log">{esc(tail(str(err["log_tail"])))}</pre>')
    return "".join(out)

def _logs(e: dict[str, Any], cid: str) -> str:
    """The log tails the steps kept (cut to their last characters); every step's full result is in report.json."""
    out = []
    for s in steps_of(e, cid):
        if s.get("log_tail"):
            out.append(f'<details class="sub"><summary>log tail of step {esc(s.get("name"))} '
                       f'({esc(s.get("status"))})</summary><pre class="log">{esc(tail(str(s["log_tail"])))}</pre>'
                       "</details>")
    return "".join(out)
