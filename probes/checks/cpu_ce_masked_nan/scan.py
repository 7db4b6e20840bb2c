"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's CPU-backend chunked CE, from a wheel.

The static detector (``static.py``) reads the one module, so the scan reads
only ``unsloth_zoo/cpu/ops.py`` of each release (``absent`` where there is
none: the releases before zoo's CPU backend). No guard for this kernel
exists, so the unsloth side of the scan is ``n/a``; ``--confirm`` is ``n/a``
too (the runtime detector runs inside a cell's raw probe process only).
"""

from __future__ import annotations

from probes.checks.capabilities import ScanTarget, one_file_detect

from . import static

FILE = "unsloth_zoo/" + "/".join(static.REL)


# See ``ScanTarget.detect``: ``static.analyze_source`` on the release's ``cpu/ops.py``.
detect = one_file_detect(FILE, static.analyze_source)


TARGET = ScanTarget(
    package="unsloth_zoo",
    file=FILE,
    function=static.FUNCTION,
    detect=detect,
    detector=static,
    follow_imports=False,
)
