"""From this check's evidence in a cell to its states. Stdlib only (``reports/`` imports it).

The static reading says whether an import-time reference is missing (``vulnerable``) or not (``fixed``;
``degraded`` pairs are fixed here, their broken features are in the evidence). The runtime step says what
``import unsloth`` did: ``ok`` (fixed), ``skew`` (vulnerable), or ``environment`` -- then the runtime side is
``n/a`` with its reason and the static verdict stands. A pair whose import succeeds is never vulnerable.

The ``trainers`` step generates unsloth's trainer classes from zoo source after a successful import: a
generation that fails on a zoo name (``skew``) is evidence that the pair is *degraded* -- the feature it serves
(SFT trainer, RL trainers) is named in the reasons and in ``runtime`` -- never that it is incompatible: the
states stay those of an import that worked.

Every verdict also carries the check's own word (``Verdict.word``), which every format shows instead of the
guard vocabulary: ``compatible``, ``degraded`` (a passing state that is a WARN: ``Verdict.warn`` names the
features that break), ``incompatible`` (``missing`` or ``broken``: fails the gate unless expected) and
``unknown`` (``error``: no verdict).
"""

from __future__ import annotations

from typing import Any

from probes.checks.vocabulary import GuardState, Verdict, ZooState, step, step_reason


def trainer_skews(check: dict[str, Any]) -> list[dict[str, Any]]:
    """The trainers whose generation failed on a zoo name (``trainers`` step), in step order."""
    s = step(check, "trainers")
    rows = ((s or {}).get("result") or {}).get("trainers") if s and s.get("status") == "ok" else None
    return [r for r in rows or [] if isinstance(r, dict) and r.get("state") == "skew"]


def degraded_words(skews: list[dict[str, Any]]) -> str:
    """"degraded: RL trainers (UnslothGRPOTrainer: ImportError: ...)" for the failed generations."""
    parts = [f"{r.get('feature')} ({r.get('class')}: {r.get('reason')})" for r in skews]
    return "degraded: generating " + "; ".join(parts)


def classify(check: dict[str, Any], cell: dict[str, Any]) -> Verdict:
    st = check.get("static") or {}
    static = st.get("verdict", "unknown")
    s = step(check, "runtime")
    result = (s or {}).get("result") or {}
    cls = result.get("class") if s and s.get("status") == "ok" else None
    if cls == "environment" and missing_key_raised(st, result):
        cls = "skew"  # a KeyError on a zoo dict the reading found without that key: the skew itself
        result = {**result, "reason": f"KeyError on a zoo dict: {result.get('reason')}"}
    na = f"n/a: {result.get('reason') or step_reason(s, 'runtime')}"
    runtime = {"ok": "fixed", "skew": "vulnerable"}.get(cls or "", na)
    why = st.get("reason", "")

    pair = st.get("pair")
    breaks_at = st.get("breaks_at")

    def out(zoo: ZooState, zoo_reason: str, guard: GuardState, reason: str, warn: str = "") -> Verdict:
        return Verdict(zoo, zoo_reason, static, runtime, guard, reason, word=own_word(guard, warn, breaks_at),
                       warn=warn)

    if static == "absent":
        return out(ZooState.ABSENT, why, GuardState.ERROR, f"cannot read the pair: {why}")
    if cls == "ok":
        if static == "vulnerable" and breaks_at == "model-load":  # it imports, as the reading says; then breaks
            return out(ZooState.VULNERABLE, f"import unsloth succeeded; static: {why}", GuardState.MISSING,
                       f"the pair imports, but the first model load fails: {why}")
        if static == "vulnerable":
            return out(ZooState.INCONSISTENT, f"static: {why}; but import unsloth succeeded", GuardState.ERROR,
                       "the static reading says incompatible, yet import unsloth succeeded (investigate)")
        skews = trainer_skews(check)
        if skews:  # the import worked: a trainer that fails on zoo degrades the pair, it does not break it
            words = degraded_words(skews)
            runtime = "degraded: " + ", ".join(dict.fromkeys(str(r.get("feature")) for r in skews))
            return out(ZooState.FIXED, f"import unsloth succeeded, {words}; static: {why}", GuardState.NOT_NEEDED,
                       f"the pair imports, {words}; static: {why}", warn=words)
        return out(ZooState.FIXED, f"import unsloth succeeded; static: {why}", GuardState.NOT_NEEDED,
                   f"the pair imports; {why}", warn=why if pair == "degraded" else "")
    if cls == "skew":
        if static == "fixed":
            return out(ZooState.INCONSISTENT, f"static: {why}; runtime: {result['reason']}", GuardState.BROKEN,
                       f"import unsloth failed on a zoo name the static reading resolved: {result['reason']}")
        return out(ZooState.VULNERABLE, f"import unsloth failed: {result['reason']}", GuardState.MISSING,
                   f"import unsloth fails on a zoo name: {result['reason']}")
    # environment (or the step did not run): the static verdict stands
    if static == "vulnerable":
        return out(ZooState.VULNERABLE, f"static: {why}", GuardState.MISSING, f"static: {why}; runtime {runtime}")
    if static == "fixed":
        return out(ZooState.FIXED, f"static: {why}", GuardState.NOT_NEEDED, f"static: {why}; runtime {runtime}",
                   warn=why if pair == "degraded" else "")
    return out(ZooState.UNKNOWN, f"static: {why}", GuardState.ERROR, f"cannot decide: static {why}; runtime {runtime}")


def own_word(guard: GuardState, warn: str, breaks_at: str | None = None) -> str:
    """This check's word for a state: a pair is compatible, degraded, incompatible or unknown."""
    if guard in (GuardState.MISSING, GuardState.BROKEN):
        return "incompatible (breaks at model load)" if breaks_at == "model-load" else "incompatible"
    if guard is GuardState.ERROR:
        return "unknown"
    return "degraded" if warn else "compatible"


def missing_key_raised(st: dict[str, Any], result: dict[str, Any]) -> bool:
    """The import failed on a ``KeyError`` whose key the static reading found missing from a zoo dict (a
    ``KeyError`` names no module, so the chain alone cannot call it a skew)."""
    keys = {repr(m["key"]) for m in st.get("missing") or [] if isinstance(m, dict) and m.get("key")}
    return any(e.get("type") == "KeyError" and e.get("message") in keys for e in result.get("chain") or [])
