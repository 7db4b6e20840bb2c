"""The GPU device check (issue 14): an offline wheelhouse, an in-place runner, a dtype/optimizer measurement."""
