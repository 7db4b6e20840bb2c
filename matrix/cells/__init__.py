"""A run's cells: the run value, the pipeline over its cells, one cell's steps, and reading results back."""
