"""The unsloth side: run the raw process's examples through whatever ``import unsloth`` left, and judge.

``baseline_step`` runs first in the unsloth process (right after the import,
before any other step touches anything) and keeps the snapshots of
``os.environ`` and zoo's globals. ``differential_step`` (needs the raw
findings) answers every example with the kernel as it now is, judges each
property (``properties.PER_EXAMPLE``), shrinks each failure over the lattices
the raw process answered, and adds the import-time side effects. Its result
has the behaviour suite's shape: ``{"schema", "seed", "examples", "tests",
"extra"}``, one test per property.
"""

from __future__ import annotations

import time
from typing import Any

from probes import handoff

from . import BASELINE_KEY, PROPERTIES, PROPERTY_IDS, SCHEMA, SHARED_KEY, faults, state
from . import spec as specs
from .oracle import COMPILE, Kernel, in_region
from .properties import ARTEFACTS, PER_EXAMPLE, defined_zero, empty_reference, excused, loss_value

# How many of a property's failing examples have their lattices searched for a smaller failure.
SHRINK_EXAMPLES = 4
DEFAULT_GUARD_MODULE = "unsloth.fused_ce_guard"


def baseline_step(ctx: Any) -> dict[str, Any]:
    """Snapshots right after ``import unsloth``, for the import-time side-effect rules."""
    ctx.shared[BASELINE_KEY] = {"env": state.env_snapshot(), "globals": state.globals_snapshot()}
    return {"env_keys": len(ctx.shared[BASELINE_KEY]["env"]), "globals": len(ctx.shared[BASELINE_KEY]["globals"])}


def describe(s: dict[str, Any]) -> str:
    """One line naming the input, with the count as the caller wrote it (needs torch; the spec's words else)."""
    try:
        from .inputs import materialize, render_count

        count = render_count(materialize(s, "cpu").n_items)
    except Exception:
        count = None
    return specs.describe(s, count)


def _test(pid: str, outcome: str, reason: str, duration: float, details: dict[str, Any]) -> dict[str, Any]:
    return {"id": pid, "title": PROPERTIES[pid], "outcome": outcome, "reason": reason,
            "duration_s": round(duration, 4), "details": details}


def _document(raw: dict[str, Any], tests: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"schema": SCHEMA, "seed": raw.get("seed"), "examples": len(raw.get("examples") or ()),
            **fields, "tests": tests, "extra": []}


