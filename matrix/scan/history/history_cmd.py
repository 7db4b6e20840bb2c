"""``skewmatrix history``: parse the options, run (and confirm at runtime with ``--confirm``), write
``history.json``, ``history.md`` and ``history.html``."""

from __future__ import annotations

import argparse
import json
import resource
from pathlib import Path

from matrix.errors import EXIT_OK
from matrix.scan.cache import write_atomic
from matrix.scan.history.history_confirm import DEFAULT_MAX, confirm
from matrix.scan.history.history_page import heatmap, markdown
from matrix.scan.history.history_run import HistoryOptions, run
from matrix.settings import scan_cache_dir


def parser(prog: str = "skewmatrix history") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=(
        "Judge every unsloth x unsloth_zoo release pair of a window from source alone (no install). Default "
        "window: releases uploaded in the last 12 months, on both sides."))
    p.add_argument("--unsloth", default="", metavar="SPEC", help="PEP 440 specifier set of unsloth releases")
    p.add_argument("--zoo", default="", metavar="SPEC", help="PEP 440 specifier set of unsloth_zoo releases")
    p.add_argument("--all", dest="everything", action="store_true", help="every release, not the last 12 months")
    p.add_argument("--workers", type=int, default=6, help="files read at once (default 6)")
    p.add_argument("--offline", action="store_true", help="use the cached index pages")
    p.add_argument("--no-scan", dest="scan", action="store_false",
                   help="leave out the other checks' scan verdicts (each reads every zoo release once more)")
    p.add_argument("--confirm", action="store_true",
                   help="confirm the boundary pairs and one pair per equivalence class at runtime: each installed "
                        "into a throwaway env and imported on CPU (see --confirm-max)")
    p.add_argument("--confirm-max", type=int, default=DEFAULT_MAX, metavar="N",
                   help=f"pairs confirmed at most, newest first (default {DEFAULT_MAX})")
    p.add_argument("-o", "--output", type=Path, default=None, help="output folder (default reports/out)")
    return p


def write(doc: dict, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = [folder / "history.json", folder / "history.md", folder / "history.html"]
    write_atomic(out[0], json.dumps(doc, indent=1))
    write_atomic(out[1], markdown(doc))
    write_atomic(out[2], heatmap(doc))
    return out


def main(argv: list[str], out: Path) -> int:
    args = parser().parse_args(argv)
    doc = run(HistoryOptions(unsloth=args.unsloth, zoo=args.zoo, everything=args.everything,
                             workers=args.workers, offline=args.offline, scan=args.scan))
    if args.confirm:
        doc = confirm(doc, max_n=args.confirm_max, cache=scan_cache_dir(), log=print)
    doc["stats"]["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB
    for path in write(doc, args.output or out):
        print(f"wrote {path}")
    for line in doc["lines"][-5:]:
        print(line)
    return EXIT_OK
