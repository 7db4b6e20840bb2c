"""``nox -s bench -- history``: the history over the default window, cold then warm, against the issue's targets.

Cold is ``python -m matrix history`` with a fresh, empty cache directory (``$SKEWMATRIX_CACHE``: index pages,
wheel extracts, the scan columns' cache); warm is the same command again on that cache. Each runs in a child
process (through ``matrix.envs.envrun``), the command a user runs, so its seconds are its own; its peak RSS is
the one the history records of its own process (``stats.peak_rss_mib``). Targets: cold under 600 s on 2 cores,
warm under 60 s. Written to ``bench-history.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from matrix.envs import envrun
from matrix.scan.cache import write_atomic
from matrix.settings import CACHE_ENV, REPO_ROOT

TARGETS_S = {"cold": 600.0, "warm": 60.0}
TIMEOUT_S = 3600


def timed(argv: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``argv`` through the env runner (output to ``log``); its wall seconds and exit status."""
    t0 = time.monotonic()
    ran = envrun.run(argv, cwd=REPO_ROOT, env=env, timeout=TIMEOUT_S, log=log)
    return {"seconds": round(time.monotonic() - t0, 1), "returncode": -1 if ran.returncode is None else ran.returncode}


def verdict(label: str, seconds: float, returncode: int) -> str:
    target = TARGETS_S[label]
    if returncode != 0:
        return f"{label}: FAILED (exit {returncode})"
    return f"{label} {seconds} s (target < {target:.0f} s: {'met' if seconds < target else 'NOT met'})"


def bench_history(argv: list[str], out: Path) -> int:
    """``nox -s bench -- history [HISTORY OPTIONS]``: options after ``history`` go to the history command."""
    p = argparse.ArgumentParser(prog="skewmatrix bench history", description=__doc__)
    p.add_argument("what", nargs="?", default="history")
    p.add_argument("--out", type=Path, default=None, help="where bench-history.json goes (default reports/out)")
    ns, rest = p.parse_known_args(argv)
    out = ns.out or out
    figures: dict[str, Any] = {"command": ["python", "-m", "matrix", "history", *rest], "cpus": os.cpu_count(),
                               "targets_s": TARGETS_S}
    with tempfile.TemporaryDirectory(prefix="skewmatrix-bench-history-") as tmp:
        env = {**os.environ, CACHE_ENV: str(Path(tmp) / "cache")}
        for label in ("cold", "warm"):
            folder = Path(tmp) / label
            folder.mkdir()
            got = timed([sys.executable, "-m", "matrix", "history", *rest, "-o", str(folder)], env,
                        Path(tmp) / f"{label}.log")
            doc_file = folder / "history.json"
            doc = json.loads(doc_file.read_text()) if doc_file.is_file() else {}
            got["peak_rss_mib"] = doc.get("stats", {}).get("peak_rss_mib")
            figures[label] = {**got, "met": got["returncode"] == 0 and got["seconds"] < TARGETS_S[label],
                              "pairs": len(doc.get("pairs", [])), "stats": doc.get("stats", {}),
                              "log_tail": (Path(tmp) / f"{label}.log").read_text()[-1500:] if got["returncode"] else ""}
            print(f"bench history: {verdict(label, got['seconds'], got['returncode'])}, peak RSS "
                  f"{got['peak_rss_mib']} MiB, {figures[label]['pairs']} pair(s)", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "bench-history.json", json.dumps(figures, indent=1) + "\n")
    print(f"wrote {out / 'bench-history.json'}")
    return 0 if figures["cold"]["returncode"] == 0 and figures["warm"]["returncode"] == 0 else 1