class Judge:
    def __init__(self, raw: dict[str, Any], kernel: Kernel) -> None:
        self.raw = raw
        self.examples = [specs.expand(s) for s in raw["examples"]]
        self.kernel = kernel
        self.answers: dict[str, dict[str, Any]] = raw["answers"]
        self.guarded: dict[str, dict[str, Any]] = {}
        self.calls_s = 0.0
        self.allowed_globals = set(raw.get("globals_changed_by_calls") or ())

    def norm(self, s: dict[str, Any]) -> dict[str, Any]:
        return specs.normalize(s, has_compute_gradients=self.raw["has_compute_gradients"], cuda=self.raw["cuda"])

    def guard(self, s: dict[str, Any]) -> dict[str, Any]:
        """The guarded answer (cached), with the globals this call changed beyond zoo's own calls."""
        name = specs.key(s)
        if name not in self.guarded:
            start = time.perf_counter()
            before = state.globals_snapshot()
            ans = self.kernel.answer(s)
            changed = sorted(set(state.diff(before, state.globals_snapshot())) - self.allowed_globals)
            if changed:
                ans["globals_changed"] = changed
            self.guarded[name] = ans
            self.calls_s += time.perf_counter() - start
        return self.guarded[name]

    def verdict(self, pid: str, s: dict[str, Any]) -> tuple[bool, str | None] | None:
        """None when zoo's answer for ``s`` is unknown (not in the lattice)."""
        zoo = self.answers.get(specs.key(s))
        if zoo is None:
            return None
        twin = self.answers.get(zoo.get("twin", ""))
        return PER_EXAMPLE[pid](zoo, self.guard(s), twin)

    def notes(self, pid: str) -> tuple[str, dict[str, Any]]:
        """What a passing property says beyond its count: for d5, which reference of the empty region each
        guarded answer matched; for d4, the inputs where zoo's exception is outside the contract and the
        guard gave the defined empty answer instead (excused, with the reason)."""
        pairs = [(self.answers[specs.key(s)], s) for s in self.examples if specs.key(s) in self.answers]
        if pid == "d5-defined-empty-answer":
            refs: dict[str, int] = {}
            for zoo, s in pairs:
                ref = empty_reference(zoo, self.guard(s), self.answers.get(zoo.get("twin", "")))
                if ref:
                    refs[ref] = refs.get(ref, 0) + 1
            if not refs:
                return "", {}
            words = {"defined-zero": "the defined zero", "fixed-zoo": "the fixed zoo's answer",
                     "both": "both (they coincide)"}
            text = ", ".join(f"{words[k]} {refs[k]}" for k in ("defined-zero", "fixed-zoo", "both") if k in refs)
            return f"; the guarded answer in the empty region matched {text}", {"references": refs}
        if pid == "d4-same-exception":
            hits = [(zoo, s) for zoo, s in pairs if excused(zoo, self.guard(s))]
            if not hits:
                return "", {}
            kinds = sorted({str(zoo["ca"]) for zoo, _ in hits})
            first = hits[0][1]
            why = "; ".join(f"{k}: {ARTEFACTS[k]}" for k in kinds)
            return (f"; {len(hits)} where zoo raised on a fully masked batch with a zero count for a reason outside "
                    f"the contract ({why}) and the guard gave the defined empty answer instead, which is not a "
                    f"failure (e.g. {describe(first)}: zoo raises {hits[0][0]['e']})",
                    {"excused": len(hits), "excused_why": kinds})
        return "", {}

    def line(self, pid: str, s: dict[str, Any], detail: str) -> str:
        return f'property "{pid.split("-", 1)[1]}": {describe(s)}: {detail}'

    def shrink(self, pid: str, failing: list[tuple[dict[str, Any], str]]) -> tuple[dict[str, Any], str, int]:
        """The smallest failing input among the failing examples and their answered lattices."""
        best = min(failing, key=lambda f: specs.size(f[0]))
        searched = 0
        for s, _ in sorted(failing, key=lambda f: specs.size(f[0]))[:SHRINK_EXAMPLES]:
            for v in specs.lattice(s, has_compute_gradients=self.raw["has_compute_gradients"], cuda=self.raw["cuda"]):
                if specs.size(v) >= specs.size(best[0]):
                    continue
                out = self.verdict(pid, v)
                searched += out is not None
                if out is not None and out[1] is not None:
                    best = (v, out[1])
        return best[0], best[1], searched

    def property(self, pid: str, extra_failure: str | None = None,
                 extra_details: dict[str, Any] | None = None) -> dict[str, Any]:
        if pid == faults.PROPERTY:  # not per example: zoo made to raise on a few inputs of its own
            return faults.judged(self.raw.get(faults.SHARED_KEY) or {}, self.kernel,
                                 self.raw["has_compute_gradients"], self.raw["cuda"],
                                 lambda ans: (loss_value(ans), defined_zero(ans)))
        start = time.perf_counter()
        applied, failing = 0, []
        for s in self.examples:
            out = self.verdict(pid, s)
            if out is None:
                continue
            applied += out[0]
            if out[1] is not None:
                failing.append((s, out[1]))
        details: dict[str, Any] = {"examples": applied, "failed": len(failing), **(extra_details or {})}
        reasons = []
        if extra_failure:
            reasons.append(f'property "{pid.split("-", 1)[1]}": {extra_failure}')
        if failing:
            minimal, detail, searched = self.shrink(pid, failing)
            details.update(minimal=specs.describe(minimal), minimal_key=specs.key(minimal), shrink_searched=searched,
                           failing_keys=[specs.key(s) for s, _ in failing[:5]])
            reasons.append(self.line(pid, minimal, detail) + f" ({len(failing)} of {applied} examples fail)")
        if reasons:
            return _test(pid, "fail", "; ".join(reasons), time.perf_counter() - start, details)
        if applied == 0:
            why = ("zoo's answer was finite on every empty input with a zero count (same-answer judged them)"
                   if pid == "d5-defined-empty-answer" else "no generated example applies")
            return _test(pid, "n/a", f"n/a: {why}", time.perf_counter() - start, details)
        note, more = self.notes(pid)
        return _test(pid, "pass", f"ok ({applied} examples{note})", time.perf_counter() - start, {**details, **more})


