"""The drill-down of one cell in ``report.html``: one section per check, then builds, installs and timings.

Per check: its verdict with the reason of each detector, the training
outcome and the user-visible symptom, the plain words of ``reports.advice``
when it fails the gate, what the check's own renderer makes of its steps
(``reports.render.details``), one row per step, the behaviour tests and
extras, the training run's per-step table and the log tails. Every string is
escaped (``esc``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from probes.checks import DetailTable
from reports.render.base import fmt_seconds, short_digest
from reports.render.details import check_details, train_table
from reports.render.html_base import (
    KEY_DISTRIBUTIONS,
    OUTCOME_CLASSES,
    RESULT_JSON_CHARS,
    advice_html,
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
        f'<span class="chip {guard_class(state_of(verdict_of(e, c["id"]), "guard"))}">'
        f'{esc(labels[c["id"]])} {esc(state_of(verdict_of(e, c["id"]), "guard"))}</span>' for c in checks)
    summary = (f"<code>{esc(cid)}</code> — {chips}"
               + (' · <b class="bad">fails the gate</b>' if fail else " · passes"))
    body = [_error(e), *(_check(report, e, c) for c in checks), _builds(e), _installed(e),
            _timings(e, checks)]
    return (f'<details class="cell {"fail" if fail else "pass"}{" g-error" if e.get("error") else ""}" '
            f'id="cell-{esc(cid)}" data-cell="{esc(cid)}"{" open" if fail else ""}>'
            f'<summary>{summary}</summary><div class="body">{"".join(b for b in body if b)}</div></details>')

def _check(report: dict[str, Any], e: dict[str, Any], check: dict[str, Any]) -> str:
    cid = check["id"]
    v = verdict_of(e, cid)
    guard = state_of(v, "guard")
    sec = section_of(e, cid)
    static = sec.get("static") if isinstance(sec.get("static"), dict) else {}
    where = ""
    if static.get("file"):
        where = f' <span class="mono">({esc(static.get("file"))}:{esc(static.get("evidence_line"))})</span>'
    rt = step_of(e, cid, "runtime") or {}
    rt_reason = result_of(rt).get("reason") or rt.get("reason") or "not run"
    t = training_of(e, cid)
    items = [
        ("guard", f"<b>{esc(guard)}</b>: {esc(v.get('guard_reason'))}"),
        ("zoo", f"<b>{esc(state_of(v, 'zoo'))}</b>: {esc(v.get('zoo_reason'))}"),
        ("static detector", f"<b>{esc(v.get('static') or static.get('verdict') or '-')}</b>: "
                            f"{esc(static.get('reason') or 'not run')}{where}"),
        ("runtime detector", f"<b>{esc(v.get('runtime') or '-')}</b>: {esc(rt_reason)}"),
        ("training", f"<b>{esc(training_label(t))}</b>" + (f": {esc(t.get('reason'))}" if t.get("reason") else "")),
    ]
    if v.get("symptom"):
        items.append(("symptom", f'<span class="bad">{esc(v["symptom"])}</span>'))
    note = residual_note(e, cid)
    if note:
        items.append(("gate", f"{esc(note)}: {esc(residual_names(e, cid))}"))
    details = check_details(e, cid)
    items += [(label, with_code(text)) for label, text in details.items]
    details_html = "".join(_detail_table(t) for t in details.tables)
    kv = "".join(f"<dt>{esc(k)}</dt><dd>{val}</dd>" for k, val in items)
    plain = ""
    if v.get("gate_fail"):
        plain = "<h4>In plain words</h4>" + advice_html(report, e, check)
    return (f'<section class="check {"fail" if v.get("gate_fail") else "pass"}" data-check="{esc(cid)}" '
            f'data-guard="{esc(guard)}">'
            f'<h3><code>{esc(cid)}</code>: zoo {esc(state_of(v, "zoo"))} · guard '
            f'<span class="chip {guard_class(guard)}">{esc(guard)}</span>'
            + (' · <b class="bad">fails the gate</b>' if v.get("gate_fail") else "")
            + f'</h3><dl class="kv">{kv}</dl>{plain}{details_html}{_steps(e, cid)}'
            f"{_behaviour(e, cid, v)}{_training(e, cid)}{_logs(e, cid)}</section>")

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


def _steps(e: dict[str, Any], cid: str) -> str:
    rows = []
    for ev in evidence_of(e, cid):
        if ev.group != "step":
            continue
        cls = {"pass": "o-pass", "failure": "o-fail", "error": "o-fail", "skipped": "o-na"}[ev.outcome]
        rows.append(f'<tr class="{"row-fail" if ev.failed else ""}" data-step="{esc(ev.name)}">'
                    f'<td class="mono">{esc(ev.name)}</td><td class="{cls}">{esc(ev.outcome)}</td>'
                    f'<td class="num">{esc(fmt_seconds(ev.seconds))}</td>'
                    f"<td>{esc(short(ev.message or ev.out))}</td></tr>")
    return "<h4>Steps</h4>" + table(["step", "outcome", "time", "what it says"], rows) if rows else ""

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
        rows = []
        for ev in (x for x in tests_evidence(result) if x.group == group):
            tid = ev.name.split(": ")[0]
            t = by_id.get(tid, {})
            outcome = str(t.get("outcome"))
            dur = t.get("duration_s")
            rows.append(
                f'<tr class="{"row-fail" if ev.failed else ""}" data-test="{esc(tid)}">'
                f'<td class="mono">{esc(tid)}</td><td class="{OUTCOME_CLASSES.get(outcome, "o-fail")}">'
                f'{esc(outcome)}</td><td>{esc(t.get("title"))}</td><td>{esc(t.get("reason"))}</td>'
                f'<td class="num">{esc(f"{dur:.3f} s" if isinstance(dur, (int, float)) else "-")}</td></tr>')
        if not rows:
            continue
        if label:
            out.append(f"<h4>{esc(label)}</h4>")
        out.append(table(["test", "outcome", "what", "reason", "time"], rows))
    return "".join(out)

def _training(e: dict[str, Any], cid: str) -> str:
    t = train_table(e, cid)
    if not t.runs:
        return ""
    out = ["<h4>Training run, per step</h4>"]
    if t.na:
        return "".join(out) + f"<p>{esc(t.na)}</p>"
    r = result_of(step_of(e, cid, "train"))
    if r.get("trainer") or r.get("route"):
        out.append(f'<p>trainer <code>{esc(r.get("trainer") or "-")}</code> · route {esc(r.get("route") or "-")}'
                   "</p>")
    for run, rows in t.runs:
        body = []
        for row in rows:
            bad = any("nan" in x or "inf" in x for x in row[3:6]) or row[6] not in ("0", "-")
            body.append(f'<tr class="{"row-fail" if bad else ""}">'
                        + "".join(f'<td class="num">{esc(x)}</td>' for x in row[:-1])
                        + f'<td class="mono">{esc(row[-1])}</td></tr>')
        out.append(f'<div class="run" data-run="{esc(run.get("name"))}"><p>{esc(run_title(run))}</p>'
                   + table(t.headers, body) + "</div>")
    return "".join(out)

def _builds(e: dict[str, Any]) -> str:
    rows = []
    for role in ("unsloth", "zoo"):
        b = (e.get("builds") or {}).get(role) or {}
        rows.append(f"<tr><td>{role}</td><td>{esc(b.get('name'))}</td><td>{esc(b.get('describe'))}</td>"
                    f"<td>{esc(b.get('installed_version') or '-')}</td>"
                    f'<td class="mono" title="{esc(b.get("digest"))}">{esc(b.get("digest") or "-")}</td></tr>')
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
            + table(["role", "build", "source", "installed", "digest (sha256)"], rows)
            + f'<dl class="kv"><dt>environment</dt><dd>{env}</dd>'
            f"<dt>plain install admits the pair</dt><dd>{adm_html}</dd></dl>")

def _installed(e: dict[str, Any]) -> str:
    dists = [d for d in e.get("installed") or [] if isinstance(d, dict)]
    if not dists:
        return "<h3>Installed distributions</h3><p>none recorded.</p>"

    def row(d: dict[str, Any], full: bool) -> str:
        tree, wheel = d.get("tree_sha256"), d.get("wheel_sha256")
        fmt = (lambda x: x or "-") if full else short_digest
        return (f"<tr><td>{esc(d.get('name'))}</td><td>{esc(d.get('version'))}</td>"
                f'<td class="mono" title="{esc(tree)}">{esc(fmt(tree))}</td>'
                f'<td class="mono" title="{esc(wheel)}">{esc(fmt(wheel))}</td></tr>')

    heads = ["distribution", "version", "tree sha256", "wheel sha256"]
    rank = {n: i for i, n in enumerate(KEY_DISTRIBUTIONS)}
    key = sorted((d for d in dists if str(d.get("name")).lower() in rank),
                 key=lambda d: rank[str(d.get("name")).lower()])
    return (f"<h3>Installed distributions (key {len(key)} of {len(dists)})</h3>"
            + table(heads, [row(d, False) for d in key])
            + f'<details class="sub"><summary>all {len(dists)} installed distributions, full digests</summary>'
            + table(heads, [row(d, True) for d in dists]) + "</details>")

def _timings(e: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    rows = [f"<tr><td>{esc(s.get('name'))}</td><td class=\"num\">{esc(fmt_seconds(s.get('seconds')))}</td>"
            f"<td class=\"{'' if s.get('ok') else 'bad'}\">{esc('ok' if s.get('ok') else 'not ok')}</td></tr>"
            for s in e.get("steps") or [] if isinstance(s, dict)]
    probe_rows = []
    for c in checks:
        for s in steps_of(e, c["id"]):
            ok = s.get("status") == "ok"
            probe_rows.append(f"<tr><td><code>{esc(c['id'])}</code></td><td>{esc(s.get('name'))}</td>"
                              f"<td class=\"{'' if ok else 'bad'}\">{esc(s.get('status'))}</td>"
                              f"<td class=\"num\">{esc(fmt_seconds(s.get('seconds')))}</td>"
                              f"<td>{esc(s.get('process'))}</td><td>{esc(s.get('returncode'))}</td>"
                              f"<td>{esc(s.get('reason') or '')}</td></tr>")
    out = [f"<h3>Timings (total {esc(fmt_seconds(e.get('seconds')))})</h3>",
           '<div class="layout">', table(["step", "time", "ok"], rows)]
    if probe_rows:
        out.append(table(["check", "probe step", "status", "time", "process", "exit", "reason"], probe_rows))
    out.append("</div>")
    return "".join(out)

def _error(e: dict[str, Any]) -> str:
    err = e.get("error")
    if not isinstance(err, dict):
        return ""
    out = [f'<h3 class="bad">Error ({esc(err.get("kind"))})</h3><pre>{esc(err.get("message"))}</pre>']
    if err.get("log_tail"):
        out.append(f'<h3>Cell log tail</h3><pre class="log">{esc(tail(str(err["log_tail"])))}</pre>')
    return "".join(out)

def _logs(e: dict[str, Any], cid: str) -> str:
    out = []
    for s in steps_of(e, cid):
        if s.get("log_tail"):
            out.append(f'<details class="sub"><summary>log tail of step {esc(s.get("name"))} '
                       f'({esc(s.get("status"))})</summary><pre class="log">{esc(tail(str(s["log_tail"])))}</pre>'
                       "</details>")
        r = result_of(s)
        if r and s.get("name") not in ("behavior", "train"):
            text = json.dumps(r, indent=1, sort_keys=True, default=str)
            if len(text) > RESULT_JSON_CHARS:
                text = text[:RESULT_JSON_CHARS] + "\n[… the rest in report.json …]"
            out.append(f'<details class="sub"><summary>result of step {esc(s.get("name"))}</summary>'
                       f"<pre>{esc(text)}</pre></details>")
    return "".join(out)
