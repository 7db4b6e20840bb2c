"""The raw side (a process that never imports unsloth): generate the examples and record zoo's answers.

For every generated example, every spec of its shrink lattice, and the
non-empty twin of every input in the empty region, zoo's own kernel runs
once and leaves a compact answer (``inputs.run``) keyed by ``spec.key``.
An input in the empty region gets a second answer under ``fx``: the same
inputs through the same kernel with the divisor zoo's fix uses there
(``inputs.fixed``), i.e. what a fixed zoo answers; the defined zero and
that answer are the region's two references.
With the snapshots of ``os.environ`` and of zoo's globals this is what the
unsloth process judges against (``ctx.shared["differential"]``); it stays
small (digests and ``float.hex``, never tensors).
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from . import SHARED_KEY, example_count, faults, seed, state
from . import spec as specs

# Stop answering lattices past this many seconds (the examples themselves are always answered).
LATTICE_BUDGET_S = 120.0
# Both sides run zoo's chunk loop eagerly, whatever the cell's compile setting: hundreds of calls over
# many argument combinations would each recompile. The compiled path is the behaviour suite's extra.
COMPILE = False


def in_region(ans: dict[str, Any]) -> bool:
    """Zoo's answer is non-finite only because every label is masked and the count is zero."""
    return bool(ans.get("ez") and "e" not in ans and not ans.get("f"))


class Kernel:
    """zoo's kernel as this process sees it: the routes, and what its forward takes."""

    def __init__(self, device: str, torch_compile: bool) -> None:
        from .. import kernel

        module = kernel.ce_module()
        cls = getattr(module, kernel.FUNCTION_NAME)
        from unsloth_zoo.loss_utils import unsloth_fused_ce_loss  # bound by value, as callers do

        self.public = unsloth_fused_ce_loss
        self.signature = str(inspect.signature(cls.__dict__["forward"].__func__
                                               if isinstance(cls.__dict__["forward"], staticmethod)
                                               else cls.__dict__["forward"]))
        self.has_compute_gradients = "compute_gradients" in self.signature
        self.device = device
        self.torch_compile = torch_compile

    def answer(self, spec: dict[str, Any], fixed: bool = False) -> dict[str, Any]:
        """zoo's answer to ``spec``; ``fixed``: what a zoo carrying the fix answers (``inputs.fixed``)."""
        from .inputs import fixed as with_fix
        from .inputs import materialize, run

        with one_thread():
            call = materialize(spec, "cpu" if specs.out_of_range(spec) else self.device)
            return run(with_fix(call) if fixed else call, self.torch_compile, self.public)


def one_thread() -> Any:
    """Run the kernel on one intra-op thread in both processes, so that bits compare across them."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def scope() -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    return scope()


def raw_step(ctx: Any) -> dict[str, Any]:
    """Generate, answer, snapshot; leave it all in ``ctx.shared`` and return a short summary."""
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        k = Kernel(ctx.device, COMPILE)
    except (ImportError, AttributeError, KeyError) as exc:
        ctx.shared[SHARED_KEY] = {"absent": f"zoo's fused kernel cannot be reached: {type(exc).__name__}: {exc}"}
        return {"absent": ctx.shared[SHARED_KEY]["absent"]}
    cuda = ctx.device == "cuda"
    the_seed, count = seed(), example_count()
    examples = specs.generate(the_seed, count, has_compute_gradients=k.has_compute_gradients, cuda=cuda)
    env = state.env_snapshot()
    globals_before = state.globals_snapshot()
    answers: dict[str, dict[str, Any]] = {}
    truncated = 0

    def answer(s: dict[str, Any]) -> dict[str, Any]:
        name = specs.key(s)
        if name not in answers:
            answers[name] = k.answer(s)
            if in_region(answers[name]):
                # The region's second reference: what a zoo carrying the fix answers on the same inputs.
                answers[name]["fx"] = k.answer(s, fixed=True)
                twin = specs.normalize(specs.twin(s), has_compute_gradients=k.has_compute_gradients, cuda=cuda)
                answers[name]["twin"] = specs.key(twin)
                if answers[name]["twin"] not in answers:
                    answers[answers[name]["twin"]] = k.answer(twin)
        return answers[name]

    for s in examples:
        answer(s)
    for s in examples:
        if time.perf_counter() - start > LATTICE_BUDGET_S:
            truncated += 1
            continue
        for v in specs.lattice(s, has_compute_gradients=k.has_compute_gradients, cuda=cuda):
            answer(v)
    globals_after = state.globals_snapshot()
    injected = faults.raw(k, k.has_compute_gradients, cuda)  # zoo made to raise (d10), after the snapshots
    seconds = round(time.perf_counter() - start, 3)
    cpu_seconds = round(time.process_time() - cpu_start, 3)
    ctx.shared[SHARED_KEY] = {
        "seed": the_seed, "examples": [specs.compact(s) for s in examples], "answers": answers, "cuda": cuda,
        "has_compute_gradients": k.has_compute_gradients, "signature": k.signature,
        "env": env, "globals": globals_before,
        "globals_changed_by_calls": sorted(state.diff(globals_before, globals_after)),
        "kernel_env_keys": sorted(state.kernel_env_keys()), "seconds": seconds, "cpu_seconds": cpu_seconds,
        "lattice_truncated": truncated, faults.SHARED_KEY: injected,
    }
    region = sum(in_region(answers[specs.key(s)]) for s in examples)
    raised = sum("e" in answers[specs.key(s)] for s in examples)
    return {"seed": the_seed, "examples": len(examples), "answers": len(answers), "region_examples": region,
            "zoo_raised": raised, "lattice_truncated": truncated, "fault_target": injected["target"],
            "signature": k.signature, "seconds_in_kernel": seconds, "cpu_seconds": cpu_seconds, "compile": COMPILE}
