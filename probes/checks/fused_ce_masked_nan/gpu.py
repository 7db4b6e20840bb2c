"""This check's GPU measurement (contract: ``probes/checks/__init__.py``): its cases, wheels and table.

Does an all-masked microbatch poison gradients and weights on a GPU? Three
cases (zoo 2026.9.3, vulnerable; zoo 2026.10.9, fixed; our guard on
2026.9.3), each one unsloth build on one zoo build, installed with
``--no-deps`` next to an existing CUDA Python that already has torch,
transformers, peft and accelerate. Each case pins every extra distribution
that ``import unsloth`` and the probes need on such an image (measured here:
on an env holding only what the GPU image holds, ``import unsloth`` failed
on ``datasets``, then on ``multiprocess``, and passed once these were
added). The companion pins are the versions uv resolved for the same pair in
a full env (``/work/envs``), so each case runs the trl and datasets its zoo
was resolved with. Left out on purpose, each imported by unsloth only inside
``try`` (it degrades without them): bitsandbytes (4-bit and the 8-bit
optimizer; the wheel alone is about the whole 64 MiB budget), xformers
(built against one torch release; unsloth falls back to SDPA), torchao (C++
extension tied to a torch release), diffusers and hf_transfer (diffusion
models and downloads: neither is used offline).

``gpu_measure.py`` measures in each case's interpreter; ``summary_table``
says what went non-finite, per case, compile mode and dtype.
"""

from __future__ import annotations

from typing import Any

from probes.checks.capabilities import GpuCase, GpuMeasure

from .gpu_measure import DTYPES

UNSLOTH_VERSION = "2026.10.9"
GUARD_BACKPORT = "unsloth-guard"  # matrix/backports/unsloth-guard

# What uv resolved with each zoo here (see the module docstring).
COMPANIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "2026.9.3": (("trl", "0.24.0"), ("datasets", "4.3.0"), ("dill", "0.4.0"), ("multiprocess", "0.70.16"),
                 ("cut-cross-entropy", "25.1.1")),
    "2026.10.9": (("trl", "1.15.0"), ("datasets", "4.8.5"), ("dill", "0.4.1"), ("multiprocess", "0.70.19"),
                  ("cut-cross-entropy", "25.1.1")),
}
# Interpreters the wheelhouse serves: 3.12 is the GPU image's python3, 3.11 the
# project's (the CPU dry run). Only version-specific wheels differ between them.
PYTHONS = ("3.11", "3.12")
COMPILE_MODES = ("off", "on")


def _case(name: str, unsloth_build: str, zoo: str, guard: bool) -> GpuCase:
    return GpuCase(name, unsloth_build, UNSLOTH_VERSION, zoo, guard, COMPANIONS[zoo])


CASES: tuple[GpuCase, ...] = (
    _case("zoo-2026.9.3", "u2026.10.9", "2026.9.3", guard=False),
    _case("zoo-2026.10.9", "u2026.10.9", "2026.10.9", guard=False),
    _case("guard-zoo-2026.9.3", "u2026.10.9-guard", "2026.9.3", guard=True),
)


def mark(flag: bool | None) -> str:
    return "n/a" if flag is None else ("**non-finite**" if flag else "finite")


def summary_table(cells: list[dict[str, Any]]) -> str:
    """The Markdown table for reports/gpu/README.md: what went non-finite, per case, compile mode and dtype."""
    lines = ["| case | compile | dtype | loss (all-masked) | gradients | weights after AdamW | GradScaler |",
             "|---|---|---|---|---|---|---|"]
    for cell in cells:
        gpu = cell["gpu"]
        mode = gpu.get("mode") or {}
        for dtype in DTYPES:
            rows = [e for e in mode.get("entries", []) if e["dtype"] == dtype]
            ok = [e for e in rows if e.get("status") == "ok"]
            if not ok:
                reasons = sorted({e.get("reason") or e.get("status", "?") for e in rows}) or [gpu.get("reason") or "?"]
                lines.append(f"| {gpu['case']} | {gpu['compile']} | {dtype} | {reasons[0]} | - | - | - |")
                continue
            masked = [e for e in ok if e["batch"].startswith("all_masked")]
            adamw = [e for e in masked if e["optimizer"] == "adamw"]
            loss_bad = any(not e["loss"]["finite"] for e in masked)
            grads_bad = any(not g.get("finite", True) for e in masked for g in e["grads"].values())
            w_bad = any(not w["finite"] for e in adamw for w in e["weights_after_step"].values())
            moved = any(w["changed"] for e in adamw for w in e["weights_after_step"].values())
            scaled = [e for e in masked if e.get("scaler")]
            scaler = ("skipped" if any(e["scaler"]["skipped_step"] for e in scaled) else "stepped") if scaled else "-"
            errors = len(rows) - len(ok) - sum(1 for e in rows if e.get("status") == "n/a")
            note = f" ({errors} error)" if errors else ""
            lines.append(f"| {gpu['case']} | {gpu['compile']} | {dtype} | {mark(loss_bad)}{note} | {mark(grads_bad)} | "
                         f"{mark(w_bad)}{', moved' if moved else ''} | {scaler} |")
    return "\n".join(lines) + "\n"


MEASURE = GpuMeasure(
    module=__name__.rsplit(".", 1)[0] + ".gpu_measure",
    cases=CASES,
    unsloth_version=UNSLOTH_VERSION,
    guard_backport=GUARD_BACKPORT,
    pythons=PYTHONS,
    compile_modes=COMPILE_MODES,
    matrix="matrix/gpu.toml",
    summary=summary_table,
)