def _import_env(raw: dict[str, Any], base: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    protocol = handoff.given().guard_module or DEFAULT_GUARD_MODULE
    files = state.guard_files(protocol)
    kernel_keys = set(raw.get("kernel_env_keys") or ())
    named = state.named_keys(files)
    judged = (kernel_keys | named) - state.PHASE_KEYS
    diffs = state.diff(raw.get("env") or {}, base["env"], judged)
    details = {"guard_files": files, "judged_keys": len(judged),
               "import_diff_unjudged": sorted(set(state.diff(raw.get("env") or {}, base["env"])) - set(diffs))}
    if not diffs:
        return None, details

    def why(name: str) -> str:
        return "zoo's kernel reads it" if name in kernel_keys else "the guard's source names it"

    parts = [f"{k}={b!r} (raw process: {'unset' if a is None else repr(a)}; {why(k)})" for k, (a, b) in diffs.items()]
    details["import_diff"] = {k: list(v) for k, v in diffs.items()}
    return "after import unsloth " + ", ".join(parts), details


def _import_globals(raw: dict[str, Any], base: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    diffs = state.diff(raw.get("globals") or {}, base["globals"])
    if not diffs:
        return None, {"globals": len(base["globals"])}
    parts = [f"{k}: {a!s:.80} -> {b!s:.80}" for k, (a, b) in list(diffs.items())[:4]]
    return ("after import unsloth " + "; ".join(parts) + (f" (+{len(diffs) - 4} more)" if len(diffs) > 4 else ""),
            {"import_diff": {k: list(v) for k, v in diffs.items()}})


def differential_step(ctx: Any) -> dict[str, Any]:
    raw = (ctx.raw or {}).get(SHARED_KEY)
    if not raw or "absent" in (raw or {}):
        why = (raw or {}).get("absent") or "the raw process left no oracle answers"
        outcome = "n/a" if raw else "fail"
        reason = f"n/a: {why}" if raw else why
        return _document(raw or {}, [_test(p, outcome, reason, 0.0, {}) for p in PROPERTY_IDS])
    start, cpu_start = time.perf_counter(), time.process_time()
    base = ctx.shared.get(BASELINE_KEY) or {"env": state.env_snapshot(), "globals": state.globals_snapshot()}
    kernel = Kernel(ctx.device, COMPILE)
    judge = Judge(raw, kernel)
    env_fail, env_details = _import_env(raw, base)
    glob_fail, glob_details = _import_globals(raw, base)
    if ctx.cpu_mode != "allow-cpu":
        # zoo was imported under other variables here than in the raw process (its CPU backend mode):
        # import-time differences may be zoo's own reading of them, so they are recorded, not judged.
        glob_details = {**glob_details, "import_diff_not_judged": f"cpu mode {ctx.cpu_mode}: {glob_fail}"}
        glob_fail = None
    tests = []
    for pid in PROPERTY_IDS:
        if pid == "d7-no-side-effects-env":
            tests.append(judge.property(pid, env_fail, env_details))
        elif pid == "d8-no-side-effects-globals":
            tests.append(judge.property(pid, glob_fail, glob_details))
        else:
            tests.append(judge.property(pid))
    region = sum(in_region(raw["answers"].get(specs.key(s)) or {}) for s in judge.examples)
    return _document(raw, tests, variants=len(raw["answers"]), region_examples=region,
                     guarded_answers=len(judge.guarded), raw_seconds=raw.get("seconds"),
                     guarded_seconds=round(judge.calls_s, 3), seconds_total=round(time.perf_counter() - start, 3),
                     cpu_seconds=round(time.process_time() - cpu_start, 3), raw_cpu_seconds=raw.get("cpu_seconds"),
                     signature=raw.get("signature"), device=ctx.device, compile=COMPILE,
                     cell_compile=ctx.torch_compile)
