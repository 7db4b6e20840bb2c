"""The run as one value: the matrix file (parsed once), the output directory, strict, the run id and the shard.

The command line builds a :class:`Run` once, from the environment the user
set and its own arguments (:func:`from_environ`, :meth:`Run.with_args`), and
hands it down to the pipeline and the commands. Nothing below the command
line reads ``SKEWMATRIX_OUT``, ``SKEWMATRIX_MATRIX``, ``SKEWMATRIX_SHARD``,
``SKEWMATRIX_STRICT`` or ``SKEWMATRIX_RUN_ID`` again, and the harness writes
none of them into its own ``os.environ`` (the noxfile's hand-over to the session
processes of ``nox -j`` aside: see it). The matrix is parsed on first
use (``gate`` and ``pinned`` never need one) and then kept: one parse per run.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from matrix import spec
from matrix.settings import REPO_ROOT
from matrix.spec import settings, shard

TRUE = ("1", "true", "yes")


@dataclass(frozen=True)
class Run:
    """One run of the harness. ``strict`` is the command line's or the environment's; the matrix file's own
    ``[gate] strict`` is added where a report is judged (:attr:`judged_strict`)."""

    matrix_path: Path
    out: Path
    strict: bool = False
    run_id: str = field(default_factory=lambda: str(os.getpid()))
    shard: tuple[int, int] | None = None

    @cached_property
    def matrix(self) -> spec.Matrix:
        """The parsed matrix file: parsed the first time it is asked for, then kept (the value is frozen, the
        parse is not repeated)."""
        return spec.load(self.matrix_path, check_index=False)

    @property
    def cells(self) -> list[spec.Cell]:
        """The matrix's cells, narrowed to this machine's shard."""
        if self.shard is None:
            return list(self.matrix.cells)
        ids = set(shard.select([c.id for c in self.matrix.cells], *self.shard))
        return [c for c in self.matrix.cells if c.id in ids]

    @property
    def judged_strict(self) -> bool:
        return self.strict or self.matrix.strict

    def with_args(self, args: argparse.Namespace) -> Run:
        """This run with a command's own ``-o/--output`` and ``--strict`` (the matrix, if parsed, is kept)."""
        out = getattr(args, "output", None)
        strict = bool(getattr(args, "strict", False))
        if out is None and not strict:
            return self
        changed = replace(self, out=out.resolve() if out is not None else self.out, strict=self.strict or strict)
        if "matrix" in self.__dict__:  # keep the parse: `replace` builds a new value without the cache
            changed.__dict__["matrix"] = self.__dict__["matrix"]
        return changed


def from_environ(environ: Mapping[str, str] | None = None, *, matrix_path: Path | None = None,
                 out: Path | None = None) -> Run:
    """The run the user's environment describes (``SKEWMATRIX_MATRIX``, ``_OUT``, ``_STRICT``, ``_RUN_ID``,
    ``_SHARD``); ``matrix_path`` and ``out`` override the environment's. Parses nothing yet."""
    def get(name: str) -> str:
        return settings.value(name, environ)

    path = matrix_path or Path(get(settings.MATRIX_ENV) or spec.DEFAULT_MATRIX)
    where = out or Path(get(settings.OUT_ENV) or REPO_ROOT / "reports" / "out")
    picked = get(settings.SHARD_ENV)
    return Run(matrix_path=path, out=where.resolve(), strict=get(settings.STRICT_ENV) in TRUE,
               run_id=get(settings.RUN_ID_ENV) or str(os.getpid()), shard=shard.parse(picked) if picked else None)
