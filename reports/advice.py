"""Plain words for a failing check in a cell: its reach, who installs the pairing, the fix, the next step.

Pure: from one report entry (a cell with its verdicts) and the report's
dict of one check (``report["checks"][i]``: ``fix_hint`` and friends) to an
:class:`Advice` of four sentences. Every format prints the same four
(terminal, Markdown, HTML, step summary, the JUnit failure message), so a
reader learns the same thing wherever they look (issue 13).

*Reach* is the verdict's: does a real training run on this cell show the
symptom (``exposed``), stay clean (``latent``), or is there no evidence
(``unknown``), with the check's plain words. *Install* comes from the cell's
``admissible`` record: whether a plain ``pip install`` / ``uv pip install``
of the two builds admits the pairing, or only an explicit pin or a lockfile
gets it. *Fix* is the check's own
``fix_hint`` and the release its folder declares (``upstream_fix``: the
first release that carries the fix, or that none does yet and which pull
requests stand open), with the scan's boundary where a scan in the output
directory disagrees. A ``broken`` guard's fix is about the guard: which of
its behaviour tests or its training run fail, and to fix or remove it. The
*next step* is one sentence per guard state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probes.checks.capabilities import UpstreamFix

INSTALL = {
    True: "a plain `pip install` / `uv pip install` admits this pairing",
    False: "only an explicit pin or a lockfile reaches this pairing: a plain install refuses it",
    None: "unknown whether a plain install admits this pairing: the resolver check did not run",
}

NEXT_STEP = {
    "missing": "Move affected environments to a zoo release that carries the fix (or to an unsloth build "
               "with a guard for this kernel), then rerun this cell to confirm.",
    "broken": "Fix or withdraw the guard in this unsloth build (its failing tests and training run are "
              "listed with the cell), then rerun this cell.",
    "error": "Read this cell's error and log tail, fix the cause and rerun it; until then treat the pairing "
             "as exposed.",
    "activates": "Nothing is needed while the guard stays in; upgrading unsloth_zoo past the fix makes the "
                 "guard unnecessary.",
    "no-ops": "Nothing to do: the zoo carries the fix and the guard stays idle.",
    "not-needed": "Nothing to do: this pairing is not exposed.",
}

# A cell of another subject (no unsloth x zoo pair: a source tree such as a nanochat checkout): the fault and
# its fix live in the build under test itself.
NEXT_STEP_OTHER = {
    **NEXT_STEP,
    "missing": "This build has the fault and nothing handles it: apply a fix (as above) and rerun this cell to "
               "confirm.",
    "broken": "This build's fix is defective (its failing tests and training run are listed with the cell): fix "
              "or withdraw it, then rerun this cell.",
    "activates": "Nothing to do: the fault is handled where it arises, and the suite and the run are clean.",
    "no-ops": "Nothing to do: the fault is fixed, and the extra handling stays idle.",
}


@dataclass(frozen=True)
class Advice:
    """Three sentences a user can act on."""

    install: str
    fix: str
    next_step: str
    reach: str = ""

    def lines(self) -> list[tuple[str, str]]:
        """(label, sentence) pairs in reading order, as every format prints them."""
        head = [("reach", self.reach)] if self.reach else []
        return [*head, ("install", self.install), ("fix", self.fix), ("next step", self.next_step)]


def fixed_since(report: dict[str, Any], check_id: str) -> str | None:
    """The first zoo release that carries the fix of ``check_id`` per the report's scan, if the scan says.

    Reads ``report["scan"]["timeline"]["fixed_since"]``: a version for the
    scan's one check (``report["scan"]["check"]``), or a mapping of check id to version.
    """
    scan = report.get("scan")
    if isinstance(scan, dict) and scan.get("check") not in (None, check_id):
        return None  # the scan read for another check
    timeline = scan.get("timeline") if isinstance(scan, dict) else None
    value = timeline.get("fixed_since") if isinstance(timeline, dict) else None
    if isinstance(value, dict):
        value = value.get(check_id)
    return value if isinstance(value, str) and value else None


def _sentence(text: str) -> str:
    """One sentence: capitalised, with a final stop (a check's hint may be written as a clause)."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def release_sentence(check: dict[str, Any], scanned: str | None = None) -> str:
    """The fix line's release clause from the check's declared fix, and what this run's scan says when it differs."""
    d = check.get("upstream_fix")
    if not isinstance(d, dict) or not d.get("package"):
        declared = "No upstream fix is declared for this check."
        return declared + (f" This run's scan finds unsloth_zoo>={scanned} carries the fix." if scanned else "")
    fix = UpstreamFix(package=str(d["package"]), release=d.get("release") or None, prs=tuple(d.get("prs") or ()),
                      prs_state=str(d.get("prs_state") or ""), title=str(d.get("title") or ""))
    out = fix.sentence()
    if scanned and fix.against_scan(scanned):
        out += f" This run's scan disagrees: {fix.against_scan(scanned)}."
    return out


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def guard_failures(entry: dict[str, Any], check_id: str) -> list[str]:
    """What a guard fails in this cell: each failing behaviour test (``id (title)``), then the training run when it
    logged or stored a NaN, crashed or errored."""
    v = (entry.get("verdicts") or {}).get(check_id) or {}
    failing = [str(x) for x in _list((v.get("behavior") or {}).get("failing"))]
    section = (entry.get("checks") or {}).get(check_id) or {}
    titles: dict[str, str] = {}
    for step in _list(section.get("steps")):
        if isinstance(step, dict) and step.get("name") == "behavior" and isinstance(step.get("result"), dict):
            for key in ("tests", "extra"):
                titles.update({str(t.get("id")): str(t.get("title") or "") for t in _list(step["result"].get(key))
                               if isinstance(t, dict)})
    out = [f"{t} ({titles[t]})" if titles.get(t) else t for t in failing]
    t = v.get("training") if isinstance(v.get("training"), dict) else {}
    if t.get("outcome") in ("nan-logged", "nan-weights", "crash", "error"):
        out.append(f"the training run ({t.get('label') or t.get('outcome')})")
    return out


def _broken_fix(entry: dict[str, Any], check_id: str, pair: bool) -> str:
    v = (entry.get("verdicts") or {}).get(check_id) or {}
    failed = guard_failures(entry, check_id)
    what = "; ".join(failed) if failed else str(v.get("guard_reason") or "see the cell's evidence")
    if pair:
        return f"The guard in this unsloth build fails its own suite: {what}. Fix the guard so these pass, or " \
               "remove it from this build."
    return f"This build's fix fails its own suite: {what}. Fix it so these pass, or remove it."


def advice(entry: dict[str, Any], check: dict[str, Any], *, fixed: str | None = None) -> Advice:
    """Plain words for one check (``check``, from ``report["checks"]``) in one cell (``entry``).

    ``fixed`` is the first zoo release carrying the fix per a scan in the output directory (:func:`fixed_since`),
    when one lies there; the release the check declares is named either way.
    """
    adm = entry.get("admissible")
    value = adm.get("value") if isinstance(adm, dict) else None
    install = INSTALL.get(value if isinstance(value, bool) else None, INSTALL[None])
    verdicts = entry.get("verdicts")
    v = verdicts.get(check.get("id")) if isinstance(verdicts, dict) else None
    guard = str(v.get("guard")) if isinstance(v, dict) else "error"
    pair = {"unsloth", "zoo"} <= set(entry.get("builds") or {})
    release = release_sentence(check, fixed)
    if guard == "broken":
        fix = f"{_broken_fix(entry, str(check.get('id')), pair or not entry.get('builds'))} Upstream: {release}"
    else:
        fix = f"{_sentence(str(check.get('fix_hint') or 'No fix is recorded for this check'))} {release}"
    steps = NEXT_STEP if pair or not entry.get("builds") else NEXT_STEP_OTHER
    next_step = steps.get(guard, f"Rerun this cell: its state {guard!r} is not one this report knows.")
    if guard == "missing" and isinstance(v, dict) and v.get("reach") == "latent":
        next_step = ("Nothing breaks on this stack's trainer today; move to a zoo release that carries the fix "
                     "before a route that sends the faulting input reaches it (strict mode fails it now).")
    reach = f"{v['reach']}: {v.get('reach_reason') or ''}".rstrip(": ") if isinstance(v, dict) and v.get("reach") \
        else ""
    return Advice(install=install, fix=fix, next_step=next_step, reach=reach)
