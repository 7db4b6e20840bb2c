"""The training run: the tree's own ``scripts/chat_sft.py``, unmodified, CPU, offline, on tiny stand-ins.

As ``runs/runcpu.sh`` runs it (``python -m scripts.chat_sft ...`` in the
project's env), through :mod:`.launcher` (which only observes), in a
subprocess whose cwd is the stand-ins' ``hub/`` folder and whose
``NANOCHAT_BASE_DIR`` holds the tokenizer, base checkpoint and task data of
:mod:`.fixtures`. Arguments are taken from the ref's own ``--help``: a
wanted flag the ref lacks is dropped and recorded; a ref with no way to set
the micro-batch size, the step count or the accumulation is ``n/a``.

Two runs at ``--device-batch-size=1`` and ``--max-seq-len=2048`` (a row is
one micro-batch): GA 1 and GA 4 (``--total-batch-size`` = GA x 2048
tokens), evals off except the one the script always does at its last step
(one micro-batch of val). Per step: the logged ``loss:`` (the script's EMA
of the last micro-batch's loss), each micro-batch's valid targets, whether
the model computed its loss and the value, non-finite parameters. Then the
weights the run saved (``chatsft_checkpoints/``) are loaded and checked.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from probes.training import SEVERITY, NotApplicable, RunSpec, json_number, nonfinite, run_outcome, version

from . import fixtures, source

ROUTE = "scripts/chat_sft.py (unmodified, CPU, offline stand-ins) -> nanochat.gpt.GPT.forward -> F.cross_entropy"
LAUNCHER = Path(__file__).with_name("launcher.py")
STEP_RE = re.compile(r"^step (\d+) .*?\| loss: ([^ |]+)")
GA_RE = re.compile(r"gradient accumulation steps: (\d+)")
TIMEOUT_S = 600.0


# GA 1 and GA 4, as optimizer steps; the fully masked rows are the fixtures' (``fixtures.py``).
RUNS = (RunSpec("ga1", 1, 6), RunSpec("ga4", 4, 3))


def flags(help_text: str) -> set[str]:
    return set(re.findall(r"(?m)^\s+(--[a-z0-9][a-z0-9-]*)", help_text))


def argv_for(plan: RunSpec, offered: set[str]) -> tuple[list[str], list[str]]:
    """(arguments, wanted flags this ref does not offer). The script counts --num-iterations in micro-batches
    pulled from its loader and stops before the last one: steps x GA + 1 gives ``plan.max_steps`` steps."""
    seq, ga = fixtures.MAX_SEQ_LEN, plan.gradient_accumulation_steps
    for need in ("--device-batch-size", "--num-iterations"):
        if need not in offered:
            raise NotApplicable(f"chat_sft.py --help offers no {need}")
    wanted: dict[str, Any] = {
        "--device-type": "cpu", "--run": "dummy", "--num-iterations": plan.max_steps * ga + 1,
        "--max-seq-len": seq, "--device-batch-size": 1, "--eval-every": -1, "--eval-tokens": seq,
        "--chatcore-every": -1, "--mmlu-epochs": 1, "--gsm8k-epochs": 1, "--load-optimizer": 0,
    }
    if "--total-batch-size" in offered:
        wanted["--total-batch-size"] = ga * seq
    else:
        accum = sorted(f for f in offered if "accum" in f)
        if not accum:
            raise NotApplicable("chat_sft.py --help offers neither --total-batch-size nor a gradient-accumulation flag")
        wanted[accum[0]] = ga
    return [f"{k}={v}" for k, v in wanted.items() if k in offered], sorted(k for k in wanted if k not in offered)


def steps_from(record: dict[str, Any], logged: dict[int, Any], ga: int) -> list[dict[str, Any]]:
    """Per logged step: its micro-batches (valid targets, loss computed or not, raw loss) and the non-finite
    parameters the step left (counted at the next step's first forward, else at the end of the run)."""
    micro = record.get("micro_batches") or []
    forwards = {f["micro_batch"]: f for f in record.get("forwards") or []}
    first_seen: dict[int, int] = {}
    for i, f in sorted(forwards.items(), reverse=True):
        first_seen[i // ga + 1] = f["nonfinite_params"]
    final = record.get("final_nonfinite_params")
    out = []
    for step in sorted(logged):
        mbs = []
        for i in range((step - 1) * ga, step * ga):
            valid = micro[i]["valid_targets"] if i < len(micro) else None
            f = forwards.get(i)
            mbs.append({"labels_left": valid, "n_items": str(valid), "loss_computed": f is not None,
                        "raw_loss": None if f is None else f["loss"], "grad_fn": None if f is None else f["grad_fn"]})
        after = first_seen.get(step + 1)
        if step == max(logged):
            after = max(after or 0, final or 0)
        counts = [m["labels_left"] for m in mbs]
        out.append({"step": step, "logged_loss": logged[step], "labels_left": sum(m["labels_left"] or 0 for m in mbs),
                    "valid_targets": counts, "micro_batches": mbs,
                    "kernel_calls": sum(m["loss_computed"] for m in mbs), "nonfinite_params": after or 0})
    return out


def crash_from(record: dict[str, Any], code: int, logged_steps: int, ga: int, tree: Path) -> dict[str, Any]:
    exc = record.get("exception") or {}
    frames = exc.get("frames") or []
    ours = [f for f in frames if str(f[0]).startswith(str(tree))] or frames
    where = f"{Path(ours[-1][0]).relative_to(tree) if str(ours[-1][0]).startswith(str(tree)) else ours[-1][0]}:" \
            f"{ours[-1][1]} `{ours[-1][3]}`" if ours else ""
    at = logged_steps + 1
    lo, hi = (at - 1) * ga, at * ga
    fwd = [f for f in record.get("forwards") or [] if lo <= f["micro_batch"] < hi]
    return {"type": exc.get("type"), "message": exc.get("message") or f"exit status {code}", "where": where,
            "at_step": at, "valid_targets": [m["valid_targets"] for m in (record.get("micro_batches") or [])[lo:hi]],
            "forwards": fwd, "masked_forward": any(f["valid_targets"] == 0 for f in fwd)}


def checkpoint_state(base: Path) -> dict[str, Any]:
    import torch

    found = sorted((base / "chatsft_checkpoints").glob("*/model_*.pt"))
    if not found:
        return {"path": None, "nonfinite_params": None}
    state = torch.load(found[-1], map_location="cpu")
    bad = sum(int((~torch.isfinite(v.float())).sum()) for v in state.values() if torch.is_tensor(v))
    return {"path": str(found[-1].relative_to(base)), "nonfinite_params": bad}


def judge(run: dict[str, Any], code: int | None, crash: dict[str, Any] | None) -> dict[str, Any]:
    steps = run["steps"]
    nan_steps = [s["step"] for s in steps if nonfinite(s["logged_loss"])]
    if code is None:
        return {"outcome": "error", "first_nan_step": None, "nan_until_end": False,
                "symptom": f"the run did not finish within {TIMEOUT_S:.0f} s (a probe limit, not a finding)"}
    if crash is not None:
        masked = "" if not crash["valid_targets"] else (
            f"; that step's micro-batches had {crash['valid_targets']} valid targets")
        return {"outcome": "crash", "first_nan_step": nan_steps[0] if nan_steps else None, "nan_until_end": False,
                "symptom": f"chat_sft.py raised {crash['type']}: {crash['message']} in step {crash['at_step']} "
                           f"after {len(steps)} logged step(s)" + (f" at {crash['where']}" if crash["where"] else "")
                           + masked + (f"; logged loss NaN from step {nan_steps[0]}" if nan_steps else "")}
    if not steps:
        return {"outcome": "error", "first_nan_step": None, "nan_until_end": False,
                "symptom": "the run exited 0 but logged no step (see stderr_tail)"}
    out = run_outcome(steps, "valid_targets", "the loss")
    masked = [(s["step"], i + 1, m["loss_computed"]) for s in steps for i, m in enumerate(s["micro_batches"])
              if m["labels_left"] == 0]
    if masked:
        shown = ", ".join(f"step {s}.{i}" + ("" if computed else " (skipped)") for s, i, computed in masked)
        out["symptom"] += f"; fully masked micro-batches (step.micro-step): {shown}"
    return out


def run_once(plan: RunSpec, tree: Path, base: Path, offered: set[str]) -> dict[str, Any]:
    ga = plan.gradient_accumulation_steps
    args, dropped = argv_for(plan, offered)
    shutil.rmtree(base / "chatsft_checkpoints", ignore_errors=True)
    record_path = base / f"record-{plan.name}.json"
    argv = [*fixtures.python_argv(), str(LAUNCHER), str(record_path), "scripts.chat_sft", *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, cwd=base / "hub", env=fixtures.env_for(tree, base), capture_output=True,
                              text=True, timeout=TIMEOUT_S, check=False)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = None, str(exc.stdout or ""), str(exc.stderr or "")
    seconds = round(time.perf_counter() - start, 3)
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    lines = [ln for ln in out.splitlines() if "loss:" in ln]
    logged = {int(m.group(1)): json_number(float(m.group(2))) for ln in lines if (m := STEP_RE.match(ln))}
    ga_seen = GA_RE.search(out)
    steps = steps_from(record, logged, ga)
    run: dict[str, Any] = {
        "name": plan.name, "gradient_accumulation_steps": ga,
        "ga_reported": int(ga_seen.group(1)) if ga_seen else None, "device_batch_size": 1,
        "argv": ["python", *argv[1:2], "-m", "scripts.chat_sft", *args], "dropped_flags": dropped,
        "returncode": code, "seconds": seconds, "loss_lines": lines, "steps": steps,
        "masked_steps": [s["step"] for s in steps if s["labels_left"] == 0],
        "masked_micro_batches": [m["index"] for m in record.get("micro_batches", []) if m["valid_targets"] == 0],
        "kernel_calls": len(record.get("forwards") or []), "compiled": record.get("compiled"),
        "final_nonfinite_params": record.get("final_nonfinite_params"), "checkpoint": checkpoint_state(base),
        "stderr_tail": err.strip().splitlines()[-8:],
    }
    if steps and run["checkpoint"]["nonfinite_params"]:
        steps[-1]["nonfinite_params"] = max(steps[-1]["nonfinite_params"], run["checkpoint"]["nonfinite_params"])
    crash = crash_from(record, code, len(steps), ga, tree) if code not in (0, None) or record.get(
        "exception") else None
    if crash is not None:
        run["crash"] = crash
    run.update(judge(run, code, crash))
    return run


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """kernel_calls: micro-steps whose loss the model computed; masked_inputs: what reached it with no valid target."""
    masked = any(m["labels_left"] == 0 and m["loss_computed"] for r in runs for s in r["steps"]
                 for m in s["micro_batches"]) or any((r.get("crash") or {}).get("masked_forward") for r in runs)
    return {"kernel_calls": sum(r["kernel_calls"] for r in runs),
            "masked_inputs": ["all targets -1"] if masked else [],
            "masked_micro_batches": sum(len(r["masked_micro_batches"]) for r in runs)}


def run(device: str = "cpu") -> dict[str, Any]:
    """Both runs on the tree under test; the training-step result the reports read (``outcome`` & co)."""
    start = time.perf_counter()
    result: dict[str, Any] = {"ok": True, "route": ROUTE, "device": "cpu", "torch_compile": True,
                              "versions": {n: version(n) for n in ("torch", "datasets", "numpy", "pyarrow")}}
    empty = {"first_nan_step": None, "nan_until_end": False, "runs": [], "kernel_calls": 0, "masked_inputs": []}
    base = Path(tempfile.mkdtemp(prefix="skewmatrix-nanochat-"))
    try:
        if device != "cpu":
            raise NotApplicable(f"the probe runs chat_sft.py on CPU only (device {device})")
        tree = source.find_tree()
        result["tree"] = source.describe(tree)
        result["versions"]["nanochat"] = result["tree"]["commit"]
        result["fixtures"] = fixtures.build(tree, base)
        helped = subprocess.run([*fixtures.python_argv(), "-m", "scripts.chat_sft", "--help"], cwd=base / "hub",
                                env=fixtures.env_for(tree, base), capture_output=True, text=True, timeout=300,
                                check=False)
        offered = flags(helped.stdout)
        if helped.returncode != 0 or not offered:
            raise RuntimeError(f"chat_sft.py --help exited {helped.returncode}: {helped.stderr[-400:]}")
        result["help_flags"] = sorted(offered)
        runs = [run_once(plan, tree, base, offered) for plan in RUNS]
    except (NotApplicable, source.NoTree) as exc:
        result.update(outcome="n/a", reason=f"n/a: {exc}", **empty)
    except Exception as exc:  # the probe could not set the run up: not a finding
        result.update(ok=False, outcome="error", reason=f"training probe failed: {type(exc).__name__}: {exc}",
                      error=f"{type(exc).__name__}: {exc}", **empty)
    else:
        worst = max(runs, key=lambda r: SEVERITY.get(r["outcome"], 4))
        result.update(outcome=worst["outcome"], first_nan_step=worst["first_nan_step"],
                      nan_until_end=worst["nan_until_end"], runs=runs, **summary(runs),
                      reason="; ".join(f"{r['name']}: {r['symptom']}" for r in runs))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
