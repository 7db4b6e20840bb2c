"""``source = "pypi"``: a released version from the configured index.

Keys: ``version`` (required, a PEP 440 version). Existence on the index is
checked by the spec loader when it is given an index client, so a typo is a
load error listing the nearest existing versions, not a failed cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from packaging.version import InvalidVersion, Version

from matrix.sources.interface import BuildSource, Materialized


@dataclass(frozen=True)
class PypiSource(BuildSource):
    KIND: ClassVar[str] = "pypi"
    KEYS: ClassVar[dict[str, type]] = {"version": str}
    REQUIRED: ClassVar[tuple[str, ...]] = ("version",)

    version: str = ""

    def problems(self, where: str) -> list[str]:
        try:
            Version(self.version)
        except InvalidVersion:
            return [f"{where}: version {self.version!r} is not a valid PEP 440 version (e.g. '2026.10.9')"]
        return []

    def describe(self) -> str:
        return f"pypi {self.version}"

    def version_hint(self) -> str | None:
        return self.version

    def materialize(self, workdir: Path) -> Materialized:
        pin = f"{self.package}=={self.version}"
        return Materialized(requirement=pin, pin=pin, digest=None, details={"index_version": self.version})
