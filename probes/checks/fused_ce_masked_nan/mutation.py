"""This check's mutation target (contract: ``probes/checks/__init__.py``): our guard against the behaviour suite.

The guard under test is the ``unsloth-guard`` backport's payload, loaded
under the check's default guard module; ``mutate.py`` runs every mutant in
one cell env of the vulnerable pairing; ``mutation_equivalents.toml`` (next
to this file) lists the survivors no test can kill, one line of argument
each. Survivors run again where zoo carries the fix (test 13), then on a
zoo fixed for one count form only (a test backport).
"""

from __future__ import annotations

from probes.checks.capabilities import MutationTarget

from . import GUARD_MODULE

PACKAGE = __name__.rsplit(".", 1)[0]

TARGET = MutationTarget(
    runner=f"{PACKAGE}.mutate",
    guard_file="matrix/backports/unsloth-guard/files/fused_ce_guard.py",
    guard_module=GUARD_MODULE,
    equivalents=PACKAGE.replace(".", "/") + "/mutation_equivalents.toml",
    # The vulnerable pairing: new unsloth with an old zoo, forced with overrides as a cell would be.
    unsloth="2026.10.9",
    zoo="2026.9.3",
    survivor_zoos=(
        # A zoo that carries the fix: a guard must stay out there (test 13), which no vulnerable cell can see.
        "2026.10.9",
        # The vulnerable zoo floored for n_items None only (NaN for a count of 0): the guard must answer the
        # count form zoo NaNs on and leave the other to zoo, which no pairing that answers both alike can see.
        "tests/backports/zoo-fix-none-only",
    ),
)
