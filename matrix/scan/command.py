"""``nox -s scan -- ARGS``: run the scan, write ``scan.json`` and ``scan.md``, print a summary.

Exit codes: ``matrix.errors`` (0 written; 1 written, but the static and
runtime detectors disagree on a release; 2 bad option or the scan could not run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from matrix.errors import command_parser, parse, scan_code
from matrix.scan.cache import write_atomic
from matrix.scan.run import DEFAULT_CONFIRM_MAX, MAX_WORKERS, ScanOptions, run
from matrix.scan.terms import ScanError
from matrix.settings import CACHE_ENV
from probes import checks
from reports.render.scan_markdown import render as render_markdown


def scan_ids() -> list[str]:
    """The ids of the registered checks that declare a scan target, in registry order."""
    return [checks.info(n).id for n in checks.with_capability("scan")]


def summary(doc: dict[str, Any]) -> str:
    t = doc["timeline"]
    counts: dict[str, int] = {}
    for z in doc["zoo"]:
        counts[z["verdict"]] = counts.get(z["verdict"], 0) + 1
    exp: dict[str, int] = {}
    for u in doc["unsloth"]:
        exp[u["exposure"]] = exp.get(u["exposure"], 0) + 1
    parts = [f"scan ({doc.get('check', '?')}): {len(doc['zoo'])} zoo release(s): "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
             f"  fixed since: {t['fixed_since'] or 'none'} ({t.get('fixed_since_confirmed_by') or '-'}); "
             f"first fixed: {t['first_fixed'] or 'none'}; "
             f"regressions: {', '.join(r['version'] for r in t['regressions']) or 'none'}"]
    fix = doc.get("declared_fix")
    if fix:
        parts.append(f"  declared fix: {fix['release'] or 'no release'}: "
                     + ("agrees with the timeline" if fix["agrees"] else f"DISAGREES: {fix['disagreement']}"))
    confirmed = [z for z in doc["zoo"] if z.get("confirmed_by") == "runtime"]
    if confirmed:
        parts.append(f"  confirmed at runtime: {', '.join(z['version'] + ' ' + z['verdict'] for z in confirmed)}")
    bad = [z["version"] for z in doc["zoo"] if z["verdict"] == "inconsistent"]
    if bad:
        parts.append(f"  INCONSISTENT (static and runtime disagree): {', '.join(bad)}")
    if doc["unsloth"]:
        parts.append(f"  {len(doc['unsloth'])} unsloth release(s), exposure: "
                     + ", ".join(f"{k} {v}" for k, v in sorted(exp.items())))
    parts += [f"  warning: {w}" for w in doc["warnings"] + doc["errors"]]
    return "\n".join(parts)


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    """``scan.json`` and ``scan.md`` in ``out`` (mode 0644)."""
    paths = [out / "scan.json", out / "scan.md"]
    write_atomic(paths[0], json.dumps(doc, indent=1) + "\n")
    write_atomic(paths[1], render_markdown(doc))
    return paths


def parser(prog: str) -> argparse.ArgumentParser:
    p = command_parser("scan", prog=prog, description="Statically classify every unsloth_zoo and unsloth "
                                "release on the configured index for one check, without installing anything "
                                "(--confirm installs a few and runs the kernel).")
    p.add_argument("--check", default="", metavar="ID", help="the check to scan for (default: the first "
                   f"registered check that declares a scan target; these do: {', '.join(scan_ids())})")
    p.add_argument("--zoo", default="", metavar="SPEC", help="zoo releases to list (packaging specifier set; "
                   "default: every release)")
    p.add_argument("--unsloth", default="", metavar="SPEC", help="unsloth releases to list (default: every release)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: reports/out)")
    p.add_argument("--include-yanked", action="store_true", help="use yanked releases as candidates too")
    p.add_argument("--cache", type=Path, default=None, help=f"cache directory (default: ${CACHE_ENV} or "
                   "~/.cache/skewmatrix/scan)")
    p.add_argument("--workers", type=int, default=6, help=f"parallel downloads (1..{MAX_WORKERS})")
    p.add_argument("--offline", action="store_true", help="use only the cache (index pages and extracts)")
    p.add_argument("--no-unsloth", action="store_true", help="classify zoo releases only")
    p.add_argument("--confirm", action="store_true", help="build the boundary releases and the statically unknown "
                   "ones, and run the runtime detector on each")
    p.add_argument("--confirm-max", type=int, default=DEFAULT_CONFIRM_MAX, metavar="N",
                   help=f"at most N statically unknown releases to confirm (default {DEFAULT_CONFIRM_MAX})")
    return p


def options(ns: argparse.Namespace) -> ScanOptions:
    if not 1 <= ns.workers <= MAX_WORKERS:
        raise ScanError(f"--workers {ns.workers}: must be between 1 and {MAX_WORKERS}")
    return ScanOptions(zoo=ns.zoo, unsloth=ns.unsloth, include_yanked=ns.include_yanked, workers=ns.workers,
                       offline=ns.offline, skip_unsloth=ns.no_unsloth, confirm=ns.confirm,
                       confirm_max=ns.confirm_max, check=ns.check)


def main(argv: list[str], out: Path) -> int:
    """Scan, write, summarise; the exit code is in the module docstring (a failure raises ``ScanError``,
    which ``matrix.cli.guarded`` turns into 2)."""
    ns = parse(parser("skewmatrix scan"), argv)
    if isinstance(ns, int):
        return ns

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    doc = run(options(ns), cache=ns.cache, log=progress)
    paths = write(doc, ns.out or out)
    print(summary(doc))
    for p in paths:
        print(f"wrote {p}")
    inconsistent = any(z["verdict"] == "inconsistent" for z in doc["zoo"])
    if inconsistent:
        print("skewmatrix scan: INCONSISTENT: the static and runtime detectors disagree (see scan.md)",
              file=sys.stderr)
    return scan_code(inconsistent)
