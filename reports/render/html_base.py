"""The pieces every part of ``report.html`` shares: the inline CSS and script, escaping and small HTML helpers.

Every string from a report goes through :func:`esc`: cell results carry text
from untrusted builds (log tails, reasons, uv messages).
"""

from __future__ import annotations

import html
import urllib.parse
from typing import Any

from reports.advice import advice, fixed_since

LOG_TAIL_CHARS = 12_000
RESULT_JSON_CHARS = 6_000
# The distributions a reader looks for first; the full list is one click further.
KEY_DISTRIBUTIONS = ("unsloth", "unsloth_zoo", "unsloth-zoo", "torch", "transformers", "trl", "peft",
                     "accelerate", "triton", "bitsandbytes", "xformers")
GUARD_STATE_CLASSES = ("activates", "no-ops", "missing", "not-needed", "broken", "error")
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
.gcell a:hover,.gcell a:focus{outline:3px solid #0969da;outline-offset:-3px}
.gcell.empty{color:var(--mute);text-align:center;padding:8px}
.g-activates{background:#dafbe1;color:#0f5323}.g-no-ops{background:#dafbe1;color:#0f5323}
.g-not-needed{background:#eef6ef;color:#0f5323}
.g-missing{background:var(--fail);color:#fff}.g-broken{background:var(--broken);color:#fff}
.g-error{background:var(--err);color:#fff}.g-warn{background:#fff8c5;color:#4d2d00}
.failing li.warn{color:#6b4400}.g-unknown{background:#eaeef2;color:var(--fg)}
.legend{font-size:12px;max-width:640px}.legend table td{padding:2px 6px;vertical-align:top;border:0}
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
.t.num td{text-align:right}.t.mono td{font-family:ui-monospace,monospace;font-size:12px}
.t td.num,.t td.mono,.legend td:nth-child(-n+2){white-space:nowrap}.t td.num{text-align:right}
.o-pass{color:var(--pass);font-weight:600}.o-fail{color:var(--fail);font-weight:700}.o-na{color:var(--mute)}
tr.row-fail td{background:#ffebe9}
.bad{color:var(--fail);font-weight:600}
pre{background:var(--soft);border:1px solid var(--line);padding:8px;overflow:auto;max-height:320px;
white-space:pre-wrap;word-break:break-word}
details.sub{margin:6px 0}details.sub>summary{cursor:pointer;color:#0969da}
.gcell a{display:block;padding:4px 8px;color:inherit;text-decoration:none;white-space:normal}
.grid{max-width:100%}
td.gcell.fail{box-shadow:inset 0 0 0 3px #82071e}
.counts{margin:2px 0;padding-left:20px}.advice{margin:4px 0 2px}.symptom{color:var(--fail)}
section.check{border-left:4px solid var(--pass);padding:2px 0 6px 12px;margin:10px 0}
section.check.fail{border-left-color:var(--fail)}
h4{font-size:13px;margin:10px 0 4px}
.sqrow{display:inline-block;white-space:nowrap;margin-right:4px}
.gcell small.sql{display:inline;color:var(--mute);font-size:12px}
.sq{display:inline-block;width:26px;height:26px;margin:3px;border-radius:4px;text-align:center;
font:700 15px/26px system-ui,sans-serif;vertical-align:middle;border:1px solid rgba(0,0,0,.25)}
.states{list-style:none;padding:0;margin:4px 0;columns:2}.states li{margin:2px 0;break-inside:avoid}
details.lcheck{margin:4px 0}details.lcheck>summary{cursor:pointer}
ul.failing{list-style:none;padding-left:0}ul.failing li>details>summary{cursor:pointer;padding:2px 0}
ul.failing li>details{border-left:4px solid var(--fail);padding-left:8px;margin:3px 0}
ul.failing li.warn>details{border-left-color:#d4a72c}
.passed{margin:4px 0;color:var(--mute)}.timings{color:var(--mute)}
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
  // For the layout tests: where the first screen's parts sit before any fragment scrolls the page (top and
  // bottom in CSS pixels), and how wide the page is laid out (no horizontal scroll when <= the window).
  var parts = ["verdict", "grid", "legend", "failing", "cells"];
  for (var k = 0; k < parts.length; k++) {
    var box = document.getElementById(parts[k]);
    if (!box) { continue; }
    var r = box.getBoundingClientRect();
    document.body.setAttribute("data-box-" + parts[k], Math.round(r.top) + " " + Math.round(r.bottom));
  }
  document.body.setAttribute("data-scroll-width", String(document.documentElement.scrollWidth));
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
})();
"""


def esc(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def guard_class(state: Any) -> str:
    return f"g-{state}" if state in GUARD_STATE_CLASSES else "g-unknown"


def anchor(cell_id: str) -> str:
    return "#cell-" + urllib.parse.quote(cell_id, safe="")


def yes_no(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, "unknown")


def tail(text: str) -> str:
    if len(text) <= LOG_TAIL_CHARS:
        return text
    return f"[… {len(text) - LOG_TAIL_CHARS} earlier characters in report.json …]\n" + text[-LOG_TAIL_CHARS:]


def table(headers: list[str], rows: list[str], cls: str = "t") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + " […]"


def advice_html(report: dict[str, Any], entry: dict[str, Any], check: dict[str, Any]) -> str:
    a = advice(entry, check, fixed=fixed_since(report, check["id"]))
    return '<dl class="kv advice">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in a.lines()) + "</dl>"
