"""``skewmatrix history``: parse the options, run (and confirm at runtime with ``--confirm``), write
``history.json``, ``history.md`` and ``history.html``."""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from matrix.errors import EXIT_OK, command_parser, parse
from matrix.scan.cache import write_atomic
from matrix.scan.history import atlas
from matrix.scan.history.history_confirm import DEFAULT_MAX, confirm
from matrix.scan.history.history_page import headline, heatmap, markdown
from matrix.scan.history.history_run import HistoryOptions, run
from matrix.settings import scan_cache_dir


def _proc_table() -> dict[int, tuple[int, int, str]]:
    """``{pid: (parent pid, resident KiB, name)}`` of every process ``/proc`` shows (empty where there is none)."""
    out: dict[int, tuple[int, int, str]] = {}
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return out
    page_kib = os.sysconf("SC_PAGE_SIZE") // 1024
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                head, _, tail = fh.read().rpartition(b")")  # the name may hold spaces and brackets
            with open(f"/proc/{pid}/statm", "rb") as fh:
                resident = int(fh.read().split()[1])
            out[pid] = (int(tail.split()[1]), resident * page_kib,
                        head.partition(b"(")[2].decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue  # it ended between the listing and the read
    return out


def tree_rss(root: int | None = None) -> tuple[int, dict[str, int]]:
    """Resident KiB of ``root`` (this process) and every process below it (the analysis workers, children of
    the forkserver, itself a child; uv's resolver processes), in all and by process kind (``history``:
    ``root`` itself; ``python``: the workers and their forkserver; ``uv``)."""
    table = _proc_table()
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    parts: dict[str, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        _, kib, name = table.get(pid, (0, 0, "?"))
        kind = "history" if pid == root else name
        parts[kind] = parts.get(kind, 0) + kib
        todo.extend(children.get(pid, []))
    return sum(parts.values()), parts


def tree_rss_kib(root: int | None = None) -> int:
    return tree_rss(root)[0]


class PeakRss:
    """The run's peak resident memory, in MiB: this process and every process below it, sampled every
    ``every`` seconds by a thread while the ``with`` block runs, and never below this process's own high-water
    mark (``ru_maxrss``, which no sample can miss). The analyses run in worker processes, so this process's
    own figure alone would leave most of the reading out."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self.peak_kib = 0
        self.parts_kib: dict[str, int] = {}  # the peak sample, by process kind (see tree_rss)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.every):
                return

    def sample(self) -> None:
        total, parts = tree_rss()
        if total > self.peak_kib:
            self.peak_kib, self.parts_kib = total, parts

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def parts(self) -> str:
        """``history 400 MiB, python 2 x ...``: what the peak sample held, by process kind, largest first."""
        return ", ".join(f"{k} {v / 1024:.0f} MiB" for k, v in sorted(self.parts_kib.items(), key=lambda kv: -kv[1]))

    @property
    def mib(self) -> float:
        self.sample()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return round(max(self.peak_kib, own) / 1024, 1)


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
    with PeakRss() as peak:
        doc = run(HistoryOptions(unsloth=args.unsloth, zoo=args.zoo, everything=args.everything,
                                 workers=args.workers, offline=args.offline, scan=args.scan, resolve=args.resolve))
        if args.confirm:
            doc = atlas.attach(confirm(doc, max_n=args.confirm_max, cache=scan_cache_dir(), log=print,
                                       spread=args.confirm_spread))
        doc["stats"]["peak_rss_mib"] = peak.mib  # before writing; the line below says the whole run's
        doc["stats"]["peak_rss_parts"] = peak.parts
        for path in write(doc, args.output or out):
            print(f"wrote {path}")
    print(f"peak RSS {peak.mib} MiB (this process and every process below it; at the peak: {peak.parts})")
    print(headline(doc))
    for a in doc["atlas"][-5:]:
        print(a["line"])
    return EXIT_OK
