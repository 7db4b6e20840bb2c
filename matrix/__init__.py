"""The harness side of skewmatrix: from a matrix file to cell results, and the commands that drive it.

Pipeline (``matrix.pipeline``): load matrix -> expand cells -> build envs ->
probe (``probes`` inside each env) -> collect cell JSON -> classify -> render
-> gate (``reports``). Importing any module here must not start uv, torch or
the network: expensive work happens only when a function asks.

The rooms, each one concept (module names are unique across ``matrix`` and
``reports``):

* the spec and its inputs: ``spec`` (a matrix file, validated on load, with
  ``tables``), ``inputs`` (values that reach uv), ``stacks`` (trainer stacks),
  ``expect`` (expected states), ``shard``, ``settings`` (environment
  variables and paths); data: ``default.toml``, ``stacks.toml``, ``gpu.toml``;
* the build sources and the index: ``sources/`` (one module per kind, and the
  backport builder ``sources/backport_build``; payloads in ``backports/``),
  ``index/`` (the package index client), ``installed`` (what an env holds);
* the env runner: ``envrun`` (build an env, link ``probes``, one clean
  environment, run), used by ``cell`` (one cell: build, install, probe, write
  its JSON), ``mutation``, ``scan/confirm`` and ``gpu/``;
* the pipeline: ``pipeline`` (the run as a readable list), ``collect``
  (reading results back), ``progress``, ``tools`` (uv and git);
* the commands: ``cli`` with ``arguments`` and ``errors`` (the one place that
  turns exceptions into exit codes), and each command's own module:
  ``release_gate``, ``pinned``, ``bench`` (the matrix's and the scan's),
  ``mutation``, ``scan/`` (the wide scan, a room of its own), ``gpu/`` (the
  GPU device check), ``ci`` and ``sessions`` (what CI and nox need).

Generic code here names no check: what a check adds beyond its probes (scan
target, mutation target, GPU measurement) is a capability of its folder,
found through the registry (``probes.checks``).
"""
