"""``report.html``: one self-contained page (inline CSS and JS, nothing fetched).

Top of the page: the gate verdict, the guard-state counts and the failing
cells, then the grid (rows: unsloth builds, columns: zoo builds) coloured by
guard state, and a legend. Below, one ``<details>`` per cell with its
evidence: zoo state by each detector, the guard probe's routes, the behaviour
tests, builds, admissibility, installed distributions with digests, timings
and log tails. Failing cells are open from the start, so the page works
without JavaScript; the small inline script only opens the cell named by the
URL fragment (``#cell-<id>`` from a grid link, or ``#open=<id>``).

Every string from the report is escaped: cell results carry text from
untrusted builds (log tails, reasons, uv messages). A Content-Security-Policy
allows no network and only the one inline script, by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import html
import urllib.parse
from typing import Any, ClassVar

from reports.classify import GUARD_MEANING, ZOO_MEANING, GuardState, ZooState
from reports.model import cell_at
from reports.render.base import Renderer, fmt_seconds, short_digest

LOG_TAIL_CHARS = 12_000
# The distributions a reader looks for first; the full list is one click further.
KEY_DISTRIBUTIONS = ("unsloth", "unsloth_zoo", "unsloth-zoo", "torch", "transformers", "trl", "peft",
                     "accelerate", "triton", "bitsandbytes", "xformers")
GUARD_CLASSES = {s.value: f"g-{s.value}" for s in GuardState}
OUTCOME_CLASSES = {"pass": "o-pass", "fail": "o-fail", "n/a": "o-na"}

CSS = """
:root{--fg:#1f2328;--mute:#59636e;--line:#d1d9e0;--bg:#fff;--soft:#f6f8fa;
--pass:#1a7f37;--fail:#cf222e;--broken:#bc4c00;--err:#8250df}
*{box-sizing:border-box}
body{margin:0;padding:12px 20px 40px;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
h1{font-size:18px;margin:0}h2{font-size:16px;margin:18px 0 8px}h3{font-size:14px;margin:14px 0 6px}
a{color:#0969da}
.top{display:flex;align-items:center;gap:16px;flex-wrap:wrap}
.verdict{font-weight:700;font-size:18px;padding:6px 14px;border-radius:6px;color:#fff;letter-spacing:.5px}
.v-fail{background:var(--fail)}.v-pass{background:var(--pass)}
.meta{color:var(--mute);margin:2px 0 0}
.summary{margin:10px 0 4px}
.chip{display:inline-block;padding:1px 8px;border-radius:10px;margin:0 2px;font-weight:600;font-size:13px}
.failing{margin:4px 0 10px;padding-left:20px}.failing li{margin:2px 0}
.layout{display:flex;gap:24px;align-items:flex-start;flex-wrap:wrap}
table{border-collapse:collapse}
.grid th,.grid td{border:1px solid var(--line);padding:0}
.grid thead th,.grid tbody th{background:var(--soft);padding:6px 10px;text-align:left;font-weight:600}
.grid th small,.gcell small{display:block;font-weight:400;color:var(--mute);font-size:12px}
.grid .corner{color:var(--mute);font-weight:400;font-size:12px}
.gcell a{display:block;padding:8px 12px;min-width:170px;color:inherit;text-decoration:none}
.gcell a:hover,.gcell a:focus{outline:3px solid #0969da;outline-offset:-3px}
.gcell .gs{display:block;font-weight:700;font-size:15px}
.gcell .zs,.gcell .beh{display:block;font-size:12px}
.gcell.fail .zs,.gcell.fail .beh,.gcell.fail small{color:#fff}
.gcell.empty{color:var(--mute);text-align:center;padding:8px}
.g-activates{background:#dafbe1;color:#0f5323}.g-no-ops{background:#dafbe1;color:#0f5323}
.g-not-needed{background:#eef6ef;color:#0f5323}
.g-missing{background:var(--fail);color:#fff}.g-broken{background:var(--broken);color:#fff}
.g-error{background:var(--err);color:#fff}.g-unknown{background:#eaeef2;color:var(--fg)}
td.fail{box-shadow:inset 0 0 0 3px #82071e}
.legend{font-size:12px;max-width:560px}.legend table td{padding:2px 6px;vertical-align:top;border:0}
.legend p{margin:4px 0}
details.cell{border:1px solid var(--line);border-left:8px solid var(--line);border-radius:6px;margin:8px 0}
details.cell.fail{border-left-color:var(--fail)}details.cell.g-error{border-left-color:var(--err)}
details.cell.g-broken{border-left-color:var(--broken)}
details.cell.pass{border-left-color:var(--pass)}
details.cell,details.cell.fail,details.cell.pass{background:var(--bg);color:var(--fg)}
details.cell>summary{cursor:pointer;padding:8px 12px;font-weight:600;background:var(--soft)}
details.cell>summary .chip{font-size:12px}
details.cell:target,details.cell.focus{outline:3px solid #0969da}
.body{padding:4px 16px 12px}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
.kv dt{color:var(--mute)}.kv dd{margin:0}
.t{font-size:13px;margin:4px 0}.t th,.t td{border:1px solid var(--line);padding:3px 8px;text-align:left;
vertical-align:top}.t th{background:var(--soft)}
.t td.num,.t td.mono,.legend td:nth-child(-n+2){white-space:nowrap}.t td.num{text-align:right}
.o-pass{color:var(--pass);font-weight:600}.o-fail{color:var(--fail);font-weight:700}.o-na{color:var(--mute)}
tr.row-fail td{background:#ffebe9}
.bad{color:var(--fail);font-weight:600}
pre{background:var(--soft);border:1px solid var(--line);padding:8px;overflow:auto;max-height:320px;
white-space:pre-wrap;word-break:break-word}
details.sub{margin:6px 0}details.sub>summary{cursor:pointer;color:#0969da}
"""

# Opens the cell named by the fragment: "#cell-<id>" (the grid's links) or "#open=<id>".
SCRIPT = """
(function () {
  function openFromHash() {
    var h = decodeURIComponent(location.hash.slice(1));
    var id = h.indexOf("open=") === 0 ? "cell-" + h.slice(5) : h;
    var el = id ? document.getElementById(id) : null;
    if (!el || el.tagName !== "DETAILS") { return; }
    el.open = true;
    var old = document.querySelectorAll("details.cell.focus");
    for (var i = 0; i < old.length; i++) { old[i].classList.remove("focus"); }
    el.classList.add("focus");
    document.body.setAttribute("data-opened", id.slice(5));
    el.scrollIntoView();
  }
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();
"""


def _e(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def _guard_class(state: Any) -> str:
    return GUARD_CLASSES.get(str(state), "g-unknown")


def _anchor(cell_id: str) -> str:
    return "#cell-" + urllib.parse.quote(cell_id, safe="")


def _yes_no(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, "unknown")


def _tail(text: str) -> str:
    if len(text) <= LOG_TAIL_CHARS:
        return text
    return f"[… {len(text) - LOG_TAIL_CHARS} earlier characters in report.json …]\n" + text[-LOG_TAIL_CHARS:]


def _table(headers: list[str], rows: list[str], cls: str = "t") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _probe_step(cell: dict[str, Any], name: str) -> dict[str, Any] | None:
    probes = cell.get("probes") or {}
    return next((s for s in probes.get("steps") or [] if s.get("name") == name), None)


class HtmlRenderer(Renderer):
    filename: ClassVar[str | None] = "report.html"

    def render(self, report: dict[str, Any]) -> str:
        """See Renderer.render."""
        cells = report.get("cells", [])
        failed = report["gate"]["failed_cells"]
        verdict = "GATE FAIL" if failed else "GATE PASS"
        title = f"skewmatrix: {verdict.lower()} ({len(failed)}/{len(cells)} failing) {report.get('matrix', '')}"
        script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
        csp = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; "
               "img-src data:; base-uri 'none'; form-action 'none'")
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">',
            '<meta name="viewport" content="width=device-width,initial-scale=1">',
            f"<title>{_e(title)}</title><style>{CSS}</style></head>",
            f'<body data-gate="{"fail" if failed else "pass"}">',
            self._header(report),
            '<div class="layout">',
            self._grid(report),
            self._legend(report),
            "</div>",
            self._scan(report),
            f'<h2 id="cells">Cells ({len(cells)})</h2>',
            *(self._details(e) for e in cells),
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
        return "\n".join(parts) + "\n"

    def _scan(self, report: dict[str, Any]) -> str:
        """The static scan (when one sat in the output directory) against each cell's dynamic verdict."""
        scan = report.get("scan")
        if not scan:
            return ""
        rows = []
        for c in scan.get("comparisons", []):
            bad = c.get("status") == "inconsistent"
            rows.append(f'<tr class="{"row-fail" if bad else ""}"><td><code>{_e(c.get("cell_id"))}</code></td>'
                        f'<td>{_e(c.get("zoo_version"))}</td><td>{_e(c.get("scan"))}</td>'
                        f'<td>{_e(c.get("dynamic"))}</td><td>{"<b>" if bad else ""}{_e(c.get("status"))}'
                        f'{"</b>" if bad else ""}</td><td>{_e(c.get("reason"))}</td></tr>')
        return (f'<section id="scan"><h2>Static scan vs cells</h2><p>First fixed zoo release per the scan: '
                f'<b>{_e(scan.get("first_fixed") or "none found")}</b>.</p>'
                + _table(["cell", "zoo", "scan", "cell", "status", "reason"], rows) + "</section>")

    def _header(self, report: dict[str, Any]) -> str:
        cells = report.get("cells", [])
        failed = report["gate"]["failed_cells"]
        verdict = (f'<div class="verdict v-fail" id="verdict">GATE FAIL: {len(failed)} of {len(cells)} cell(s)</div>'
                   if failed else f'<div class="verdict v-pass" id="verdict">GATE PASS: {len(cells)} cell(s)</div>')
        chips = " ".join(f'<span class="chip {_guard_class(k)}">{_e(k)} {_e(v)}</span>'
                         for k, v in report.get("summary", {}).items() if v)
        out = [
            '<header class="top">', verdict,
            f'<div><h1>skewmatrix report</h1><p class="meta">matrix <code>{_e(report.get("matrix"))}</code> · '
            f'{len(cells)} cell(s) · generated {_e(report.get("generated"))}</p></div>',
            "</header>",
            f'<p class="summary" id="summary">Guard states: {chips or "none"}. '
            f'Failing states: {_e(", ".join(report["gate"]["failing_states"]))}.</p>',
        ]
        by_id = {e.get("cell_id"): e for e in cells}
        if failed:
            items = []
            for cid in failed:
                c = (by_id.get(cid) or {}).get("classification") or {}
                items.append(f'<li><a href="{_e(_anchor(cid))}"><code>{_e(cid)}</code></a> '
                             f'<span class="chip {_guard_class(c.get("guard"))}">{_e(c.get("guard"))}</span> '
                             f'{_e(c.get("guard_reason"))}</li>')
            out.append(f'<ul class="failing" id="failing">{"".join(items)}</ul>')
        return "\n".join(out)

    def _grid(self, report: dict[str, Any]) -> str:
        cells = report.get("cells", [])
        zoos, rows = report["grid"]["zoo"], report["grid"]["unsloth"]
        zdesc = {e["builds"]["zoo"]["name"]: e["builds"]["zoo"].get("describe", "") for e in cells}
        udesc = {e["builds"]["unsloth"]["name"]: e["builds"]["unsloth"].get("describe", "") for e in cells}
        head = "".join(f'<th scope="col">{_e(z)}<small>{_e(zdesc.get(z))}</small></th>' for z in zoos)
        body = []
        for u in rows:
            tds = []
            for z in zoos:
                e = cell_at(report, u, z)
                if e is None:
                    tds.append('<td class="gcell empty" title="not in the matrix">—</td>')
                    continue
                c = e.get("classification") or {}
                fail = bool(e.get("gate_fail"))
                mark = "✗" if fail else "✓"
                beh = (c.get("behavior") or {}).get("label")
                beh_html = f'<span class="beh">behaviour {_e(beh)}</span>' if beh else ""
                tip = f"{c.get('guard')}: {c.get('guard_reason')}"
                tds.append(
                    f'<td class="gcell {_guard_class(c.get("guard"))} {"fail" if fail else "pass"}" '
                    f'data-cell="{_e(e.get("cell_id"))}" data-guard="{_e(c.get("guard"))}">'
                    f'<a href="{_e(_anchor(str(e.get("cell_id"))))}" title="{_e(tip)}">'
                    f'<span class="gs">{mark} {_e(c.get("guard"))}</span>'
                    f'<span class="zs">zoo {_e(c.get("zoo"))}</span>{beh_html}</a></td>')
            body.append(f'<tr><th scope="row">{_e(u)}<small>{_e(udesc.get(u))}</small></th>{"".join(tds)}</tr>')
        return (f'<table class="grid" id="grid"><thead><tr><th class="corner">unsloth ↓ · zoo →</th>{head}</tr>'
                f'</thead><tbody>{"".join(body)}</tbody></table>')

    def _legend(self, report: dict[str, Any]) -> str:
        failing = set(report["gate"]["failing_states"])
        rows = []
        for s in GuardState:
            gate = '<b class="bad">fails gate</b>' if s.value in failing else "passes"
            rows.append(f'<tr><td><span class="chip {_guard_class(s.value)}">{_e(s.value)}</span></td>'
                        f"<td>{gate}</td><td>{_e(GUARD_MEANING[s])}</td></tr>")
        zoo = "; ".join(f"<b>{_e(s.value)}</b>: {_e(ZOO_MEANING[s])}" for s in ZooState)
        return (f'<div class="legend" id="legend"><table><tbody>{"".join(rows)}</tbody></table>'
                f"<p>Zoo state (static and runtime detectors must agree): {zoo}.</p>"
                "<p>Click a grid cell for its evidence; failing cells are expanded below.</p></div>")

    def _details(self, e: dict[str, Any]) -> str:
        cid = str(e.get("cell_id"))
        c = e.get("classification") or {}
        fail = bool(e.get("gate_fail"))
        beh = (c.get("behavior") or {}).get("label")
        summary = (f'<code>{_e(cid)}</code> — zoo {_e(c.get("zoo"))} · guard '
                   f'<span class="chip {_guard_class(c.get("guard"))}">{_e(c.get("guard"))}</span>'
                   + (f" · behaviour {_e(beh)}" if beh else "")
                   + (' · <b class="bad">fails the gate</b>' if fail else " · passes"))
        body = [
            self._verdict(e), self._error(e), self._behaviour(e), self._builds(e), self._installed(e),
            self._timings(e), self._logs(e),
        ]
        return (f'<details class="cell {_guard_class(c.get("guard"))} {"fail" if fail else "pass"}" '
                f'id="cell-{_e(cid)}" data-cell="{_e(cid)}"{" open" if fail else ""}>'
                f'<summary>{summary}</summary><div class="body">{"".join(b for b in body if b)}</div></details>')

    def _verdict(self, e: dict[str, Any]) -> str:
        c = e.get("classification") or {}
        probes = e.get("probes") or {}
        static = probes.get("static") or {}
        where = ""
        if static.get("file"):
            where = f' <span class="mono">({_e(static.get("file"))}:{_e(static.get("evidence_line"))})</span>'
        rt = _probe_step(e, "runtime") or {}
        rt_reason = (rt.get("result") or {}).get("reason") or rt.get("reason") or "not run"
        if not probes:
            static = {"reason": "not run"}
        items = [
            ("guard", f'<b>{_e(c.get("guard"))}</b>: {_e(c.get("guard_reason"))}'),
            ("zoo", f'<b>{_e(c.get("zoo"))}</b>: {_e(c.get("zoo_reason"))}'),
            ("static detector", f'<b>{_e(c.get("static"))}</b>: {_e(static.get("reason"))}{where}'),
            ("runtime detector", f'<b>{_e(c.get("runtime"))}</b>: {_e(rt_reason)}'),
        ]
        guard = _probe_step(e, "guard")
        routes_html = ""
        if guard and isinstance(guard.get("result"), dict):
            g = guard["result"]
            fwd = g.get("forward") or {}
            original = fwd.get("original")
            replaced = "unknown" if original is None else ("no (zoo's own)" if original else "yes")
            items.append(("guard probe", f"forward replaced after <code>import unsloth</code>: {_e(replaced)}; "
                                         f"all-masked call finite: {_e(_yes_no(g.get('all_masked_finite')))}"))
            rows = []
            for route, raw in (g.get("routes") or {}).items():
                r = raw if isinstance(raw, dict) else {}
                loss_ok = r.get("loss_finite")
                rows.append(f"<tr><td>{_e(route)}</td><td class=\"{'' if loss_ok is not False else 'bad'}\">"
                            f"{_e(r.get('loss'))}</td><td>{_e(_yes_no(r.get('grads_finite')))}</td>"
                            f"<td class=\"mono\">{_e(r.get('grad_fn'))}</td></tr>")
            if rows:
                routes_html = ("<h3>All-masked call after import, by route</h3>"
                               + _table(["route", "loss", "gradients finite", "autograd node"], rows))
        elif guard:
            items.append(("guard probe", f"{_e(guard.get('status'))}: {_e(guard.get('reason'))}"))
        kv = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in items)
        return f'<h3>Verdict</h3><dl class="kv">{kv}</dl>{routes_html}'

    def _behaviour(self, e: dict[str, Any]) -> str:
        step = _probe_step(e, "behavior")
        if step is None:
            return "<h3>Behaviour suite</h3><p>not run in this cell.</p>"
        result = step.get("result") if isinstance(step.get("result"), dict) else {}
        status = "" if step.get("status") == "ok" else (
            f'<p>step status <b class="bad">{_e(step.get("status"))}</b>: {_e(step.get("reason"))}</p>')
        out = [f"<h3>Behaviour suite ({_e((e.get('classification') or {}).get('behavior', {}).get('label'))})</h3>",
               status]
        if result.get("guard_found") is not None:
            out.append(f"<p>guard hook found: {_e(_yes_no(result.get('guard_found')))}"
                       + (f" (<code>{_e(result.get('guard_module'))}</code>)" if result.get("guard_module") else "")
                       + "</p>")
        for label, tests in (("", result.get("tests") or []), ("Probes outside the 13", result.get("extra") or [])):
            if not tests:
                continue
            rows = []
            for t in (x if isinstance(x, dict) else {} for x in tests):
                outcome = str(t.get("outcome"))
                cls = OUTCOME_CLASSES.get(outcome, "o-fail")
                dur = t.get("duration_s")
                rows.append(
                    f'<tr class="{"row-fail" if outcome == "fail" else ""}" data-test="{_e(t.get("id"))}">'
                    f'<td class="mono">{_e(t.get("id"))}</td><td class="{cls}">{_e(outcome)}</td>'
                    f'<td>{_e(t.get("title"))}</td><td>{_e(t.get("reason"))}</td>'
                    f'<td class="num">{_e(f"{dur:.3f} s" if isinstance(dur, (int, float)) else "-")}</td></tr>')
            if label:
                out.append(f"<h3>{_e(label)}</h3>")
            out.append(_table(["test", "outcome", "what", "reason", "time"], rows))
        return "".join(out)

    def _builds(self, e: dict[str, Any]) -> str:
        rows = []
        for role in ("unsloth", "zoo"):
            b = (e.get("builds") or {}).get(role) or {}
            rows.append(f"<tr><td>{role}</td><td>{_e(b.get('name'))}</td><td>{_e(b.get('describe'))}</td>"
                        f"<td>{_e(b.get('installed_version') or '-')}</td>"
                        f'<td class="mono" title="{_e(b.get("digest"))}">{_e(b.get("digest") or "-")}</td></tr>')
        t = e.get("torch") or {}
        o = e.get("options") or {}
        p = e.get("probes") or {}
        adm = e.get("admissible") or {}
        adm_value = {True: "yes", False: "no: installed with overrides", None: "unknown"}.get(adm.get("value"), "-")
        adm_html = f"{_e(adm_value)} <span class=\"meta\">[{_e(adm.get('method'))}]</span>" if adm else "not checked"
        if adm.get("message") and adm.get("value") is not True:
            adm_html += f"<pre>{_e(adm.get('message'))}</pre>"
        env = f"torch {_e(t.get('version') or '-')}" + (f" ({_e(t.get('local'))})" if t.get("local") else "")
        for key in ("python", "device", "compile", "cpu_mode"):
            env += f" · {key.replace('_', ' ')} {_e(p.get(key) or o.get(key))}"
        return ("<h3>Builds</h3>"
                + _table(["role", "build", "source", "installed", "digest (sha256)"], rows)
                + f'<dl class="kv"><dt>environment</dt><dd>{env}</dd>'
                f"<dt>plain install admits the pair</dt><dd>{adm_html}</dd></dl>")

    def _installed(self, e: dict[str, Any]) -> str:
        dists = [d for d in e.get("installed") or [] if isinstance(d, dict)]
        if not dists:
            return "<h3>Installed distributions</h3><p>none recorded.</p>"

        def row(d: dict[str, Any], full: bool) -> str:
            tree, wheel = d.get("tree_sha256"), d.get("wheel_sha256")
            fmt = (lambda x: x or "-") if full else short_digest
            return (f"<tr><td>{_e(d.get('name'))}</td><td>{_e(d.get('version'))}</td>"
                    f'<td class="mono" title="{_e(tree)}">{_e(fmt(tree))}</td>'
                    f'<td class="mono" title="{_e(wheel)}">{_e(fmt(wheel))}</td></tr>')

        heads = ["distribution", "version", "tree sha256", "wheel sha256"]
        rank = {n: i for i, n in enumerate(KEY_DISTRIBUTIONS)}
        key = sorted((d for d in dists if str(d.get("name")).lower() in rank),
                     key=lambda d: rank[str(d.get("name")).lower()])
        return (f"<h3>Installed distributions (key {len(key)} of {len(dists)})</h3>"
                + _table(heads, [row(d, False) for d in key])
                + f'<details class="sub"><summary>all {len(dists)} installed distributions, full digests</summary>'
                + _table(heads, [row(d, True) for d in dists]) + "</details>")

    def _timings(self, e: dict[str, Any]) -> str:
        rows = [f"<tr><td>{_e(s.get('name'))}</td><td class=\"num\">{_e(fmt_seconds(s.get('seconds')))}</td>"
                f"<td class=\"{'' if s.get('ok') else 'bad'}\">{_e('ok' if s.get('ok') else 'not ok')}</td></tr>"
                for s in e.get("steps") or [] if isinstance(s, dict)]
        probe_rows = []
        for s in (e.get("probes") or {}).get("steps") or []:
            ok = s.get("status") == "ok"
            probe_rows.append(f"<tr><td>{_e(s.get('name'))}</td><td class=\"{'' if ok else 'bad'}\">"
                              f"{_e(s.get('status'))}</td><td class=\"num\">{_e(fmt_seconds(s.get('seconds')))}</td>"
                              f"<td>{_e(s.get('returncode'))}</td><td>{_e(s.get('reason') or '')}</td></tr>")
        out = [f"<h3>Timings (total {_e(fmt_seconds(e.get('seconds')))})</h3>",
               '<div class="layout">', _table(["step", "time", "ok"], rows)]
        if probe_rows:
            out.append(_table(["probe", "status", "time", "exit", "reason"], probe_rows))
        out.append("</div>")
        return "".join(out)

    def _error(self, e: dict[str, Any]) -> str:
        err = e.get("error")
        if not isinstance(err, dict):
            return ""
        out = [f'<h3 class="bad">Error ({_e(err.get("kind"))})</h3><pre>{_e(err.get("message"))}</pre>']
        if err.get("log_tail"):
            out.append(f'<h3>Cell log tail</h3><pre class="log">{_e(_tail(str(err["log_tail"])))}</pre>')
        return "".join(out)

    def _logs(self, e: dict[str, Any]) -> str:
        out = []
        for s in (e.get("probes") or {}).get("steps") or []:
            if s.get("log_tail"):
                out.append(f'<details class="sub"><summary>log tail of probe step {_e(s.get("name"))} '
                           f'({_e(s.get("status"))})</summary><pre class="log">{_e(_tail(str(s["log_tail"])))}</pre>'
                           "</details>")
        return "".join(out)
