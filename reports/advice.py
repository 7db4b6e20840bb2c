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
``fix_hint``, plus the first zoo release that carries the fix when a scan
found one. The *next step* is one sentence per guard state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    scan's one check, or a mapping of check id to version.
    """
    scan = report.get("scan")
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


def advice(entry: dict[str, Any], check: dict[str, Any], *, fixed: str | None = None) -> Advice:
    """Plain words for one check (``check``, from ``report["checks"]``) in one cell (``entry``).

    ``fixed`` is the first zoo release carrying the fix (:func:`fixed_since`), when known.
    """
    adm = entry.get("admissible")
    value = adm.get("value") if isinstance(adm, dict) else None
    install = INSTALL.get(value if isinstance(value, bool) else None, INSTALL[None])
    fix = _sentence(str(check.get("fix_hint") or "No fix is recorded for this check"))
    if fixed:
        fix += f" unsloth_zoo>={fixed} carries the fix."
    verdicts = entry.get("verdicts")
    v = verdicts.get(check.get("id")) if isinstance(verdicts, dict) else None
    guard = str(v.get("guard")) if isinstance(v, dict) else "error"
    pair = {"unsloth", "zoo"} <= set(entry.get("builds") or {})
    steps = NEXT_STEP if pair or not entry.get("builds") else NEXT_STEP_OTHER
    next_step = steps.get(guard, f"Rerun this cell: its state {guard!r} is not one this report knows.")
    if guard == "missing" and isinstance(v, dict) and v.get("reach") == "latent":
        next_step = ("Nothing breaks on this stack's trainer today; move to a zoo release that carries the fix "
                     "before a route that sends the faulting input reaches it (strict mode fails it now).")
    reach = f"{v['reach']}: {v.get('reach_reason') or ''}".rstrip(": ") if isinstance(v, dict) and v.get("reach") \
        else ""
    return Advice(install=install, fix=fix, next_step=next_step, reach=reach)
