"""``python -m matrix``: the same command line as the ``skewmatrix`` console script (``matrix.cli``)."""

from __future__ import annotations

import sys

from matrix.cli import main

if __name__ == "__main__":
    sys.exit(main())
