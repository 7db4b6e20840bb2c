# expect: unknown -- re-exported from a module that is not among the files
# ruff: noqa
from unsloth_zoo.fused_losses.gone import UnslothFusedLoss
