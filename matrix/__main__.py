"""``python -m matrix``: the harness without nox (same pipeline as the sessions).

  python -m matrix cells              list the cell ids of the selected matrix
  python -m matrix run CELL ENV_DIR   build and probe one cell in ENV_DIR
  python -m matrix report             classify and render the collected results
  python -m matrix ci-matrix          stdin: `nox --list --json`; stdout: a GitHub job matrix

Exit codes: 0 done (whatever the cell states), 2 bad input or harness failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from matrix import pipeline
from matrix.errors import SkewmatrixError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matrix", description="skewmatrix harness")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("cells")
    r = sub.add_parser("run")
    r.add_argument("cell")
    r.add_argument("env_dir", type=Path)
    sub.add_parser("report")
    sub.add_parser("ci-matrix")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "cells":
            for cell in pipeline.load_matrix(check_index=False).cells:
                print(cell.id)
        elif args.cmd == "ci-matrix":
            from matrix.ci import from_text

            print(from_text(sys.stdin.read()))
        elif args.cmd == "run":
            pipeline.run_one(args.cell, args.env_dir, create_env=True)
        else:
            pipeline.report()
    except SkewmatrixError as exc:
        if args.debug or os.environ.get("SKEWMATRIX_DEBUG") == "1":
            raise
        print(f"skewmatrix: {exc}", file=sys.stderr)
        return exc.return_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
