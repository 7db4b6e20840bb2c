"""Verdict assembly: run the reading over each forward and turn what it recorded into a ``StaticVerdict``.

``analyze_source`` parses the entry module, locates the forwards (``forward.py``), reads each from its
parameters (twice when a parameter stands in for the label count: the second time it is bound as a count,
see ``static/__init__.py``) and judges it: ``vulnerable`` when an unguarded count reaches a division,
``unknown`` when a divisor or an escape cannot be judged, ``fixed`` when every division is behind a guard.
Forwards whose verdicts disagree give ``unknown``; a crash of the reading is reported as ``unknown``.
"""

from __future__ import annotations

import ast

from .analysis import Analysis
from .forward import locate, module_name
from .syntax import param_names
from .tamper import forward_decorator, tampering
from .values import (
    CE_PATH,
    CLASS_NAME,
    NONE,
    OTHER,
    ZERO,
    Division,
    Func,
    ModuleReader,
    StaticVerdict,
    Unreadable,
    Val,
    countish,
    kind,
)


def _where(file: str, line: int, entry_file: str) -> str:
    return f"line {line}" if file == entry_file else f"{file}:{line}"


def _judge(an: Analysis, fwd: Func, file: str | None) -> StaticVerdict:
    params = param_names(fwd.node)
    an.forward_order = params[1:]  # .apply() passes everything but ctx
    bound: dict[str, Val] = {params[0]: OTHER} if params else {}
    for p in params[1:]:
        bound[p] = frozenset({("P", p)})
    a = fwd.node.args
    for p in a.kwonlyargs:
        bound[p.arg] = frozenset({("P", p.arg)})
    if a.vararg:
        bound[a.vararg.arg] = OTHER
    if a.kwarg:
        bound[a.kwarg.arg] = OTHER
    # Lines are reported in ``file``; a forward read from another module is named in the reason instead.
    fline = fwd.node.lineno if fwd.mod is an.entry else None
    where_fwd = "" if fwd.mod is an.entry else f" (in {fwd.mod.file}:{fwd.node.lineno})"
    verdict = _judged(an, fwd, bound, file, fline, where_fwd, [])
    # The caller's count: a parameter divided by in place of the label count (``n_items``). Read the forward
    # again with it bound as a count that may be zero (a trainer sends 0 for a fully masked step), so that a
    # guard must cover it too: one that floors only the label-count branch leaves ``n_items == 0`` open.
    callers = sorted(an.caller_counts() & set(bound))
    if callers:
        an.reset()
        for p in callers:
            bound[p] = frozenset({("C", fwd.mod.file, fwd.node.lineno, p), *NONE})  # given (maybe 0) or None
        verdict = _judged(an, fwd, bound, file, fline, where_fwd, callers)
    if where_fwd and not verdict.reason.startswith(CLASS_NAME):
        verdict = StaticVerdict(verdict.verdict, f"{CLASS_NAME}.forward{where_fwd}: {verdict.reason}", verdict.file,
                                verdict.forward_line, verdict.evidence_line)
    return verdict


