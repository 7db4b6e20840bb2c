"""Mutation testing of a guard module against the behaviour suite, inside one cell env.

Generates mutants of a guard source file (``mutation_ops.py``), then, in ONE
process that imported unsloth once, loads each mutant under the guard module
name, installs it, runs behaviour tests 2-14 and the route extras until the
first failure, and restores zoo's forward before the next mutant. A mutant
is ``killed`` (a test failed or crashed, or the module would not load),
``survived`` (every test passed or was n/a), or ``timeout`` (over
``MUTANT_TIMEOUT_S``). The unmutated guard runs first and must pass, else the
run is void (exit 2). Stdlib, torch and the packages under test only.

Why not mutmut or cosmic-ray: both own the test loop. cosmic-ray edits the
file on disk and starts the test command afresh for every mutant (one
``import unsloth``, about 20 s, per mutant, and in-place edits of a
hardlinked env corrupt the uv cache: docs/design.md#measured-facts); mutmut 3 rewrites
the source tree into trampolines selected by an environment variable and
drives pytest in forked children. Neither can "import unsloth once, then
load, install, test and uninstall each mutant in the same process", which
is what makes a full run take minutes, not hours.

Command line (the harness, ``matrix/mutation.py``, drives it)::

    python -m probes.checks.fused_ce_masked_nan.mutate --guard-file PATH --out FILE.json
        [--guard-module MODULE] [--sample N] [--only ID ...] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import GUARD_MODULE
from .mutation_ops import OUT_OF_SCOPE, generate, sample

SCHEMA = 1
MUTANT_TIMEOUT_S = 60


# ---------------------------------------------------------------- running


class _MutantTimeoutError(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _MutantTimeoutError


def _load(name: str, source: str, filename: str) -> types.ModuleType:
    """Execute ``source`` as module ``name`` (registered in sys.modules, like an import)."""
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _run_one(name: str, source: str, filename: str, setup: Any) -> dict[str, Any]:
    """Load, install, test (until the first failure), uninstall; zoo's forward is restored afterwards."""
    from .behavior import TITLES
    from .behavior.cases import AFTER_TESTS, Context, route_all_masked
    from .behavior.support import Guard, forward_entry, fused_class, is_zoo_forward, run_test

    start = time.perf_counter()
    result: dict[str, Any] = {"status": "survived", "killed_by": None, "reason": ""}
    try:
        try:
            module = _load(name, source, filename)
        except Exception as exc:
            # In the real backport `import unsloth` swallows this and no guard is present: test 2 fails.
            return {"status": "killed", "killed_by": "load", "reason": f"{type(exc).__name__}: {exc}"[:300]}
        guard = Guard(name, module)
        install = guard.hook("install")
        if install is not None:
            try:
                guard.installed_at_load = bool(install())
            except Exception as exc:
                guard.error = f"install() raised {type(exc).__name__}: {exc}"
        replaced = not is_zoo_forward(forward_entry(), setup.raw)
        ctx = Context(guard, False, setup.device, setup.raw, setup.vulnerable, replaced, setup.forms)
        tests: list[tuple[str, Callable[[Any], None]]] = [
            (tid, lambda c, fn=fn: fn(ctx, c)) for tid, fn in AFTER_TESTS.items()]
        tests += [(f"x-{route}-all-masked", route_all_masked(ctx, route, False)) for route in ("public", "adapter")]
        for test_id, fn in tests:
            outcome = run_test(test_id, fn, TITLES.get(test_id, test_id))
            if outcome.outcome == "fail":
                result = {"status": "killed", "killed_by": test_id, "reason": outcome.reason[:300]}
                break
    except _MutantTimeoutError:
        result = {"status": "timeout", "killed_by": None, "reason": f"over {MUTANT_TIMEOUT_S} s"}
    finally:
        uninstall = getattr(sys.modules.get(name), "uninstall", None)
        try:
            if callable(uninstall):
                uninstall()
        except Exception:
            pass
        # Whatever the mutant did, the next one starts from zoo's own forward and an empty cache.
        fused_class().forward = setup.original
        setup.clear_cache()
        sys.modules.pop(name, None)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result


