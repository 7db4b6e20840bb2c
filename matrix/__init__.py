"""The harness side of skewmatrix: from a matrix file to cell results, and the commands that drive it.

Pipeline (``matrix.cells.pipeline``): load matrix -> expand cells -> build envs ->
probe (``probes`` inside each env) -> collect cell JSON -> classify -> render
-> gate (``reports``). Importing any module here must not start uv, torch or
the network: expensive work happens only when a function asks.

The rooms, each one concept (module names are unique across ``matrix`` and
``reports``; each entry opens with a one-line docstring):

* ``cli/``: the command line (one argparse tree; ``errors`` owns the exit
  codes and their table) and the thin commands ``release_gate``, ``pinned``,
  ``bench``, with ``ci`` and ``sessions`` (what CI and nox need);
* ``errors``: every harness error, each with its exit code, the exit table and
  the one parser factory; ``settings``: beside it, the one table of the
  ``SKEWMATRIX_*`` settings and their one reader;
* ``spec/``: a matrix file, validated on load (``tables``, ``axes``,
  ``inputs``, ``stacks``, ``expect``, ``shard``, ``trees``);
  data: ``default.toml``, ``stacks.toml``, ``nanochat.toml``, ``gpu.toml``;
* ``cells/``: the run as a value (``runs``), the pipeline over its cells
  (``pipeline``), one cell's steps (``cell``), what an env holds
  (``installed``), reading results back (``collect``), ``progress``;
* ``envs/``: the one env runner (``envrun``) and the tools it drives
  (``tools``: uv, git), with the one result type;
* ``sources/`` (one module per build kind; payloads in ``backports/``),
  ``index/`` (the package index client);
* ``mutation/``, ``scan/``, ``gpu/``: the mutation run, the wide scan and the
  GPU device check, each a room of its own.

Generic code here names no check: what a check adds beyond its probes (scan
target, mutation target, GPU measurement) is a capability of its folder,
found through the registry (``probes.checks``).
"""

from __future__ import annotations

from pathlib import Path

# The repository root: the one definition (a leaf: every room may import it without importing another room).
REPO_ROOT = Path(__file__).resolve().parents[1]
