"""The digest of everything a cell's raw phase reads: cells of one run with the same digest share its findings.

The raw phase (``probes.phases``) never imports unsloth. It reads:

* every installed distribution but unsloth, by name, version and installed-tree digest (zoo, torch, the
  trainer stack and all they pull in); of unsloth only its name and version (zoo asks whether it is
  installed, and a distribution's version is what its metadata says), never its files;
* the env's interpreter (the file its ``bin/python`` resolves to);
* the probes' own code (``probes_digest``);
* the probes' command line but ``--out``: device, compile, CPU mode, step timeout, the checks, the
  hand-off (guard module, training on/off, source trees by path);
* the environment the probes get, but ``PATH`` (it differs between cells by the env's ``bin`` directory,
  whose contents the installed set already keys), ``PYTHONPATH`` (the cell's own link to the probes,
  whose code is keyed) and nox's own bookkeeping (``NOX*``).

Two cells that differ in any of these never share: the reuse cannot change a verdict. The findings live
under the run's output directory, one directory per run id (``cache_dir``), so ``--force`` or a new run
never reuses an older run's; ``prune`` removes other runs' directories. The probes hold the lock and do
the look-up (``probes.rawcache``); this module only names the file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SCHEMA = "skewmatrix.raw-key/1"
CACHE = "raw-cache"  # under the output directory
NOT_READ = ("PATH", "PYTHONPATH")  # environment entries left out of the key (see the module docstring)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def raw_key(installed: list[dict[str, Any]], *, unimported: set[str], interpreter: Path, probes: str,
            options: list[str], env: Mapping[str, str]) -> str:
    """The raw phase's input digest. ``installed``: the env's distributions (``matrix.cells.installed``);
    ``unimported``: the packages the raw phase never imports (their version counts, their files do not);
    ``options``: the probes' command line without the interpreter and ``--out``."""
    skip = {_norm(n) for n in unimported}
    dists = sorted([_norm(d["name"]), d.get("version"), None if _norm(d["name"]) in skip else d.get("tree_sha256")]
                   for d in installed)
    ident = {
        "schema": SCHEMA,
        "installed": dists,
        "interpreter": str(Path(interpreter).resolve()),
        "probes": probes,
        "options": list(options),
        "env": {k: v for k, v in sorted(env.items()) if k not in NOT_READ and not k.startswith("NOX")},
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def cache_dir(out: Path, run_id: str) -> Path:
    """Where this run's cells store raw findings."""
    return out / CACHE / run_id


def prune(out: Path, run_id: str) -> None:
    """Remove the raw findings of other runs (a run on this output directory holds its lock: they are over)."""
    root = out / CACHE
    if not root.is_dir():
        return
    for d in root.iterdir():
        if d.name != run_id:
            shutil.rmtree(d, ignore_errors=True)