@dataclass
class _Setup:
    device: str
    raw: dict[str, Any] | None
    vulnerable: bool | None
    original: Any
    forms: tuple[str, ...]  # the counts zoo NaNs on (test 1): a zoo fixed for one form is judged by them

    @staticmethod
    def clear_cache() -> None:
        from .behavior.support import mapping_cache

        cache = mapping_cache()
        if cache is not None:
            cache.cache_clear()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from .behavior.__main__ import spawn_before
    from .behavior.context import measured_forms
    from .behavior.support import forward_entry, is_zoo_forward

    source = Path(args.guard_file).read_text(encoding="utf-8")
    every = generate(source)
    chosen = sample(every, args.sample)
    if args.only:
        chosen = [m for m in every if m.id in set(args.only)]
    doc: dict[str, Any] = {"schema": SCHEMA, "guard_file": str(args.guard_file), "guard_module": args.guard_module,
                           "generated": len(every), "sample": args.sample, "out_of_scope": OUT_OF_SCOPE,
                           "operators": sorted({m.operator for m in every}), "all_ids": [m.id for m in every]}
    raw_doc, first = spawn_before(argparse.Namespace(device=args.device, guard_module=args.guard_module), False)
    doc["test_01"] = first.to_dict()
    if raw_doc is None:
        doc["error"] = f"the before phase failed: {first.reason}"
        return doc
    start = time.perf_counter()
    import unsloth  # noqa: F401  (once for every mutant)

    doc["import_unsloth_s"] = round(time.perf_counter() - start, 3)
    original = forward_entry()
    raw = raw_doc.get("raw_forward")
    if not is_zoo_forward(original, raw):
        doc["error"] = "after import unsloth the forward is not zoo's own: this env already carries a guard"
        return doc
    setup = _Setup(args.device, raw, raw_doc.get("zoo_vulnerable_raw"), original, measured_forms(raw_doc))
    doc["zoo_vulnerable"] = setup.vulnerable
    doc["zoo_vulnerable_forms"] = list(setup.forms)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(MUTANT_TIMEOUT_S)
    doc["baseline"] = _run_one(args.guard_module, source, str(args.guard_file), setup)
    signal.alarm(0)
    if doc["baseline"]["status"] != "survived":
        doc["error"] = f"the unmutated guard fails the suite: {doc['baseline']}"
        return doc
    results = []
    for i, m in enumerate(chosen, 1):
        signal.alarm(MUTANT_TIMEOUT_S)
        outcome = _run_one(args.guard_module, m.source, f"<mutant {m.id}>", setup)
        signal.alarm(0)
        results.append({**m.describe(), **outcome})
        if args.progress:
            print(f"[{i}/{len(chosen)}] {m.id}: {outcome['status']} {outcome['killed_by'] or ''}", flush=True)
    doc["mutants"] = results
    doc["seconds"] = round(time.perf_counter() - start, 3)
    return doc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m probes.checks.fused_ce_masked_nan.mutate",
                                description=__doc__.splitlines()[0])
    p.add_argument("--guard-file", required=True, type=Path)
    p.add_argument("--guard-module", default=GUARD_MODULE)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--sample", type=int, default=None, help="a deterministic sample of N mutants")
    p.add_argument("--only", nargs="*", default=None, help="mutant ids to run")
    p.add_argument("--list", action="store_true", help="write the mutants without running them (no torch needed)")
    p.add_argument("--progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        source = args.guard_file.read_text(encoding="utf-8")
        doc: dict[str, Any] = {"schema": SCHEMA, "mutants": [m.describe() for m in generate(source)]}
    else:
        os.environ.setdefault("UNSLOTH_ALLOW_CPU", "1")
        doc = run(args)
    args.out.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    return 2 if doc.get("error") else 0


if __name__ == "__main__":
    raise SystemExit(main())
