"""Check ``nanochat-sft-masked-nan``: nanochat's SFT loop on a micro-batch whose targets are all ``-1``.

nanochat's issue #590: ``scripts/chat_sft.py`` logs ``loss: nan`` at a small
``--device-batch-size``, because a micro-batch whose targets are all ``-1``
(user tokens, padding, a conversation truncated before its answer) reaches
``F.cross_entropy(..., ignore_index=-1, reduction="mean")`` in
``nanochat/gpt.py``: 0 / 0. The subject is a nanochat source tree (a git ref
or a path) in an env made from its own ``pyproject.toml``; nothing here
imports unsloth (every step is a raw step).

Files: ``source.py`` (where the tree is), ``static.py`` / ``static_loop.py``
(the model's loss and the loop, read by AST), ``model.py`` (a tiny ``GPT``
from the tree), ``loop.py`` (the script's own micro-step loop, lifted by AST
and run on the tiny model), ``suite.py`` (behaviour tests), ``corpus.py`` /
``fixtures.py`` (offline stand-ins built with nanochat's own code),
``launcher.py`` / ``train.py`` (the real ``chat_sft.py`` run), ``phases.py``,
``verdict.py``. Stdlib only here.
"""

from __future__ import annotations

from probes.checks import CheckInfo
from probes.checks.capabilities import Subject, UpstreamFix

# What this check is about, as data (the matrix builds its axes from it): the package under test is a
# source tree (a git ref, a path or a backport of one), not a PyPI release. Its env is the tree's own
# [project].dependencies plus the "cpu" extra (runs/runcpu.sh: `uv sync --extra cpu`; it brings setuptools,
# which torch.compile's CPU backend needs), with `uv --no-sources`: the extra's torch index is out of reach
# and PyPI's torch runs on CPU. The project itself is not installed (no build-system; setuptools refuses its
# flat layout): the probes get the tree as `--tree nanochat=PATH` (else find it through an importable
# ``nanochat``). The run uses ``python -P`` (3.11+); nanochat itself allows 3.10.
SUBJECT = Subject({"nanochat": "nanochat"}, tree="nanochat", extras=("cpu",),
                  tree_needs=("nanochat/gpt.py", "scripts/chat_sft.py", "pyproject.toml"))
SOURCE = {"package": "nanochat", "tree": SUBJECT.tree}

INFO = CheckInfo(
    id="nanochat-sft-masked-nan",
    title="nanochat SFT: NaN loss on a micro-batch with no valid target",
    hazard=("nanochat's chat_sft.py logs loss: nan when a micro-batch has every target -1, because "
            "GPT.forward's mean cross-entropy divides by zero valid targets"),
    kernel="nanochat.gpt.GPT",
    zoo_meaning={
        "vulnerable": "GPT.forward returns NaN for an all -1 target batch (reduction mean)",
        "fixed": "GPT.forward returns a finite loss for an all -1 target batch",
        "absent": "not used: every nanochat tree has GPT.forward",
        "inconsistent": "the static and runtime detectors disagree about GPT.forward (investigate)",
        "unknown": "a detector failed or no nanochat source tree was found; see the reason",
    },
    guard_meaning={
        "activates": "the model NaNs, the tree's SFT loop handles the all-masked micro-batch, suite and run clean",
        "no-ops": "the model is fixed and the loop also guards; suite and run clean",
        "missing": "the model NaNs and nothing in the loop handles it: NaN reaches the logged loss",
        "not-needed": "the model is fixed, the loop does nothing special; suite and run clean",
        "broken": "a fix is present but turns the NaN into a crash, still logs NaN, or changes other callers",
        "error": "the tree could not be found, built, imported or probed",
    },
    fix_hint=("make the all-masked micro-batch contribute a zero loss that still has a grad_fn (or skip it and "
              "still step the optimizer safely), keep reduction='sum'/'none' unchanged, and log a finite loss"),
)

# No nanochat release carries a fix: the three fix PRs for issue #590 are open (the bundle in
# ../shared/fixtures holds their heads, and the integration test runs each).
FIX = UpstreamFix(package="nanochat", release=None,
                  prs=("karpathy/nanochat#619", "karpathy/nanochat#623", "karpathy/nanochat#662"), prs_state="open",
                  title="a fully masked micro-batch contributes a zero loss (or is skipped) instead of 0 / 0")
