"""The check in a cell env: the static verdict from the installed sources, and ``import unsloth`` with its chain.

``static()`` reads the installed ``unsloth`` and ``unsloth_zoo`` sources (located with ``find_spec``, which
imports neither) and judges the pair (``judge``). The unsloth step ``runtime`` reads how the cell's own
``import unsloth`` went (the generic machinery records the whole exception chain, ``__cause__`` and
``__context__``, and runs this step even when the import failed; no second import), classified:
``skew`` (an ImportError or AttributeError that names zoo, or a KeyError on a key unsloth reads from a zoo
dict, in a cell as in ``history --confirm``), ``environment`` (no accelerator, or anything
else), or ``ok``. An unsloth that cannot import on this host for an environment
reason (2026.5.1 asks torch.cuda for the device capability in ``unsloth/__init__.py``) leaves the runtime side
``n/a`` with that reason; the static verdict stands. The unsloth step ``trainers`` then generates the
trainer classes unsloth builds from TRL's source through zoo (SFT, GRPO; ``trainers.py``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection
from pathlib import Path
from typing import Any

from probes import memo
from probes.checks import PhaseContext, Step
from probes.checks.pair_compat import trainers as trainers_mod
from probes.checks.pair_compat.judge import judge, summary
from probes.checks.pair_compat.references import reference_list
from probes.checks.pair_compat.symbols import symbol_table
from probes.checks.pair_compat.trainers import trainers as generate_trainers

READER = tuple(sorted(Path(__file__).parent.glob("*.py")))  # the reader's code: part of a shared reading's key
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
    # Each side's reading is shared by the cells of the run that install the same bytes (``probes.memo``).
    refs = references(uns)
    table = memo.shared("pair-compat table", READER, zoo, lambda: symbol_table(zoo))
    result = judge(refs, table)
    state = {"incompatible": "vulnerable", "compatible": "fixed", "degraded": "fixed"}.get(result["verdict"],
                                                                                          "unknown")
    return {"verdict": state, "reason": summary(result), "pair": result["verdict"],
            "breaks_at": result.get("breaks_at"), "missing": result["missing"][:20], "unknown": result["unknown"][:20]}


def references(uns: dict[str, str]) -> dict[str, Any]:
    """The pair reader's references in ``uns`` (:func:`sources` of unsloth), shared by the cells of a run."""
    return memo.shared("pair-compat references", READER, uns, lambda: reference_list(uns))  # type: ignore[no-any-return]


def zoo_key_reads(uns: dict[str, str]) -> frozenset[str]:
    """The keys unsloth reads by constant subscript from a zoo module-level dict (``RL_REPLACEMENTS["x"]``), as
    the pair reader finds them (``references.reference_list``'s ``key[...]`` references) in ``uns``
    (:func:`sources` of unsloth); keys unsloth stores itself are not among them."""
    return frozenset(r["key"] for r in references(uns)["refs"] if isinstance(r.get("key"), str))


def classify_chain(chain: list[dict[str, Any]], key_reads: Collection[str] | None = None) -> tuple[str, str]:
    """``(skew|environment, why)`` of a failed import's chain (first the skew, wherever it sits in it).

    The innermost zoo error is the one named: a wrapper ("Please install unsloth_zoo") names zoo too, but
    the error it was raised from or during says which name is missing. A ``KeyError`` names no module: it is a
    skew only when its key is one of ``key_reads`` (:func:`zoo_key_reads`: unsloth reads it from a zoo dict);
    any other ``KeyError`` is the environment's.
    """
    zoo_keys = {repr(k) for k in key_reads or ()}
    for e in reversed(chain):
        text = f"{e['message']} {e.get('name') or ''}"
        if e["type"] in ("ImportError", "ModuleNotFoundError", "AttributeError") and "unsloth_zoo" in text:
            return "skew", f"{e['type']}: {e['message'][:300]}"
        if e["type"] == "KeyError" and e["message"] in zoo_keys:
            return "skew", f"KeyError: {e['message'][:300]} (a key unsloth reads from a zoo dict)"
    for e in chain:
        if any(w in e["message"].lower() for w in ACCELERATOR_WORDS) or e["type"] == "NotImplementedError":
            return "environment", f"no accelerator: {e['type']}: {e['message'][:300]}"
    first = chain[0] if chain else {"type": "?", "message": "no exception recorded"}
    return "environment", f"{first['type']}: {first['message'][:300]}"


def runtime(ctx: PhaseContext) -> dict[str, Any]:
    """What this cell's own ``import unsloth`` did (``ctx.imported``: the unsloth process's import, the one
    every other check's steps run after), classified; see the module docstring."""
    got = ctx.imported or {"imported": False, "chain": []}
    if got.get("imported"):
        return {**got, "class": "ok", "reason": "import unsloth succeeded"}
    chain = got.get("chain") or []
    # a KeyError is zoo's only on a key unsloth reads from a zoo dict: read them only when one was raised
    keys = zoo_key_reads(sources("unsloth")) if any(e["type"] == "KeyError" for e in chain) else None
    cls, why = classify_chain(chain, keys)
    return {**got, "class": cls, "reason": why}


def start_trainers(ctx: PhaseContext) -> None:
    """The generations started as soon as ``import unsloth`` succeeded, beside the other checks' steps."""
    ctx.shared["trainers"] = trainers_mod.start()


def trainers(ctx: PhaseContext) -> dict[str, Any]:
    """After this cell's own ``import unsloth`` succeeded, unsloth's SFT and GRPO trainer classes generated
    the way unsloth generates them (``trainers.py``); each ``n/a`` when the import failed."""
    children = ctx.shared.pop("trainers", None)
    if children is None:
        return generate_trainers(ctx.imported)
    return generate_trainers(ctx.imported, run=trainers_mod.started(children))


RAW_STEPS: tuple[Step, ...] = ()
UNSLOTH_STEPS = (Step("runtime", runtime, reads_import=True),
                 Step("trainers", trainers, reads_import=True, early=start_trainers))
