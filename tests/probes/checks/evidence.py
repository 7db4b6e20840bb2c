"""Hand-written check sections of a cell JSON (``cell["checks"][id]``) for the verdict tests."""

from __future__ import annotations

from typing import Any


def behaviour(outcomes: dict[str, str], guard_found: bool) -> dict[str, Any]:
    tests = [{"id": tid, "title": tid, "outcome": o, "reason": "" if o == "pass" else f"why {tid}",
              "duration_s": 0.1, "details": {}} for tid, o in outcomes.items()]
    return {"schema": 1, "guard_found": guard_found, "tests": tests, "extra": []}


def train(outcome: str, first: int | None = None, reason: str = "", *, kernel_calls: int | None = None,
          masked: list[str] | None = None, versions: dict[str, str] | None = None,
          evaluation: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {"ok": True, "outcome": outcome, "first_nan_step": first, "reason": reason or outcome, "runs": []}
    if evaluation is not None:
        out["evaluation"] = evaluation
    if kernel_calls is not None:
        out["kernel_calls"] = kernel_calls
    if masked is not None:
        out["masked_inputs"] = masked
    if versions is not None:
        out["versions"] = versions
    return out


def fused(
    *,
    static: str = "vulnerable",
    runtime: str = "vulnerable",
    original: bool = True,
    routes: dict[str, Any] | None = None,
    finite: bool = False,
    behavior: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    runtime_status: str = "ok",
    guard_status: str = "ok",
) -> dict[str, Any]:
    """The first check's section: ``finite`` sets every route's all-masked outcome unless ``routes`` is given."""
    if routes is None:
        one = {"loss": 0.0 if finite else "nan", "loss_finite": finite, "grads_finite": True}
        routes = {"function": dict(one), "public": dict(one), "adapter": dict(one)}
    steps = [
        {"name": "runtime", "status": runtime_status, "seconds": 15.0, "returncode": 0,
         "reason": None if runtime_status == "ok" else "raw was killed by SIGABRT",
         "result": {"verdict": runtime, "reason": f"runtime says {runtime}"} if runtime_status == "ok" else None},
        {"name": "guard", "status": guard_status, "seconds": 1.0, "returncode": 0,
         "reason": None if guard_status == "ok" else "import unsloth failed: RuntimeError: no GPU",
         "result": {"forward": {"original": original}, "routes": routes} if guard_status == "ok" else None},
    ]
    if training is not None:
        steps.append({"name": "train", "status": "ok", "seconds": 4.0, "returncode": 0, "result": training})
    if behavior is not None:
        steps.append({"name": "behavior", "status": "ok", "seconds": 3.0, "returncode": 0, "result": behavior})
    return {"static": {"verdict": static, "reason": f"static says {static}"}, "steps": steps}


def cpu(*, static: str = "vulnerable", runtime: str = "vulnerable", original: bool | None = True,
        finite: bool = False, outcomes: dict[str, str] | None = None, training: dict[str, Any] | None = None,
        train_status: str = "ok", train_reason: str = "") -> dict[str, Any]:
    route = {"loss": 0.0 if finite else "nan", "loss_finite": finite, "grads_finite": True}
    steps = [
        {"name": "runtime", "status": "ok", "seconds": 0.1, "returncode": 0,
         "result": {"verdict": runtime, "reason": f"runtime says {runtime}"}},
        {"name": "guard", "status": "ok", "seconds": 0.1, "returncode": 0,
         "result": {"kernel": "present", "original": original, "routes": {"module-attribute": route}}},
    ]
    if outcomes is not None:
        steps.append({"name": "behavior", "status": "ok", "seconds": 0.1, "returncode": 0,
                      "result": behaviour(outcomes, False)})
    if training is not None or train_status != "ok":
        steps.append({"name": "train", "status": train_status, "seconds": 4.0, "returncode": 0,
                      "process": "cpu-backend", "reason": train_reason or None, "result": training})
    return {"static": {"verdict": static, "reason": f"static says {static}"}, "steps": steps}


def evaluation(outcome: str, source: str | None = None, *, loss: object = 2.5, count: str = "None",
               masked_loss: object = 0.0, kernel_loss: object | None = None) -> dict[str, Any]:
    """A training step's evaluation record (``probes.training.evaluate_logged``): three eval batches, the middle
    one fully masked; ``kernel_loss`` is what the kernel answered on each batch (None: not called)."""
    def batch(n: int, left: int, value: object) -> dict[str, Any]:
        calls = [] if kernel_loss is None else [{"n_items": count, "raw_loss": kernel_loss if left == 0 else 4.0}]
        return {"batch": n, "labels_left": left, "count": count, "model_loss": value, "loss": value,
                "kernel_calls": calls}
    batches = [batch(1, 13, 4.0), batch(2, 0, masked_loss), batch(3, 13, 4.0)]
    return {"outcome": outcome, "source": source, "eval_loss": loss, "symptom": f"evaluation {outcome} {source}",
            "batches": batches, "kernel_calls": sum(len(b["kernel_calls"]) for b in batches),
            "masked_inputs": [count]}
