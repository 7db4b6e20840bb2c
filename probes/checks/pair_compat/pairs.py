"""This check's pair reader for the history matrix (contract: ``PairTarget``). No torch, no import of the code."""

from __future__ import annotations

from probes.checks.capabilities import PairTarget
from probes.checks.pair_compat import judge, references, symbols

TARGET = PairTarget(
    referrer="unsloth",
    referred="unsloth_zoo",
    references=references.reference_list,
    definitions=symbols.symbol_table,
    prepare=judge.Resolver,
    judge=judge.judge,
    summary=judge.summary,
    verdicts=judge.VERDICTS,
    reader="probes.checks.pair_compat",
)
