"""``nox -s bench -- scan``: releases classified, seconds cold and warm, peak RSS -> ``bench-scan.json``."""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from matrix.arguments import parse
from matrix.scan.cache import ScanIndex, write_atomic
from matrix.scan.run import ScanOptions, run
from matrix.settings import out_dir


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def bench(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="skewmatrix bench scan")
    p.add_argument("what", nargs="?", default="scan")
    p.add_argument("--zoo", default="")
    p.add_argument("--with-unsloth", action="store_true", help="also scan every unsloth release")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--out", type=Path, default=None)
    ns = parse(p, argv)
    if isinstance(ns, int):
        return ns
    opts = ScanOptions(zoo=ns.zoo, workers=ns.workers, skip_unsloth=not ns.with_unsloth)
    figures: dict[str, Any] = {"workers": ns.workers, "with_unsloth": ns.with_unsloth}
    with tempfile.TemporaryDirectory(prefix="skewmatrix-bench-") as tmp:
        for label in ("cold", "warm"):
            t0 = time.monotonic()
            doc = run(opts, cache=Path(tmp), index=ScanIndex(cache=Path(tmp)), log=lambda s: None)
            figures[f"{label}_s"] = round(time.monotonic() - t0, 3)
            figures[f"{label}_stats"] = doc["stats"]
    figures.update(releases_listed=len(doc["zoo"]), zoo_classified=doc["stats"]["zoo_classified"],
                   unsloth_classified=doc["stats"]["unsloth_classified"], peak_rss_mib=round(_peak_rss_mib(), 1),
                   fixed_since=doc["timeline"]["fixed_since"], cpus=os.cpu_count())
    out = ns.out or out_dir()
    write_atomic(out / "bench-scan.json", json.dumps(figures, indent=1) + "\n")
    print(f"bench scan: {figures['zoo_classified']} zoo release(s) classified"
          + (f", {figures['unsloth_classified']} unsloth" if ns.with_unsloth else "")
          + f"; cold {figures['cold_s']} s, warm {figures['warm_s']} s; peak RSS {figures['peak_rss_mib']} MiB")
    print(f"wrote {out / 'bench-scan.json'}")
    return 0
