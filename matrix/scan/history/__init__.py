"""The history matrix: every unsloth release x every zoo release of a window, judged from source alone.

``skewmatrix history`` / ``nox -s history -- --unsloth SPEC --zoo SPEC [--all] [--floor-only]``. The pair reader
comes from the registry (the first check that declares ``pairs.py``); releases are listed and read through the scan's
index client, fetcher and cache (``matrix.scan``), one analysis per release digest. Modules:

* ``readers``: the window and reading each release once;
* ``metadata_caps``: floors, the floor-only plain-install pick, zoo's caps;
* ``plain_install``: what a plain install gets today, from ``uv pip compile`` (cached per release and index state);
* ``grid``: every pair, equivalence classes, the one line per unsloth release;
* ``hazards``: the other checks' scan verdicts per zoo release and guards per unsloth release;
* ``atlas``: one line per unsloth release, every source merged along the zoo axis;
* ``history_run``: the run as one document; ``history_page``: Markdown and the HTML heatmap;
* ``history_cmd``: the command (``main(argv) -> int``);
* ``structural``: the gate's and pinned's structural verdict for one unsloth release.
* ``history_confirm``: ``--confirm``, the boundary pairs and one pair per class installed and imported on CPU;
* ``history_bench``: ``nox -s bench -- history``, the cold and the warm history against their targets.
"""

from matrix.scan.history.history_cmd import main
from matrix.scan.history.history_run import HistoryOptions, run
from matrix.scan.history.structural import structural_gate, structural_line

__all__ = ["HistoryOptions", "main", "run", "structural_gate", "structural_line"]
