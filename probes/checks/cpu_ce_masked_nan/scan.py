"""This check's scan target (contract: ``probes/checks/__init__.py``): zoo's CPU-backend chunked CE, from a wheel.

The static detector (``static.py``) reads the one module, so the scan reads
only ``unsloth_zoo/cpu/ops.py`` of each release (``absent`` where there is
none: the releases before zoo's CPU backend). No guard for this kernel
exists, so the unsloth side of the scan is ``n/a``; ``--confirm`` is ``n/a``
too (the runtime detector runs inside a cell's raw probe process only).
"""

from __future__ import annotations

from probes.checks.capabilities import one_file_target

from . import static

TARGET = one_file_target(static)
