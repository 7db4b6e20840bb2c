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

Recognised guards: ``clamp``/``clamp_min``/``clip`` with a positive floor; builtin ``max`` with a positive
argument; ``torch.max``/``torch.maximum``/``fmax`` against a positive tensor (``torch.ones_like(d)``);
``torch.where``/``masked_fill``/conditional expressions that replace a zero with a positive value; an ``if``
on ``== 0`` / ``<= 0`` / ``not ...`` (or the positive forms) of the divisor or of the count whose zero branch
returns, raises or replaces the divisor; any helper whose body does one of those on every return path.

Verdicts: ``vulnerable`` when an unguarded count (the label count or the caller's) reaches a division
(``/``, ``//``, ``%``, ``div``, ``reciprocal``, ...); ``fixed`` when every division the count reaches is
dominated by a guard and the count escapes nowhere unguarded; ``absent`` when there is no module, class or
forward; ``unknown`` otherwise, with the reason (the count escapes into code that cannot be read, a guard
that covers only some conditions, a shape the reading does not model).

Limits, stated so a verdict can be weighed: the reading is path-insensitive, so a count guarded on one
branch of an ``if`` and not on the other is ``vulnerable`` even when the two conditions are correlated
(the runtime detector then disagrees and the cell reads ``inconsistent``); a guard that only an ``assert``,
a loop body or a compound condition provides gives ``unknown``. An in-place change of a guarded count
(``d.zero_()``, also through an alias or a helper) voids the guard; an in-place change of the labels after a
zero test on the count expression voids that test when it is made through the same name or a call of ours,
not through an alias of the labels.

Modules: ``values.py`` (the verdict, the target's names, abstract values), ``syntax.py`` (tables and node
helpers), ``guards.py`` (zero tests and guards), ``modules.py`` (module and name resolution),
``statements.py``, ``expressions.py``, ``calls.py`` and ``operations.py`` (the reading, as mixins of
``Analysis`` in ``analysis.py``), ``forward.py`` (locating the forward), ``judge.py`` (verdict assembly,
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
