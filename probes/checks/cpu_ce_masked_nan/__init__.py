"""Check ``cpu-ce-masked-nan``: zoo's CPU-backend chunked cross-entropy on a fully masked batch.

``unsloth_zoo.cpu.ops.chunked_linear_cross_entropy`` (zoo 2026.10.x, the
kernel unsloth's CPU SFT path uses) divides the summed loss by the caller's
``num_items_in_batch``, else by the count of trainable labels -- and sets
that divisor to NaN when no label is left (README.md#the-evidence). Files:
``static.py`` (source reading), ``kernel.py`` (inputs and calls),
``phases.py`` (runtime detector, guard probe, a short suite), ``verdict.py``.
Stdlib only here.
"""

from __future__ import annotations

from probes.checks import CheckInfo
from probes.checks.capabilities import UNSLOTH_WITH_ZOO, UpstreamFix

SUBJECT = UNSLOTH_WITH_ZOO  # unsloth x unsloth_zoo wheels from PyPI, git, a path or a backport

INFO = CheckInfo(
    id="cpu-ce-masked-nan",
    title="CPU-backend chunked CE: NaN loss on a fully masked batch",
    hazard=("zoo's CPU-backend chunked cross-entropy returns a NaN loss for a batch with no trainable label "
            "when num_items_in_batch is None"),
    kernel="unsloth_zoo.cpu.ops.chunked_linear_cross_entropy",
    zoo_meaning={
        "vulnerable": "an all-masked batch with num_items_in_batch None gives a NaN loss",
        "fixed": "the all-masked loss is finite",
        "absent": "this zoo has no CPU backend kernel (no unsloth_zoo/cpu)",
        "inconsistent": "the static and runtime detectors disagree (investigate)",
        "unknown": "a detector failed; see the reason",
    },
    guard_meaning={
        "activates": "zoo vulnerable; something replaced the kernel and the suite passes",
        "no-ops": "zoo fixed; a replacement is present and behaves like zoo",
        "missing": "zoo vulnerable and nothing guards the kernel: NaN reaches CPU-backend users",
        "not-needed": "zoo fixed, or no CPU backend in this zoo",
        "broken": "the kernel was replaced but a behaviour test fails",
        "error": "the cell could not be built, imported or probed",
    },
    fix_hint=("pass num_items_in_batch (TRL does on its usual route) or use a zoo whose CPU kernel answers an "
              "all-masked batch with 0.0; no guard for this kernel exists yet"),
)

# No zoo release fixes this kernel yet: the wide scan finds it in zoo 2026.10.9 only, vulnerable (``nox -s scan
# -- --check`` with this check's id checks this line against its timeline).
FIX = UpstreamFix(package="unsloth_zoo", release=None)
