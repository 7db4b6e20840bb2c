"""Check ``grpo-normalizer-nan``: zoo's GRPO loss divides 0 by 0 when every completion is masked.

``unsloth_zoo.rl_replacements.grpo_compute_loss`` divides the masked loss sum
by ``num_items_in_batch / num_processes`` for ``loss_type`` ``dapo``,
``cispo`` and ``vespo``; with ``mask_truncated_completions=True`` (which
unsloth turns on for ``dapo``) a TRL that counts tokens after the truncation
mask (TRL >= 1.9) hands it 0 when every completion was cut off, and the loss
is 0 / 0. Its sibling: the logged KL divides each completion's KL by its own
token count, so one fully masked completion makes ``kl`` NaN. Files:
``static.py`` (source reading), ``kernel.py`` (inputs and calls),
``handoff.py`` (the count as unsloth hands it to zoo), ``trainer.py``
(the loss unsloth's generated ``UnslothGRPOTrainer`` really calls: its own
copies of zoo's source), ``phases.py`` (runtime detector, guard probe,
suite), ``suite.py`` (the oracle comparison, on every route),
``train.py`` (a real GRPO run), ``verdict.py``. Capabilities:
``scan.py``, ``render.py``. Stdlib only here.
"""

from __future__ import annotations

from probes.checks import CheckInfo
from probes.checks.capabilities import UNSLOTH_WITH_ZOO

# The guard module our backport ships (matrix/backports/grpo-count-floor), written once.
GUARD_MODULE = "unsloth.grpo_count_floor"

SUBJECT = UNSLOTH_WITH_ZOO  # unsloth x unsloth_zoo wheels from PyPI, git, a path or a backport

INFO = CheckInfo(
    id="grpo-normalizer-nan",
    title="GRPO loss: 0 / 0 when every completion is masked",
    hazard=("zoo's GRPO loss divides by the trainer's token count for loss_type dapo, cispo and vespo; a batch "
            "whose completions are all truncated and masked (count 0) gives a NaN loss and NaN gradients"),
    kernel="unsloth_zoo.rl_replacements.grpo_compute_loss",
    zoo_meaning={
        "vulnerable": "a count of 0 with every completion masked gives a NaN loss (dapo, cispo, vespo)",
        "fixed": "the count is floored: the all-masked loss is finite",
        "absent": "this zoo's GRPO loss never divides by the count",
        "inconsistent": "the static and runtime detectors disagree (investigate)",
        "unknown": "a detector failed or abstained; see the reason",
    },
    guard_meaning={
        "activates": "zoo vulnerable; unsloth floors the count it hands zoo and matches zoo everywhere else",
        "no-ops": "zoo fixed; a count floor is present and changes nothing zoo does",
        "missing": "zoo vulnerable and unsloth hands it the count as it came: 0 / 0 reaches GRPO users",
        "not-needed": "zoo fixed (or never divides by the count) and no guard",
        "broken": "a guard is present but differs from zoo's own loss somewhere other than 0 / 0, or misses a route "
                  "(zoo's module attribute, the generated UnslothGRPOTrainer's own copies of the loss)",
        "error": "the cell could not be built, imported or probed",
    },
    fix_hint=("upgrade unsloth_zoo to 2026.9.8 or later, or use an unsloth build that floors the count it hands "
              "zoo (the `grpo-count-floor` backport)"),
)
