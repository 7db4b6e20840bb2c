"""The static detector: prove from source that ``UnslothFusedLoss.forward`` guards its divisor, or abstain.

Nothing here imports torch or zoo. ``analyze_source(text)`` reads one module's text with ``ast``; with a
``read_module`` callback it follows helpers, re-exports and base classes into other modules of the same
distribution. ``analyze_files`` does the same over a ``{relative path: text}`` mapping (the scan's wheel
members) and ``detect_installed`` over the installed package, found with ``importlib.util.find_spec``.

The reading is a small abstract interpretation. It locates the forward (through re-exports, inheritance,
``forward = staticmethod(_f)``, module-level ``forward`` assignments and class definitions under ``if``),
then walks it statement by statement, following calls into functions it can read (nested, same module, same
distribution, through ``torch.compile`` / ``torch.func`` / ``functools.partial`` wrappers, and the
``loss_function`` argument as bound at the module's ``.apply`` / mapping call sites). Each value carries
what is known about it: a label count (a ``sum``/``count_nonzero`` over a comparison mask, or the size of a
masked selection) that may be zero, the same count after a recognised zero guard, or a count that went
through something the reading cannot judge. Variable names never matter; assignments are followed.

The caller's count is a divisor too. ``forward`` divides by "the caller's ``n_items``, else the label
count", and zoo's trainer patch passes ``n_items`` = tensor 0 for a fully masked accumulation step, so a
guard that floors only the label count (the ``n_items is None`` branch) leaves ``n_items == 0`` open. A
first reading finds the forward parameters that stand in for the label count: joined with it into one
divisor (``n_items if n_items is not None else count``), or divided by somewhere and known None (an
``is None`` test on the parameter itself) where the count is divided. A second reading binds each such
parameter as a count that may be zero, so ``fixed`` needs a guard dominating the division on both the
``n_items`` and the label-count paths; a parameter divided by that never stands in for the count
(``scaling``, a memory budget) is not judged as one.

Recognised guards: ``clamp``/``clamp_min``/``clip`` with a floor of at least 1 (and no ``max`` below 1); builtin
``max`` with such an argument; ``torch.max``/``torch.maximum``/``fmax`` against a positive tensor (``ones_like(d)``);
``torch.where``/``masked_fill``/conditional expressions that replace a zero with a positive value; an ``if``
on ``== 0`` / ``<= 0`` / ``not ...`` (or the positive forms) of the divisor or of the count whose zero branch
returns, raises or replaces the divisor; any helper whose body does one of those on every return path.

Verdicts: ``vulnerable`` when an unguarded count (the label count or the caller's) reaches a division
(``/``, ``//``, ``%``, ``div``, ``operator.truediv``, ``__rtruediv__``, ``reciprocal``, ...) or a stock mean
(``cross_entropy`` / ``nll_loss`` / their modules with ``reduction="mean"``, the default; ``.mean()`` of a masked
selection), each of which divides by the unmasked labels; ``fixed`` when every division the count reaches is
dominated by a guard and the count escapes nowhere unguarded; ``absent`` when there is no module, class or
forward; ``unknown`` otherwise, with the reason (the count escapes into code that cannot be read, a guard
that covers only some conditions, a shape the reading does not model).

Sound or abstain (issue #30): a vulnerable kernel is never ``fixed``. What the reading does not model makes it
abstain: a forward that may be replaced after its definition (``setattr``, a ``.forward`` store, a class
decorator or metaclass, ``global`` rebinding of the class, a forward decorator other than torch's and functools'
wrappers, ``exec``; ``tamper.py``); a name rebound through ``global`` / ``nonlocal``; ``exec`` / ``eval`` /
``globals()`` on the path; a builtin another distribution's ``import *`` may shadow; a floor below 1 (``1e-8`` is
0 in fp16, ``int(max(n, 0.5))`` is 0); a count stored where the reading loses it (``ctx.d = d``) once something
is divided by a value it cannot name; an unmodelled operation on an unguarded count; data handed to another
distribution's function on the path (it may take a stock mean the reading cannot read). Exceptions leave a ``try``
(and any context manager but torch's, which may swallow them) from every statement, not only its end; any
in-place change (through a view, ``torch.Tensor.fill_(x)``, ``out=``, ``+=``, a call of ours) voids every
expression fact, since views share storage; ``torch.where`` evaluates both arms, so a division in an arm counts
unguarded; functions handed to library code (``map``, ``checkpoint``) are read as called. An ``is None`` test on
a value that cannot be None (a count, a guarded count, a constant) decides its branch, so zoo's
``reduction = "sum" if n_items is not None else "mean"`` with a tensor divisor never takes the mean.

Limits, stated so a verdict can be weighed: the reading is path-insensitive, so a count guarded on one
branch of an ``if`` and not on the other is ``vulnerable`` even when the two conditions are correlated
(the runtime detector then disagrees and the cell reads ``inconsistent``); a guard that only an ``assert``,
a loop body or a compound condition provides gives ``unknown``; a label count spelled other than a ``sum`` /
``count_nonzero`` / ``mean`` over a comparison mask or the size of a masked selection is not recognised as one
(a division by any other sum abstains; one by a product or a length of another kind is not seen); replacement
code is looked for in the modules the reading loads and those the CE module imports, not deeper.

Modules: ``values.py`` (the verdict, the target's names, abstract values), ``syntax.py`` (tables and node
helpers), ``guards.py`` (zero tests and guards), ``modules.py`` (module and name resolution),
``statements.py``, ``expressions.py``, ``calls.py`` and ``operations.py`` (the reading, as mixins of
``Analysis`` in ``analysis.py``), ``forward.py`` (locating the forward), ``tamper.py`` (code that may replace
it after its definition), ``judge.py`` (verdict assembly,
``analyze_source``) and ``readers.py`` (wheel files and the installed package).
"""

from __future__ import annotations

from .judge import analyze_source
from .readers import analyze_files, detect_installed, files_reader, installed_reader, locate_installed
from .values import CE_MODULE, CE_PATH, CE_REL, CLASS_NAME, MAX_DEPTH, MAX_STEPS, ModuleReader, StaticVerdict

__all__ = [
    "CE_MODULE",
    "CE_PATH",
    "CE_REL",
    "CLASS_NAME",
    "MAX_DEPTH",
    "MAX_STEPS",
    "ModuleReader",
    "StaticVerdict",
    "analyze_files",
    "analyze_source",
    "detect_installed",
    "files_reader",
    "installed_reader",
    "locate_installed",
]
