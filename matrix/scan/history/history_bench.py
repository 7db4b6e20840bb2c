"""``nox -s bench -- history``: the history over the default window, cold then warm, against the issue's targets.

Cold is ``python -m matrix history`` with a fresh, empty cache directory (``$SKEWMATRIX_CACHE``: index pages,
wheel extracts, the scan columns' cache); warm is the same command again on that cache. Each runs in a child
process (through ``matrix.envs.envrun``), the command a user runs, so its seconds are its own; its peak RSS is
the one the history records of its own process tree (``stats.peak_rss_mib``: the command and its analysis
workers, sampled; ``history_cmd.PeakRss``). Targets (issue #32, for ``--all``):
cold under 600 s on 2 cores, warm under 60 s, peak RSS under 1 GiB each. The machine's load average before and
after each run is recorded beside it (a shared host's figures mean little without it). Written to
``bench-history.json``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from matrix.envs import envrun
from matrix.errors import EXIT_HARNESS, EXIT_OK, command_parser
from matrix.scan.cache import write_atomic
from matrix.settings import CACHE_ENV, REPO_ROOT

TARGETS_S = {"cold": 600.0, "warm": 60.0}
TARGET_RSS_MIB = 1024.0
TIMEOUT_S = 3600


def timed(argv: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``argv`` through the env runner (output to ``log``); its wall seconds and exit status."""
    t0 = time.monotonic()
    ran = envrun.run(argv, cwd=REPO_ROOT, env=env, timeout=TIMEOUT_S, log=log)
    return {"seconds": round(time.monotonic() - t0, 1), "returncode": -1 if ran.returncode is None else ran.returncode}


def verdict(label: str, seconds: float, returncode: int, rss: float | None = None) -> str:
    target = TARGETS_S[label]
    if returncode != 0:
        return f"{label}: FAILED (exit {returncode})"
    text = f"{label} {seconds} s (target < {target:.0f} s: {'met' if seconds < target else 'NOT met'})"
    if rss is not None:
        ok = "met" if rss < TARGET_RSS_MIB else "NOT met"
        text += f", peak RSS {rss} MiB (target < {TARGET_RSS_MIB:.0f} MiB: {ok})"
    return text


def bench_history(argv: list[str], out: Path) -> int:
    """``nox -s bench -- history [HISTORY OPTIONS]``: options after ``history`` go to the history command."""
    p = command_parser("bench", prog="skewmatrix bench history", description=__doc__)
    p.add_argument("what", nargs="?", default="history")
    p.add_argument("--out", type=Path, default=None, help="where bench-history.json goes (default reports/out)")
    try:
        ns, rest = p.parse_known_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): argparse's exit, as a code
        return exc.code if isinstance(exc.code, int) else EXIT_HARNESS
    out = ns.out or out
    figures: dict[str, Any] = {"command": ["python", "-m", "matrix", "history", *rest], "cpus": os.cpu_count(),
                               "targets_s": TARGETS_S, "target_rss_mib": TARGET_RSS_MIB}
    with tempfile.TemporaryDirectory(prefix="skewmatrix-bench-history-") as tmp:
        env = {**os.environ, CACHE_ENV: str(Path(tmp) / "cache")}
        for label in ("cold", "warm"):
            folder = Path(tmp) / label
            folder.mkdir()
            load_before = [round(x, 2) for x in os.getloadavg()]
            log_file = Path(tmp) / f"{label}.log"
            got = timed([sys.executable, "-m", "matrix", "history", *rest, "-o", str(folder)], env,
                        Path(tmp) / f"{label}.log")
            doc_file = folder / "history.json"
            doc = json.loads(doc_file.read_text()) if doc_file.is_file() else {}
            said = re.findall(r"^peak RSS ([\d.]+) MiB\b", log_file.read_text(errors="replace"), re.M) \
                if log_file.is_file() else []
            # the whole run's peak (writing included) as the command prints it last, else the document's own
            got["peak_rss_mib"] = rss = float(said[-1]) if said else doc.get("stats", {}).get("peak_rss_mib")
            got["load_avg"] = {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]}
            met = got["returncode"] == 0 and got["seconds"] < TARGETS_S[label] and (rss or 0) < TARGET_RSS_MIB
            figures[label] = {**got, "met": met,
                              "pairs": len(doc.get("pairs", [])), "stats": doc.get("stats", {}),
                              "log_tail": (Path(tmp) / f"{label}.log").read_text()[-1500:] if got["returncode"] else ""}
            print(f"bench history: {verdict(label, got['seconds'], got['returncode'], rss)}, "
                  f"{figures[label]['pairs']} pair(s), load average {load_before[0]} -> "
                  f"{got['load_avg']['after'][0]} on {os.cpu_count()} CPU(s)", flush=True)
            ends = doc.get("stats", {}).get("phases_s") or {}
            if ends:  # where the time went: each phase's end, from the run's start
                print(f"  {label} phases (ended at, s): " + ", ".join(f"{k} {v}" for k, v in ends.items()),
                      flush=True)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "bench-history.json", json.dumps(figures, indent=1) + "\n")
    print(f"wrote {out / 'bench-history.json'}")
    # a history run that failed is the harness failing (the exit table: bench is 0 or 2, never 1)
    return EXIT_OK if figures["cold"]["returncode"] == 0 and figures["warm"]["returncode"] == 0 else EXIT_HARNESS