def _judged(an: Analysis, fwd: Func, bound: dict[str, Val], file: str | None, fline: int | None,
            where_fwd: str, callers: list[str]) -> StaticVerdict:
    entry = an.entry.file
    dec = forward_decorator(an, fwd)
    if dec is not None:
        return StaticVerdict("unknown", f"{CLASS_NAME}.forward{where_fwd} is wrapped by {dec}, which the reading "
                             "does not follow", file, fline)
    try:
        an.run_func(fwd, bound, fwd.node.lineno)
    except (Unreadable, RecursionError) as exc:
        return StaticVerdict("unknown", f"{CLASS_NAME}.forward{where_fwd}: {exc or 'too deeply nested'}",
                             file, fline)
    if an.poisoned:
        # A guarded count some in-place method changed (maybe through an alias) proves nothing any more.
        poison = frozenset(an.poisoned)
        an.divisions = [Division(d.file, d.line, d.where, frozenset(
            ("U", "the count is changed in place after its guard") if e in poison and kind(e) == "G" else e
            for e in d.divisor)) for d in an.divisions]
    if not an.sources:
        return StaticVerdict("unknown", f"{CLASS_NAME}.forward{where_fwd} derives no label count (no sum or "
                             "count over a comparison mask); cannot judge its divisor", file, fline)
    for d in an.divisions:
        counts = sorted((e for e in d.divisor if kind(e) == "C"), key=lambda e: (len(e) > 3, e[1], e[2]))
        if counts or (d.divisor >= ZERO and countish(d.divisor)):
            src = counts[0] if counts else None
            at = f"the division at {_where(d.file, d.line, entry)} in {d.where} with no zero guard on some path"
            if src is not None and len(src) > 3:
                return StaticVerdict(  # the label count is guarded here: the caller's count alone is open
                    "vulnerable", f"the caller's count (parameter {src[3]!r}, divided by whenever it is given) "
                    f"reaches {at}: a fully masked step with {src[3]} == 0 divides by 0 (zoo's trainer patch "
                    "sends a tensor 0 there; a guard for the None case alone does not cover it)", file, fline,
                    d.line if d.file == entry else None)
            if d.note and src is not None and len(src) == 3 and src[2] == d.line:
                return StaticVerdict("vulnerable", f"{d.note}, with no zero guard (an all-masked batch gives NaN)",
                                     file, fline, d.line if d.file == entry else None)
            src_text = f"the label count from {_where(src[1], src[2], entry)}" if src else "a zero"
            also = [e[3] for e in counts if len(e) > 3]
            if also:
                src_text += f" and the caller's count (parameter {also[0]!r}) reach"
            else:
                src_text += " reaches"
            evidence = src[2] if src and src[1] == entry else (d.line if d.file == entry else None)
            return StaticVerdict("vulnerable", f"{src_text} {at} (an all-masked batch divides by 0)",
                                 file, fline, evidence)
    for d in an.divisions:
        opaque = [e[1] for e in d.divisor if kind(e) in ("U", "Q")]
        if d.divisor >= ZERO and not countish(d.divisor):
            opaque.append("a zero the reading can see reaches it (not the label count: 0 / 0 whenever the loss is 0)")
        if any(kind(e) == "F" for e in d.divisor):
            opaque.append("the divisor may be a constant below 1, which is 0 in an integer count's dtype, after "
                          "int(), or (1e-8) in fp16")
        if opaque:
            return StaticVerdict("unknown", f"the division at {_where(d.file, d.line, entry)} in {d.where}: "
                                 f"{sorted(opaque)[0]}", file, fline, d.line if d.file == entry else None)
    lost = sorted({e for e in an.exposed if kind(e) in ("C", "U")}, key=str)
    if an.unresolved:
        file_, line, where, why = an.unresolved[0]
        return StaticVerdict("unknown", f"the division at {_where(file_, line, entry)} in {where} is by {why}",
                             file, fline, line if file_ == entry else None)
    if lost and an.blind:
        file_, line, where = an.blind[0]
        return StaticVerdict("unknown", f"the division at {_where(file_, line, entry)} in {where} is by a value the "
                             "reading cannot follow, and an unguarded count was stored where the reading loses it "
                             "(an attribute, a container, code it cannot read): it may be that count", file, fline,
                             line if file_ == entry else None)
    if an.escapes:
        e = an.escapes[0]
        return StaticVerdict("unknown", f"{_where(e.file, e.line, entry)} in {e.where}: the unguarded count "
                             f"escapes into {e.what}, so its division cannot be checked", file, fline,
                             e.line if e.file == entry else None)
    guarded = [d for d in an.divisions if countish(d.divisor)]
    if guarded and an.foreign:
        file_, line, where, path = an.foreign[0]
        return StaticVerdict("unknown", f"{_where(file_, line, entry)} in {where} hands data to {path}() from another "
                             "distribution, which may compute the loss (a stock mean over the labels) where the "
                             "reading cannot see", file, fline, line if file_ == entry else None)
    if guarded:
        d = guarded[0]
        g = sorted(e for e in d.divisor if kind(e) == "G")[0]
        who = (f"the label count and the caller's count (parameter {callers[0]!r}) reach" if callers
               else "the label count reaches")
        return StaticVerdict(
            "fixed", f"{who} the division at {_where(d.file, d.line, entry)} in {d.where} only "
            f"through a zero guard ({g[3]} at {_where(g[1], g[2], entry)})", file, fline,
            g[2] if g[1] == entry else (d.line if d.file == entry else None))
    src = an.sources[0]
    return StaticVerdict("unknown", f"the label count from {_where(src[0], src[1], entry)} reaches no division "
                         "the reading can see", file, fline)


def analyze_source(text: str, file: str | None = None, *,
                   read_module: ModuleReader | None = None) -> StaticVerdict:
    """Judge the zoo cross-entropy module's source text. See the package docstring (``static/__init__.py``).

    ``read_module(dotted)`` returns the source of another module of the same distribution (or None); with
    it, re-exports, base classes and helpers are followed across modules. ``file`` names the module (a path
    containing ``unsloth_zoo/``; the CE module's name is assumed otherwise) and is echoed in the verdict.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return StaticVerdict("unknown", f"cannot parse the module: {exc.msg} (line {exc.lineno})", file)
    name = module_name(file)
    entry_file = file or CE_PATH
    an = Analysis(name, entry_file, tree, read_module)
    try:
        located = locate(an, file)
        if located.verdict is not None:
            return located.verdict
        verdicts = []
        for fwd in located.forwards:
            an.reset()
            verdicts.append(_judge(an, fwd, file))
        swapped = tampering(an, located.classes)
        if swapped is not None:
            return StaticVerdict("unknown", f"{CLASS_NAME}.forward may be replaced after its definition ({swapped}); "
                                 "the forward that runs is not the one read", file, verdicts[0].forward_line)
    except (Unreadable, RecursionError) as exc:
        return StaticVerdict("unknown", f"cannot read {CLASS_NAME}.forward: {exc or 'too deeply nested'}", file)
    except Exception as exc:  # a release the reading trips on is a finding (unknown), not a failed scan
        return StaticVerdict("unknown", f"the static reading failed ({type(exc).__name__}: {exc}); this is a "
                             "detector bug worth reporting", file)
    kinds = {v.verdict for v in verdicts}
    if len(kinds) == 1:
        return verdicts[0]
    if "unknown" in kinds:
        return next(v for v in verdicts if v.verdict == "unknown")
    lines = ", ".join(str(v.forward_line) for v in verdicts)
    return StaticVerdict("unknown", f"{CLASS_NAME} has several definitions (forwards at lines {lines}) whose "
                         f"verdicts disagree ({', '.join(v.verdict for v in verdicts)}); which one runs depends "
                         "on the environment", file, verdicts[0].forward_line)
