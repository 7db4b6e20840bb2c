"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's GRPO loss, read from a wheel.

The static detector (``static.py``) reads the one module, so the scan reads
only ``unsloth_zoo/rl_replacements.py`` of each release (``absent`` where
there is none, or where ``grpo_compute_loss`` never divides by the count);
``runtime.run`` backs ``--confirm``. The unsloth side is ``n/a``: our guard
is a floor inside unsloth's generated trainer source, not a replaced
attribute the scan's heuristic could recognise.
"""

from __future__ import annotations

from probes.checks.capabilities import ScanTarget, one_file_detect

from . import static

FILE = "unsloth_zoo/" + "/".join(static.REL)


# See ``ScanTarget.detect``: ``static.analyze_source`` on the release's ``rl_replacements.py``.
detect = one_file_detect(FILE, static.analyze_source)


TARGET = ScanTarget(
    package="unsloth_zoo",
    file=FILE,
    function=static.FUNCTION,
    detect=detect,
    detector=static,
    follow_imports=False,
    runtime=__name__.rsplit(".", 1)[0] + ".runtime:run",
)
