"""The history's runtime confirmation of one pair, run inside a throwaway env: ``import unsloth``, classified.

``python -m probes.checks.pair_compat.confirm --out FILE``, started by the harness with the environment a
cell's unsloth process gets in ``allow-cpu`` mode (``UNSLOTH_ALLOW_CPU=1``, no ``UNSLOTH_IS_PRESENT``) and no
accelerator visible. It imports unsloth once and writes one JSON file: whether the import succeeded, its whole
exception chain (``probes.common.exception_chain``) classified by the ``runtime`` step's own rule
(``phases.classify_chain``: ``skew`` or ``environment``), the installed versions and the import's seconds.
A file, not stdout: unsloth prints banners of its own.

``--stubbed``: the same import with the accelerator queries answered first (``stubbed.install``: one Ampere GPU,
``os.system`` refused), for an unsloth that asks the GPU inside ``import unsloth``. The result then also says what
was stubbed and which commands were refused. Only a failure that names zoo (``classify_chain``'s ``skew``) counts;
any other failure of a stubbed import is ``environment`` (the stubs were not enough), with the innermost frame.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from probes.checks.pair_compat import stubbed
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
        return {"imported": False, "class": cls, "reason": why + _where(chain, cls),
                "chain": [{k: e[k] for k in ("type", "message", "link")} | {"message": e["message"][:500]}
                          for e in chain[:CHAIN_LINKS]]}
    return {"imported": True, "class": "ok", "reason": "import unsloth succeeded", "chain": []}


def _where(chain: list[dict[str, Any]], cls: str) -> str:
    """`` (at unsloth/x.py:N)``: where a failure that is not a skew was raised (of the innermost link's last
    frames, the innermost in unsloth or zoo, else the innermost; from the package's folder on): a KeyError on a
    zoo dict names no module, its place does."""
    frames = [f.replace("\\", "/") for f in ((chain[-1].get("where") or []) if chain and cls != "skew" else [])]
    if not frames:
        return ""
    ours = [f for f in frames if "/unsloth/" in f or "/unsloth_zoo/" in f]
    parts = (ours or frames)[-1].split("/")
    top = max((i for i, part in enumerate(parts) if part in ("unsloth", "unsloth_zoo", "site-packages")),
              default=len(parts) - 1)
    return f" (at {'/'.join(parts[top + 1 if parts[top] == 'site-packages' else top:])})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m probes.checks.pair_compat.confirm")
    p.add_argument("--out", required=True)
    p.add_argument("--stubbed", action="store_true", help="answer the accelerator queries first (stubbed.py)")
    args = p.parse_args(argv)
    versions = {n: dist_version(n) for n in ("unsloth", "unsloth_zoo", "torch", "transformers", "trl")}
    start = time.perf_counter()
    extra: dict[str, Any] = {"mode": "plain"}
    if args.stubbed:
        try:
            done = stubbed.install()
        except Exception as exc:  # no torch, or a torch the stubs do not fit: nothing was imported under test
            result = {"imported": False, "class": "environment", "chain": [],
                      "reason": f"the stubs could not be installed: {type(exc).__name__}: {exc}"[:500]}
            write_json(args.out, {**result, "mode": "stubbed", "versions": versions, "seconds": 0.0})
            return 0
        result = import_once()
        extra = {"mode": "stubbed", "stubs": done.to_dict()}
        if result["class"] == "environment":
            result["reason"] = f"stub insufficient: {result['reason']}"
    else:
        result = import_once()
    write_json(args.out, {**result, **extra, "versions": versions,
                          "seconds": round(time.perf_counter() - start, 2)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
