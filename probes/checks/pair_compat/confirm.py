"""The history's runtime confirmation of one pair, run inside a throwaway env: ``import unsloth``, classified.

``python -m probes.checks.pair_compat.confirm --out FILE``, started by the harness with the environment a
cell's unsloth process gets in ``allow-cpu`` mode (``UNSLOTH_ALLOW_CPU=1``, no ``UNSLOTH_IS_PRESENT``) and no
accelerator visible. It imports unsloth once and writes one JSON file: whether the import succeeded, its whole
exception chain (``probes.common.exception_chain``) classified by the ``runtime`` step's own rule
(``phases.classify_chain``: ``skew`` or ``environment``; a ``KeyError`` on a key the pair reader says unsloth
reads from a zoo dict is a ``skew``: unsloth 2025.3.11's ``RL_REPLACEMENTS`` read on zoo 2025.3.9, unsloth
#2015), where a failure was raised (``at``: the unsloth or zoo line that made the call, not torch's) and in
which package (``raised_in``), the installed versions and the import's seconds. A file, not stdout: unsloth
prints banners of its own.

``--stubbed``: the same import with the accelerator queries answered first (``stubbed.install``: one Ampere GPU,
``os.system`` refused), for an unsloth that asks the GPU inside ``import unsloth``. The result then also says what
was stubbed and which commands were refused. Only a ``classify_chain`` ``skew`` counts; any other failure of a
stubbed import is ``environment`` (the stubs were not enough), with its place.
"""

from __future__ import annotations

import argparse
import time
import traceback
from typing import Any

from probes.checks.pair_compat import stubbed
from probes.checks.pair_compat.phases import classify_chain, sources, zoo_key_reads
from probes.common import dist_version, exception_chain, write_json

CHAIN_LINKS = 4  # links of the chain kept in the result (type, message, link)


def import_once() -> dict[str, Any]:
    """``{"imported", "class": ok|skew|environment, "reason", "chain"}`` of one ``import unsloth``; a failure
    also says ``at`` (where it was raised, :func:`origin`) and ``raised_in`` (the package of its innermost
    frame)."""
    try:
        import unsloth  # noqa: F401 -- the import under test
    except Exception as exc:  # the import's failure is the finding
        chain = exception_chain(exc)
        # a KeyError names no module: it is zoo's when unsloth reads that key from a zoo dict (read lazily: the
        # reading costs seconds, and only a KeyError needs it)
        keys = zoo_key_reads(sources("unsloth")) if any(e["type"] == "KeyError" for e in chain) else None
        cls, why = classify_chain(chain, keys)
        at, raised_in = origin(exc)
        # an ImportError or AttributeError on zoo names its place in its message; a KeyError or the environment not
        place = f" (at {at})" if at and (cls != "skew" or why.startswith("KeyError")) else ""
        return {"imported": False, "class": cls, "reason": why + place, "at": at,
                "raised_in": raised_in,
                "chain": [{k: e[k] for k in ("type", "message", "link")} | {"message": e["message"][:500]}
                          for e in chain[:CHAIN_LINKS]]}
    return {"imported": True, "class": "ok", "reason": "import unsloth succeeded", "chain": []}


def innermost(exc: BaseException) -> BaseException:
    """The last link of ``exc``'s chain, followed as ``exception_chain`` follows it."""
    seen: set[int] = set()
    cur = exc
    while id(cur) not in seen:
        seen.add(id(cur))
        nxt = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
        if nxt is None:
            break
        cur = nxt
    return cur


def origin(exc: BaseException) -> tuple[str | None, str | None]:
    """``(at, raised_in)`` of a failed import: ``at`` the innermost frame in unsloth or zoo of the innermost
    link's whole traceback (the call that asked torch, not ``torch/cuda/__init__.py``; the innermost frame
    outside torch when none is unsloth's or zoo's), from the package's folder on; ``raised_in`` the package
    (top folder under site-packages) of the innermost frame of all."""
    frames = [f"{f.filename}:{f.lineno}".replace("\\", "/")
              for f in traceback.extract_tb(innermost(exc).__traceback__)]
    if not frames:
        return None, None
    ours = [f for f in frames if "/unsloth/" in f or "/unsloth_zoo/" in f]
    outside = [f for f in frames if "/torch/" not in f]
    return _from_package((ours or outside or frames)[-1]), _package(frames[-1])


def _from_package(frame: str) -> str:
    """``.../site-packages/unsloth/x.py:N`` -> ``unsloth/x.py:N``."""
    parts = frame.split("/")
    top = max((i for i, part in enumerate(parts) if part in ("unsloth", "unsloth_zoo", "site-packages")),
              default=len(parts) - 1)
    return "/".join(parts[top + 1 if parts[top] == "site-packages" else top:])


def _package(frame: str) -> str | None:
    parts = frame.split("/")
    return parts[parts.index("site-packages") + 1].split(".")[0].split(":")[0] if "site-packages" in parts else None


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
