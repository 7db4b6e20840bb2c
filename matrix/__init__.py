"""The harness side of skewmatrix: matrix specs, build sources, cells, envs.

Pipeline (see ``matrix.pipeline``): load matrix -> expand cells -> build envs
-> probe (``probes`` inside each env) -> collect cell JSON -> classify ->
render -> gate (``reports``). Importing any module here must not start uv,
torch or the network: expensive work happens only when a function asks.
"""
