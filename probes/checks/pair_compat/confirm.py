"""The history's runtime confirmation of one pair, run inside a throwaway env: ``import unsloth``, classified.

``python -m probes.checks.pair_compat.confirm --out FILE``, started by the harness with the environment a
cell's unsloth process gets in ``allow-cpu`` mode (``UNSLOTH_ALLOW_CPU=1``, no ``UNSLOTH_IS_PRESENT``) and no
accelerator visible. It imports unsloth once and writes one JSON file: whether the import succeeded, its whole
exception chain (``probes.common.exception_chain``) classified by the ``runtime`` step's own rule
(``phases.classify_chain``: ``skew`` or ``environment``), the installed versions and the import's seconds.
A file, not stdout: unsloth prints banners of its own.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from probes.checks.pair_compat.phases import classify_chain
from probes.common import dist_version, exception_chain, write_json

CHAIN_LINKS = 4  # links of the chain kept in the result (type, message, link)


def import_once() -> dict[str, Any]:
    """``{"imported", "class": ok|skew|environment, "reason", "chain"}`` of one ``import unsloth``."""
    try:
        import unsloth  # noqa: F401 -- the import under test
    except Exception as exc:  # the import's failure is the finding
        chain = exception_chain(exc)
        cls, why = classify_chain(chain)
        return {"imported": False, "class": cls, "reason": why,
                "chain": [{k: e[k] for k in ("type", "message", "link")} | {"message": e["message"][:500]}
                          for e in chain[:CHAIN_LINKS]]}
    return {"imported": True, "class": "ok", "reason": "import unsloth succeeded", "chain": []}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.checks.pair_compat.confirm")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    versions = {n: dist_version(n) for n in ("unsloth", "unsloth_zoo", "torch")}
    start = time.perf_counter()
    result = import_once()
    write_json(args.out, {**result, "versions": versions, "seconds": round(time.perf_counter() - start, 2)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
