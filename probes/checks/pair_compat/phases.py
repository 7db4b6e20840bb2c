"""The check in a cell env: the static verdict from the installed sources, and ``import unsloth`` with its chain.

``static()`` reads the installed ``unsloth`` and ``unsloth_zoo`` sources (located with ``find_spec``, which
imports neither) and judges the pair (``judge``). The raw step ``runtime`` runs ``import unsloth`` in a fresh
interpreter (this process must never import it) and records the whole exception chain (``__cause__`` and
``__context__``), classified: ``skew`` (an ImportError or AttributeError that names zoo), ``environment`` (no
accelerator, or anything else), or ``ok``. An unsloth that cannot import on this host for an environment
reason (2026.5.1 asks torch.cuda for the device capability in ``unsloth/__init__.py``) leaves the runtime side
``n/a`` with that reason; the static verdict stands.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from probes.checks import PhaseContext, Step
from probes.checks.pair_compat.judge import judge, summary
from probes.checks.pair_compat.references import reference_list
from probes.checks.pair_compat.symbols import symbol_table

IMPORT_TIMEOUT_S = 600
# Runs in the child: import unsloth, print the chain as one JSON line (stdout may carry unsloth's banner).
CHILD = r"""
import json, sys, traceback
out = {"imported": True, "chain": []}
try:
    import unsloth
except BaseException as exc:
    out["imported"] = False
    seen, cur, link = set(), exc, "raised"
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        tb = traceback.extract_tb(cur.__traceback__)
        out["chain"].append({"type": type(cur).__name__, "message": str(cur)[:2000], "link": link,
                             "name": getattr(cur, "name", None),
                             "where": [f"{f.filename}:{f.lineno}" for f in tb[-3:]]})
        nxt = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
        link = "__cause__" if cur.__cause__ is not None else "__context__"
        cur = nxt
print("SKEWMATRIX-IMPORT " + json.dumps(out))
"""
ACCELERATOR_WORDS = ("cuda", "gpu", "accelerator", "device capability", "get_device_capability", "nvidia",
                     "no backend", "torch.cuda")


def sources(package: str) -> dict[str, str]:
    """``{wheel member: text}`` of an installed package's ``.py`` files, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return {}
    root = Path(next(iter(spec.submodule_search_locations)))
    return {f"{package}/{p.relative_to(root).as_posix()}": p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}


def static() -> dict[str, Any]:
    uns, zoo = sources("unsloth"), sources("unsloth_zoo")
    if not uns or not zoo:
        return {"verdict": "absent", "reason": f"no installed source for {'unsloth' if not uns else 'unsloth_zoo'}"}
    result = judge(reference_list(uns), symbol_table(zoo))
    state = {"incompatible": "vulnerable", "compatible": "fixed", "degraded": "fixed"}.get(result["verdict"],
                                                                                          "unknown")
    return {"verdict": state, "reason": summary(result), "pair": result["verdict"],
            "missing": result["missing"][:20], "unknown": result["unknown"][:20]}


def classify_chain(chain: list[dict[str, Any]]) -> tuple[str, str]:
    """``(skew|environment, why)`` of a failed import's chain (first the skew, wherever it sits in it)."""
    for e in chain:
        text = f"{e['message']} {e.get('name') or ''}"
        if e["type"] in ("ImportError", "ModuleNotFoundError", "AttributeError") and "unsloth_zoo" in text:
            return "skew", f"{e['type']}: {e['message'][:300]}"
    for e in chain:
        if any(w in e["message"].lower() for w in ACCELERATOR_WORDS) or e["type"] == "NotImplementedError":
            return "environment", f"no accelerator: {e['type']}: {e['message'][:300]}"
    first = chain[0] if chain else {"type": "?", "message": "no exception recorded"}
    return "environment", f"{first['type']}: {first['message'][:300]}"


def runtime(ctx: PhaseContext) -> dict[str, Any]:
    """``import unsloth`` in a fresh interpreter of this env; see the module docstring."""
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=False,
                              timeout=IMPORT_TIMEOUT_S, env=dict(os.environ), cwd=str(ctx.workdir))
    except subprocess.TimeoutExpired:
        return {"class": "environment", "imported": False, "chain": [],
                "reason": f"import unsloth did not finish in {IMPORT_TIMEOUT_S} s"}
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SKEWMATRIX-IMPORT ")), None)
    if line is None:
        return {"class": "environment", "imported": False, "chain": [],
                "reason": f"the import child exited {proc.returncode} without a record: {proc.stderr[-500:]}"}
    got = json.loads(line.split(" ", 1)[1])
    if got["imported"]:
        return {**got, "class": "ok", "reason": "import unsloth succeeded"}
    cls, why = classify_chain(got["chain"])
    return {**got, "class": cls, "reason": why}


RAW_STEPS = (Step("runtime", runtime),)
UNSLOTH_STEPS: tuple[Step, ...] = ()
