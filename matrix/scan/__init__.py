"""The wide scan: every zoo and unsloth release on the index, classified without installing anything.

The scan reads for one registered check that declares a scan target
(``--check ID``; default, the first in registry order). For each
``unsloth_zoo`` release it reads the target's kernel file (and, if the
target follows imports, the modules it reaches) straight out of the wheel
(or the sdist when there is no wheel) and hands them to the target's static
detector; for each ``unsloth`` release it reads the core metadata (the
admitted zoo range and its floor) and looks for the target's guard (``n/a``
when it names none). ``--confirm`` builds the boundary releases (and the ones the static
detector could not decide) and runs the runtime detector on them. Modules,
one concern each:

* ``terms``: the scan's errors, what it wants out of a file and what an extract holds;
* ``run``: the orchestration and ``ScanOptions``; ``[k/N]`` progress;
* ``policy``: release policy, the timeline with ``fixed_since``, floors, exposure, ``recommended_zoo``;
* ``cache``: the persistent cache (pages, extracts, analyses) and atomic 0644 writes;
* ``fetch``: reading members out of files (whole downloads, or range reads through ``zipfile``);
* ``zoo`` / ``unsloth``: which check is scanned, what each side reads and how it is analysed (AST
  heuristics for unsloth);
* ``confirm``: runtime confirmation in throwaway envs;
* ``compare``: the scan against cell results;
* ``command``: ``skewmatrix scan`` (``main(argv) -> int``); its benchmark is ``matrix.cli.bench.scan``.

Output: ``scan.json`` (schema ``reports/scan.schema.json``) and ``scan.md``
(``reports.render.scan_markdown``). Nothing here imports ``matrix.cells.pipeline``.
"""

from matrix.scan.cache import ScanIndex, write_atomic
from matrix.scan.command import main, summary, write
from matrix.scan.compare import compare_with_cells
from matrix.scan.fetch import FULL_DOWNLOAD_MAX, Fetcher, record_digest
from matrix.scan.policy import Recommendation, admitted_floor, exposure, recommended_zoo, timeline
from matrix.scan.run import ScanOptions, analyzer_key, run
from matrix.scan.terms import SCHEMA, Extract, FetchError, ScanError, Want
from matrix.scan.unsloth import INIT_MEMBER, guard_in_source, guard_state, zoo_requirements
from matrix.scan.zoo import Scanned, classify_zoo, scanned

__all__ = [
           "FULL_DOWNLOAD_MAX",
           "INIT_MEMBER",
           "SCHEMA",
           "Extract",
           "FetchError",
           "Fetcher",
           "Recommendation",
           "ScanError",
           "ScanIndex",
           "ScanOptions",
           "Scanned",
           "Want",
           "admitted_floor",
           "analyzer_key",
           "classify_zoo",
           "compare_with_cells",
           "exposure",
           "guard_in_source",
           "guard_state",
           "main",
           "recommended_zoo",
           "record_digest",
           "run",
           "scanned",
           "summary",
           "timeline",
           "write",
           "write_atomic",
           "zoo_requirements",
]
