"""Tests of the GPU device check (issue 14; the runner is matrix/gpu, the measurement the check's gpu.py)."""
