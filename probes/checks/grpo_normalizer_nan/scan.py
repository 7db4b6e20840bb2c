"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's GRPO loss, read from a wheel.

The static detector (``static.py``) reads the one module, so the scan reads
only ``unsloth_zoo/rl_replacements.py`` of each release (``absent`` where
there is none, or where ``grpo_compute_loss`` never divides by the count);
``runtime.run`` backs ``--confirm``. The unsloth side is ``n/a``: our guard
is a floor inside unsloth's generated trainer source, not a replaced
attribute the scan's heuristic could recognise.
"""

from __future__ import annotations

from probes.checks.capabilities import one_file_target

from . import static

TARGET = one_file_target(static, runtime=__name__.rsplit(".", 1)[0] + ".runtime:run")
