"""``skewmatrix history``: parse the options, run (and confirm at runtime with ``--confirm``), write
``history.json``, ``history.md`` and ``history.html``."""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
from collections.abc import Iterator
from pathlib import Path

from matrix.errors import EXIT_OK, command_parser, parse
from matrix.scan.cache import write_atomic
from matrix.scan.history import atlas
from matrix.scan.history.history_confirm import DEFAULT_MAX, confirm
from matrix.scan.history.history_page import headline, heatmap, markdown
from matrix.scan.history.history_run import HistoryOptions, run
from matrix.settings import scan_cache_dir


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # ru_maxrss: KiB on Linux


def parser(prog: str = "skewmatrix history") -> argparse.ArgumentParser:
    p = command_parser("history", prog=prog, description=(
        "Judge every unsloth x unsloth_zoo release pair of a window from source alone (no install). Default "
        "window: releases uploaded in the last 12 months, on both sides."))
    p.add_argument("--unsloth", default="", metavar="SPEC", help="PEP 440 specifier set of unsloth releases")
    p.add_argument("--zoo", default="", metavar="SPEC", help="PEP 440 specifier set of unsloth_zoo releases")
    p.add_argument("--all", dest="everything", action="store_true", help="every release, not the last 12 months")
    p.add_argument("--workers", type=int, default=6, help="files read at once (default 6)")
    p.add_argument("--offline", action="store_true", help="use the cached index pages")
    p.add_argument("--no-scan", dest="scan", action="store_false",
                   help="leave out the other checks' scan verdicts (each reads every zoo release once more)")
    p.add_argument("--floor-only", dest="resolve", action="store_false",
                   help="what a plain install gets without uv: the newest zoo above unsloth's floor (ignores TRL and "
                        "transformers caps; labelled floor-only). Default: `uv pip compile unsloth==X` per release, "
                        "cached per release and index state")
    p.add_argument("--confirm", action="store_true",
                   help="confirm the boundary pairs and one pair per equivalence class at runtime: each installed "
                        "into a throwaway env and imported on CPU (see --confirm-max)")
    p.add_argument("--confirm-max", type=int, default=DEFAULT_MAX, metavar="N",
                   help=f"pairs confirmed at most, newest first (default {DEFAULT_MAX})")
    p.add_argument("--confirm-spread", type=int, default=0, metavar="N",
                   help="also confirm N equivalence classes spread evenly over the window (not only the newest); "
                        "history.json's confirm block counts the classes confirmed and why each other one is not")
    p.add_argument("-o", "--output", type=Path, default=None, help="output folder (default reports/out)")
    return p


def json_chunks(doc: dict) -> Iterator[str]:
    """``doc`` as JSON in pieces, each long list item by item: encoding an ``--all`` document (50,000 pairs, about
    100 MB) in one string would double the run's peak memory."""
    yield "{"
    for i, (key, value) in enumerate(doc.items()):
        yield ("," if i else "") + json.dumps(key) + ":"
        if isinstance(value, list) and len(value) > 100:
            yield "[" + ",".join(json.dumps(x) for x in value[:1])
            for x in value[1:]:
                yield "," + json.dumps(x)
            yield "]"
        else:
            yield json.dumps(value)
    yield "}\n"


def write_json(path: Path, doc: dict) -> None:
    """Replace ``path`` with ``doc`` in one step (see ``matrix.scan.cache.write_atomic``), written in pieces."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                     delete=False) as fh:
        fh.writelines(json_chunks(doc))
    os.chmod(fh.name, 0o644)
    os.replace(fh.name, path)


def write(doc: dict, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = [folder / "history.json", folder / "history.md", folder / "history.html"]
    write_json(out[0], doc)
    write_atomic(out[1], markdown(doc))
    write_atomic(out[2], heatmap(doc))
    return out


def main(argv: list[str], out: Path) -> int:
    args = parse(parser(), argv)
    if isinstance(args, int):  # --help (0) or a usage error (2), with argparse's own message
        return args
    doc = run(HistoryOptions(unsloth=args.unsloth, zoo=args.zoo, everything=args.everything,
                             workers=args.workers, offline=args.offline, scan=args.scan, resolve=args.resolve))
    if args.confirm:
        doc = atlas.attach(confirm(doc, max_n=args.confirm_max, cache=scan_cache_dir(), log=print,
                                   spread=args.confirm_spread))
    doc["stats"]["peak_rss_mib"] = peak_rss_mib()  # before writing; the line below says the whole run's
    for path in write(doc, args.output or out):
        print(f"wrote {path}")
    print(f"peak RSS {peak_rss_mib()} MiB")
    print(headline(doc))
    for a in doc["atlas"][-5:]:
        print(a["line"])
    return EXIT_OK
