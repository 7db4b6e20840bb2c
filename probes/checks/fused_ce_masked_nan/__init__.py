"""Check ``fused-ce-masked-nan``: zoo's fused lm_head + cross-entropy on a fully masked microbatch.

``UnslothFusedLoss.forward`` divides the summed loss by "the caller's
``n_items``, else the count of trainable labels"; a microbatch with no
trainable label and a divisor of None or 0 gives a NaN loss (see
README.md#the-evidence). Detectors: ``static/`` (AST of the installed source) and
``runtime.py`` (the raw kernel, without unsloth); ``guard.py`` (who owns the
forward after ``import unsloth``); ``behavior/`` (the suite); ``train.py``
(a real training run); ``verdict.py`` (the states). Capabilities: ``scan.py``
(the wide scan's target), ``mutation.py`` (the guard's mutation target, with
``equivalents.toml``), ``render.py`` (the drill-down of its steps), ``gpu.py``
and ``gpu_measure.py`` (the GPU device check). Stdlib only here.
"""

from __future__ import annotations

from probes.checks import CheckInfo
from probes.checks.capabilities import UNSLOTH_WITH_ZOO, UpstreamFix

# The guard protocol module a guard build ships (our backport's ``unsloth/fused_ce_guard.py``), written once:
# the behaviour suite, the probes, the mutation runner, the scan and the GPU measurement all read it here.
GUARD_MODULE = "unsloth.fused_ce_guard"

SUBJECT = UNSLOTH_WITH_ZOO  # unsloth x unsloth_zoo wheels from PyPI, git, a path or a backport

INFO = CheckInfo(
    id="fused-ce-masked-nan",
    title="fused CE: NaN loss on a fully masked microbatch",
    hazard=("zoo's fused cross-entropy divides by the count of trainable labels; a fully masked microbatch with "
            "n_items None or 0 gives a NaN loss, and the logged loss stays NaN for the rest of the run"),
    kernel="unsloth_zoo.fused_losses.cross_entropy_loss.UnslothFusedLoss",
    zoo_meaning={
        "vulnerable": "an all-masked microbatch with n_items None gives a NaN loss",
        "fixed": "the zero divisor is guarded: the all-masked loss is finite",
        "absent": "this zoo has no fused cross-entropy kernel",
        "inconsistent": "the static and runtime detectors disagree (investigate)",
        "unknown": "a detector failed; see the reason",
    },
    guard_meaning={
        "activates": "zoo vulnerable; a guard replaced the forward, the suite passes and training stays clean",
        "no-ops": "zoo fixed; a guard is present and left the forward untouched",
        "missing": "zoo vulnerable and nothing replaced the forward: NaN reaches users",
        "not-needed": "zoo fixed (or no fused CE) and no guard",
        "broken": "a guard is present but a behaviour test or the training run fails",
        "error": "the cell could not be built, imported or probed",
    },
    fix_hint=("upgrade unsloth_zoo to a release that carries the fix, or use an unsloth build whose guard "
              "activates (the `unsloth-guard` backport)"),
)

# The fix upstream: zoo 2026.10.6 is the first release whose forward counts an all-masked microbatch as 1
# (``_nonzero_count``), read by the wide scan in every release (``nox -s scan``, which checks this line against
# its timeline). No pull request is recorded here: the release is what users can install.
FIX = UpstreamFix(package="unsloth_zoo", release="2026.10.6",
                  title="the divisor of an all-masked microbatch is 1, so its loss is 0, not 0 / 0")
