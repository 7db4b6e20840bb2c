"""Command line of the behaviour suite: phases, the before-phase subprocess, the JSON.

``--phase before`` runs test 1 in this process, which must not have imported
unsloth (zoo alone, with UNSLOTH_IS_PRESENT=1). ``--phase after`` imports
unsloth and runs tests 2-14 and the extras. ``--phase all`` (the default)
runs ``before`` in a child process of this module, trusts it only with exit
code 0, then runs ``after`` here and merges. The output always holds the 14
tests. Exit code 0 whenever the JSON was written; 2 for a usage error.

The after phase uses the environment as given (the cell runner picks the
CPU mode): set ``UNSLOTH_ALLOW_CPU=1`` for unsloth's GPU path on a driverless
host. The before phase sets ``UNSLOTH_IS_PRESENT=1 UNSLOTH_ALLOW_CPU=1``.

``--guard-file PATH`` (hidden) loads a guard module from PATH under the
``--guard-module`` name and calls its ``install()`` right after ``import
unsloth``: what a backport that wires the guard into unsloth would do.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from probes.phases import RAW_ENV

from .. import GUARD_MODULE, kernel
from . import SCHEMA, TEST_IDS, TITLES
from .context import measured_forms
from .support import Guard, TestResult

BEFORE_TIMEOUT_S = 1800


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m probes.checks.fused_ce_masked_nan.behavior",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="where to write the result JSON")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--compile", choices=("on", "off"), default=None,
                   help="torch_compile for every kernel call (default: off on cpu, on on cuda)")
    p.add_argument("--guard-module", default=GUARD_MODULE)
    p.add_argument("--guard-file", default=None, help=argparse.SUPPRESS)
    p.add_argument("--phase", choices=("before", "after", "all"), default="all")
    return p


def _placeholder(test_id: str, reason: str, outcome: str = "n/a") -> TestResult:
    return TestResult(test_id, TITLES[test_id], outcome, reason, 0.0, {})  # type: ignore[arg-type]


def _document(args: argparse.Namespace, torch_compile: bool, guard: Guard | None, tests: list[TestResult],
              extra: list[TestResult], **fields: Any) -> dict[str, Any]:
    assert [t.id for t in tests] == list(TEST_IDS), [t.id for t in tests]
    found = guard is not None and guard.found
    return {
        "schema": SCHEMA,
        "device": args.device,
        "compile": torch_compile,
        "phase": args.phase,
        "guard_module": args.guard_module if found else None,
        "guard_found": found,
        "guard": guard.describe() if guard is not None else None,
        **fields,
        "tests": [t.to_dict() for t in tests],
        "extra": [t.to_dict() for t in extra],
    }


MODE_VARS = ("UNSLOTH_ALLOW_CPU", "UNSLOTH_IS_PRESENT", "UNSLOTH_COMPILE_OVERWRITE", "UNSLOTH_FUSED_CE_GUARD")


def _mode() -> dict[str, str | None]:
    return {k: os.environ.get(k) for k in MODE_VARS}


def before_phase(args: argparse.Namespace, torch_compile: bool) -> dict[str, Any]:
    from .cases import Context, test_01_before
    from .support import run_test

    if "unsloth" in sys.modules:
        first = _placeholder("01-before", "crashed: unsloth already imported in the before phase", "fail")
    else:
        # Raw zoo import needs both (docs/design.md#measured-facts).
        for key, value in RAW_ENV.items():
            os.environ.setdefault(key, value)
        ctx = Context(Guard(args.guard_module, None, "not loaded in the before phase"),
                      torch_compile, args.device, None, None)
        first = run_test("01-before", lambda c: test_01_before(ctx, c))
    later = [_placeholder(t, "n/a: after phase not run (--phase before)") for t in TEST_IDS[1:]]
    return _document(
        args, torch_compile, None, [first, *later], [],
        zoo_vulnerable_raw=first.details.get("zoo_vulnerable_raw"),
        zoo_vulnerable_forms=first.details.get("zoo_vulnerable_forms"),
        raw_forward=first.details.get("forward"),
        unsloth_imported=False,
        env=_mode(),
    )


def spawn_before(args: argparse.Namespace, torch_compile: bool) -> tuple[dict[str, Any] | None, TestResult]:
    """Run the before phase in a child process that never imports unsloth."""
    # PYTHONPATH is inherited as is: in a cell it exposes `probes` and nothing else of the repo.
    env = dict(os.environ)
    env.update(RAW_ENV)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="behavior-before-") as tmp:
        out = Path(tmp) / "before.json"
        module = __package__ or "probes.checks.fused_ce_masked_nan.behavior"
        cmd = [sys.executable, "-m", module, "--phase", "before", "--out", str(out),
               "--device", args.device, "--compile", "on" if torch_compile else "off",
               "--guard-module", args.guard_module]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=BEFORE_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired:
            return None, TestResult("01-before", TITLES["01-before"], "fail",
                                    f"before phase timed out after {BEFORE_TIMEOUT_S} s",
                                    time.perf_counter() - start, {})
        doc = json.loads(out.read_text()) if proc.returncode == 0 and out.is_file() else None
    if doc is None:
        tail = (proc.stderr or proc.stdout)[-2000:]
        return None, TestResult("01-before", TITLES["01-before"], "fail",
                                f"before phase exited {proc.returncode} without a result",
                                time.perf_counter() - start, {"stderr_tail": tail})
    t = doc["tests"][0]
    first = TestResult(t["id"], t["title"], t["outcome"], t["reason"], t["duration_s"], t["details"])
    first.details["process_s"] = round(time.perf_counter() - start, 3)
    return doc, first


def after_phase(args: argparse.Namespace, torch_compile: bool, raw_doc: dict[str, Any] | None,
                first: TestResult) -> dict[str, Any]:
    from .cases import AFTER_TESTS, Context, extra_probes
    from .support import (
        execute,
        forward_entry,
        is_zoo_forward,
        load_guard,
        run_test,
        unguarded,
    )

    # The environment is used as given: with UNSLOTH_ALLOW_CPU=1 unsloth keeps its GPU path on a
    # driverless host; without it recent builds pick the CPU backend (docs/design.md#measured-facts).
    start = time.perf_counter()
    try:
        import unsloth  # noqa: F401  (the import is the point: it may install a guard)
    except Exception as exc:
        reason = f"crashed: import unsloth failed: {type(exc).__name__}: {exc}"
        tests = [first, *(_placeholder(t, reason, "fail") for t in TEST_IDS[1:])]
        return _document(args, torch_compile, None, tests, [], zoo_vulnerable_raw=None, import_error=reason,
                         env=_mode())
    import_s = time.perf_counter() - start
    try:
        guard = load_guard(args.guard_module, args.guard_file)
    except Exception as exc:
        guard = Guard(args.guard_module, None, f"loading failed: {type(exc).__name__}: {exc}")

    raw = raw_doc.get("raw_forward") if raw_doc else None
    vulnerable = raw_doc.get("zoo_vulnerable_raw") if raw_doc else None
    source = "raw process" if vulnerable is not None else None
    if vulnerable is None and guard.hook("uninstall") and guard.hook("install"):
        # No raw measurement: measure zoo with the guard taken out, in this process.
        try:
            with unguarded(guard):
                loss = execute(Context(guard, torch_compile, args.device, None, None).batch("all_masked"),
                               torch_compile=torch_compile).loss
            vulnerable, source = not math.isfinite(float(loss)), "after phase, guard uninstalled"
        except Exception:
            vulnerable = None
    try:
        replaced: bool | None = not is_zoo_forward(forward_entry(), raw)
    except Exception:
        replaced = None
    ctx = Context(guard, torch_compile, args.device, raw, vulnerable, replaced, measured_forms(raw_doc))
    tests = [first]
    for test_id, fn in AFTER_TESTS.items():
        tests.append(run_test(test_id, lambda c, fn=fn: fn(ctx, c)))  # type: ignore[misc]
    extra = extra_probes(ctx)
    # Whether zoo's compiled chunk loop really ran (None: untested, False: fell back to eager).
    compile_supported = getattr(sys.modules.get(kernel.CE_MODULE), "_FUSED_CE_COMPILE_SUPPORTED", "absent")
    return _document(
        args, torch_compile, guard, tests, extra,
        zoo_vulnerable_raw=raw_doc.get("zoo_vulnerable_raw") if raw_doc else None,
        zoo_vulnerable=vulnerable,
        zoo_vulnerable_source=source,
        forward_replaced=replaced,
        raw_forward=raw,
        unsloth_imported=True,
        env=_mode(),
        fused_ce_compile_supported=compile_supported,
        timings={"import_unsloth_s": round(import_s, 3)},
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    torch_compile = (args.device == "cuda") if args.compile is None else args.compile == "on"
    if args.phase == "before":
        doc = before_phase(args, torch_compile)
    elif args.phase == "after":
        doc = after_phase(args, torch_compile, None, _placeholder("01-before", "n/a: before phase not run"))
    else:
        raw_doc, first = spawn_before(args, torch_compile)
        doc = after_phase(args, torch_compile, raw_doc, first)
    Path(args.out).write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
