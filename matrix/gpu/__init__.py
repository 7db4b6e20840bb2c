"""The GPU device check: a check's GPU measurement on an offline CUDA machine, installing nothing into its Python.

Which check: one that declares a GPU measurement (``gpu.py`` in its folder,
``probes.checks.GpuMeasure``), named with ``--check`` or the only (first)
one. Its cases (one unsloth build on one zoo build each) come with their
exact wheels; here, with the index, ``wheelhouse`` downloads them into an
offline wheelhouse with a manifest; there, ``check`` installs each case's
wheels with ``pip install --no-deps --target`` into a scratch folder next to
the machine's own torch (``interpreter``) and, all cases at once, runs the
harness's own cell step and the check's measurement in that interpreter
(``cells``), through the one env runner (``matrix.envs.envrun``). Each case and
compile mode becomes one cell JSON whose ``gpu`` key holds the measurement,
declared by the measurement's matrix file, so ``SKEWMATRIX_MATRIX=<that file>
nox -s report -- CPU_DIR OUT`` renders the GPU rows next to the CPU ones.

Commands: ``skewmatrix gpu-wheelhouse`` (here) and ``skewmatrix gpu-check``
(there; ``python3 -m matrix gpu-check``), each through ``matrix.cli``.
"""

from __future__ import annotations

from matrix.errors import SkewmatrixError
from probes import checks
from probes.checks import GpuMeasure


class GpuCheckError(SkewmatrixError):
    """The GPU check cannot run at all (as opposed to a cell that records a failure)."""


def chosen(check: str = "") -> tuple[str, GpuMeasure]:
    """(check id, its GPU measurement): the check named, or the first registered one that declares one."""
    try:
        name = checks.pick("gpu", check)
    except checks.PickError as exc:
        raise GpuCheckError(str(exc)) from None
    return checks.info(name).id, checks.capability(name, "gpu")
