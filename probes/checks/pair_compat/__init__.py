"""Check ``pair-compat``: does this unsloth release work with this zoo release at all?

unsloth declares only a zoo floor, so a plain install pairs every unsloth with the newest zoo, and
``--no-deps``, pins and git installs pair it with older ones. This check resolves every reference from
unsloth's source to zoo (``references.py``) against the zoo release's own definitions (``symbols.py``) and
judges the pair (``judge.py``: compatible, degraded, incompatible or unknown, with evidence), reads both
wheels' metadata (``metadata.py``), and in a cell records ``import unsloth`` with its whole exception chain
(``phases.py``). ``pairs.py`` is its pair reader for the history matrix. Stdlib only here.
"""

from __future__ import annotations

from probes.checks import CheckInfo
from probes.checks.capabilities import UNSLOTH_WITH_ZOO

SUBJECT = UNSLOTH_WITH_ZOO

INFO = CheckInfo(
    id="pair-compat",
    title="Structural compatibility: unsloth's references into zoo",
    hazard=("unsloth imports or uses a zoo name that the installed zoo release does not define, so `import "
            "unsloth` fails (cannot import name ...) or a feature breaks when called"),
    kernel="unsloth.zoo_import_surface",
    zoo_meaning={
        "vulnerable": "an import-time reference of unsloth into zoo is missing: `import unsloth` fails",
        "fixed": "every reference resolves, or only references inside functions or try blocks break",
        "absent": "no unsloth or no zoo source to read",
        "inconsistent": "the static verdict and the runtime import disagree (investigate)",
        "unknown": "a reference cannot be decided statically, or a reader failed; see the reason",
    },
    guard_meaning={
        "activates": "n/a for this check",
        "no-ops": "n/a for this check",
        "missing": "the pair is incompatible: `import unsloth` fails on a missing zoo name",
        "not-needed": "the pair is compatible (or degraded: features named in the evidence break when used)",
        "broken": "the static reading says compatible but `import unsloth` failed on a zoo name",
        "error": "the cell could not be built or probed",
    },
    fix_hint="install a zoo release at or above the one unsloth's references need (see the history's line)",
)
