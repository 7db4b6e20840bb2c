"""The one table of the harness's settings: every ``SKEWMATRIX_*`` variable, its flag, its default, and who sets it.

A setting is the default of a command-line flag where it has one (``-o/--output`` defaults to
``$SKEWMATRIX_OUT``); the run's own (output directory, strict, run id, shard, matrix) are read once, into the
run value (``matrix.cells.runs.from_environ``), and everything below the command line takes that value. The
others are read where they are needed, through :func:`value`, the one reader: a name that is not in
:data:`SETTINGS` is a ``KeyError``, and ``tests/test_layout.py`` fails on a ``SKEWMATRIX_*`` literal anywhere
else in the harness. ``docs/commands.md`` carries :func:`markdown_table` (a test keeps it equal). The probes
read none of them: what a probe needs arrives on its command line (``probes.handoff``). Nothing here starts a
tool or touches the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from matrix import REPO_ROOT


@dataclass(frozen=True)
class Setting:
    """One environment variable of the harness."""

    name: str
    flag: str  # the flag it is the default of ("" where none)
    default: str  # in words
    meaning: str
    internal: bool = False  # set by the harness for its own child processes, never by a user


SETTINGS: tuple[Setting, ...] = (
    Setting("SKEWMATRIX_MATRIX", "`validate FILE`", "`matrix/default.toml`", "the matrix file every command reads"),
    Setting("SKEWMATRIX_OUT", "`-o/--output`", "`reports/out/`", "the output directory"),
    Setting("SKEWMATRIX_SHARD", "", "all cells", "`K/N`: run shard K of N of the cells (CI's per-job split)"),
    Setting("SKEWMATRIX_STRICT", "`--strict`", "off", "`1`: a latent finding fails the gate too"),
    Setting("SKEWMATRIX_DEBUG", "`--debug`", "off", "`1`: tracebacks with the one-line errors"),
    Setting("SKEWMATRIX_CACHE", "`--cache` (scan)", "`~/.cache/skewmatrix/scan`",
            "the scan's and the history's persistent cache (index pages, wheel reads, resolutions)"),
    Setting("SKEWMATRIX_WHEEL_CACHE", "", "`~/.cache/skewmatrix/wheels`",
            "where built backport wheels are kept by their content digest"),
    Setting("SKEWMATRIX_MIN_FREE_GB", "", "`6`", "the free disk a cell needs before it is built (GB)"),
    Setting("SKEWMATRIX_TICK", "", "`15`", "seconds between the \"still ...\" progress lines"),
    Setting("SKEWMATRIX_DIFF_EXAMPLES", "", "the suite's own (48)", "how many examples a check's property-based "
            "(differential) suite generates in every cell; handed to the probes as `--examples`"),
    Setting("SKEWMATRIX_DIFF_SEED", "", "the suite's own", "the seed of those examples; handed to the probes as "
            "`--seed`"),
    Setting("SKEWMATRIX_RUN_ID", "", "the process id", "the run's id: the session processes of `nox -j` share "
            "the output directory's lock and their [k/N] count by it", internal=True),
    Setting("SKEWMATRIX_PROGRESS", "", "unset", "`RUN N`: how many cells the run has, for the [k/N] lines of "
            "`nox -j`'s session processes", internal=True),
    Setting("SKEWMATRIX_FANIN", "", "unset", "the run id when `nox -s matrix` was asked for, so its cells defer "
            "their failures to it", internal=True),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}

# The names the rest of the harness imports (each is in SETTINGS).
MATRIX_ENV = "SKEWMATRIX_MATRIX"
OUT_ENV = "SKEWMATRIX_OUT"
SHARD_ENV = "SKEWMATRIX_SHARD"
STRICT_ENV = "SKEWMATRIX_STRICT"
DEBUG_ENV = "SKEWMATRIX_DEBUG"
CACHE_ENV = "SKEWMATRIX_CACHE"
WHEEL_CACHE_ENV = "SKEWMATRIX_WHEEL_CACHE"
MIN_FREE_ENV = "SKEWMATRIX_MIN_FREE_GB"
TICK_ENV = "SKEWMATRIX_TICK"
EXAMPLES_ENV = "SKEWMATRIX_DIFF_EXAMPLES"
SEED_ENV = "SKEWMATRIX_DIFF_SEED"
RUN_ID_ENV = "SKEWMATRIX_RUN_ID"
PROGRESS_ENV = "SKEWMATRIX_PROGRESS"
FANIN_ENV = "SKEWMATRIX_FANIN"

__all__ = [
    "BY_NAME",
    "CACHE_ENV",
    "DEBUG_ENV",
    "EXAMPLES_ENV",
    "FANIN_ENV",
    "MATRIX_ENV",
    "MIN_FREE_ENV",
    "OUT_ENV",
    "PROGRESS_ENV",
    "REPO_ROOT",
    "RUN_ID_ENV",
    "SEED_ENV",
    "SETTINGS",
    "SHARD_ENV",
    "STRICT_ENV",
    "TICK_ENV",
    "WHEEL_CACHE_ENV",
    "Setting",
    "markdown_table",
    "names",
    "scan_cache_dir",
    "value",
]


def value(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The setting's value, stripped ("" when unset); ``KeyError`` for a name that is not in the table."""
    setting = BY_NAME[name]
    env = os.environ if environ is None else environ
    return env.get(setting.name, "").strip()


def names() -> tuple[str, ...]:
    """Every setting's variable: what a process the harness starts in an env must not inherit."""
    return tuple(s.name for s in SETTINGS)


def scan_cache_dir() -> Path:
    """The scan's persistent cache: ``$SKEWMATRIX_CACHE``, else ``~/.cache/skewmatrix/scan``."""
    got = value(CACHE_ENV)
    return Path(got).expanduser() if got else Path.home() / ".cache" / "skewmatrix" / "scan"


def markdown_table() -> str:
    """The table as ``docs/commands.md`` shows it."""
    rows = ["| variable | flag it is the default of | default | what it sets |", "|---|---|---|---|"]
    for s in SETTINGS:
        meaning = s.meaning + (" (set by the harness for its own processes)" if s.internal else "")
        rows.append(f"| `{s.name}` | {s.flag or '-'} | {s.default} | {meaning} |")
    return "\n".join(rows)
