"""The route a real unsloth GRPO run takes: the ``UnslothGRPOTrainer`` unsloth generates, and the loss it calls.

unsloth does not call zoo's ``grpo_compute_loss`` through zoo's module: at
import it takes ``inspect.getsource`` of ``RL_REPLACEMENTS["grpo_compute_loss"]``
(and zoo's ready-made ``grpo_compute_loss_slow`` source, the same body under
``torch.compile``) into ``RL_PRE_ITEMS["grpo_trainer"]``, and the generated
trainer module (``unsloth_compiled_cache/UnslothGRPOTrainer.py``) defines its
own copies. Its ``compute_loss`` calls ``grpo_compute_loss_slow`` when it has
the log-probabilities, else ``grpo_accumulated_loss``, whose
``UnslothEfficientGRPO`` calls the module's ``grpo_compute_loss``. A guard
that wraps only zoo's module attribute never reaches either.

So this step generates the trainer with unsloth's own generator
(``unsloth.models.rl``; ``import unsloth`` generates it only where it patches
for training, not under ``UNSLOTH_ALLOW_CPU=1``), in a forked child so that
what it patches into TRL stays out of the unsloth process, and there runs, on
each of the generated module's two loss functions (the objects its namespace
holds, eager: compilation changes no arithmetic that is judged here), the
all-masked dapo call and every suite case, the count through the hand-off
read from the generated class's own ``compute_loss``. The child sends back
outcomes only.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import textwrap
import traceback
from typing import Any

from probes.common import Forked, fork_start, in_fork

TRL_MODULE = "trl.trainer.grpo_trainer"
CLASS = "UnslothGRPOTrainer"
GENERATOR_MODULE = "unsloth.models.rl"
GENERATORS = ("_patch_trl_rl_trainers_impl", "_patch_trl_rl_trainers")  # the raising one first
FUNCTIONS = ("grpo_compute_loss", "grpo_compute_loss_slow")
TIMEOUT_S = 240.0


def route_name(function: str) -> str:
    return f"{CLASS}'s {function}"


def generate() -> Any:
    """The generated trainer class (this process: call it in a child), or a string saying why there is none."""
    if importlib.util.find_spec("trl") is None:
        return "TRL is not installed"
    loaded = getattr(importlib.import_module(TRL_MODULE), "GRPOTrainer", None)
    if getattr(loaded, "__name__", "") == CLASS:
        return loaded
    rl = importlib.import_module(GENERATOR_MODULE)
    name = next((g for g in GENERATORS if callable(getattr(rl, g, None))), None)
    if name is None:
        return f"this unsloth has no trainer generator ({GENERATOR_MODULE} defines none of {', '.join(GENERATORS)})"
    getattr(rl, name)("grpo_trainer")
    made = getattr(importlib.import_module(TRL_MODULE), "GRPOTrainer", None)
    if getattr(made, "__name__", "") != CLASS:
        return f"{GENERATOR_MODULE}.{name}('grpo_trainer') did not generate {CLASS}"
    return made


def _eager() -> Any:
    """A context in which the generated ``torch.compile`` wrappers run their Python body."""
    import torch

    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is not None:
        return set_stance("force_eager")
    return torch._dynamo.config.patch(disable=True)


def _in_child() -> dict[str, Any]:
    import torch

    from probes.checks.installed import fingerprint

    from . import handoff, kernel, suite

    torch.set_num_threads(1)
    cls = generate()
    if isinstance(cls, str):
        return {"state": "n/a", "reason": cls}
    module = sys.modules[cls.__module__]
    try:
        h = handoff.read(textwrap.dedent(inspect.getsource(cls.compute_loss)))
    except Exception as exc:  # a compute_loss whose source cannot be read or sliced: the count as it comes
        h = handoff.HandOff(False, f"{CLASS}.compute_loss could not be read: {type(exc).__name__}: {exc}")

    def route(count: Any, case: Any, batch: Any) -> list[Any]:
        if not h.found:
            return [count]
        return handoff.handed(h, count, case.loss_type, batch, case.processes, batch.mask.shape[1])

    out: dict[str, Any] = {"state": "generated", "module": getattr(module, "__file__", None),
                           "handoff": h.record(), "functions": {}, "routes": {}, "suite": {}}
    case = suite.Case("s1-zero-all-masked", "dapo", (False, False), "tensor(0.)")
    with _eager():
        for name in FUNCTIONS:
            fn = vars(module).get(name)
            if not callable(fn):
                out["functions"][name] = None
                continue
            out["functions"][name] = fingerprint(_unwrapped_compile(fn))
            try:
                handed = route(suite.count_value(case.count), case, suite.batch_of(case))
                masked = kernel.outcome(suite.batch_of(case), fn, count=handed[0])
            except Exception as exc:
                masked = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            out["routes"][route_name(name)] = {k: v for k, v in masked.items() if k not in ("grad_hex", "loss_hex")}
            out["suite"][route_name(name)] = suite.guarded(route, fn)
    return out


def _unwrapped_compile(fn: Any) -> Any:
    """The Python function under torch's and zoo's ``torch.compile`` wrappers (to fingerprint it). Only a wrapper
    whose code lives in torch or zoo is followed: a guard's wrapper has code of its own and is fingerprinted."""
    for _ in range(4):
        inner = getattr(fn, "_torchdynamo_orig_callable", None)
        code_file = str(getattr(getattr(fn, "__code__", None), "co_filename", ""))
        if inner is None and any(f"{sep}{pkg}{sep}" in code_file for pkg in ("torch", "unsloth_zoo")
                                 for sep in ("/", "\\")):
            inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            return fn
        fn = inner
    return fn


def _child(conn: Any) -> None:
    try:
        out = _in_child()
    except Exception as exc:  # the generation or the probe failed: a finding with its reason
        out = {"state": "error", "reason": f"{type(exc).__name__}: {str(exc)[:300]}",
               "traceback": traceback.format_exc(limit=8)[-1500:]}
    conn.send(out)
    conn.close()


def run(timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """The trainer route's evidence, from a forked child: ``state`` ``generated`` (with ``handoff``,
    ``functions`` fingerprints, the all-masked ``routes`` and the ``suite`` outcomes), ``n/a`` or ``error``."""
    return in_fork(_child, (), timeout, f"generating {CLASS} and probing it")


def start(timeout: float = TIMEOUT_S) -> Forked:
    """:func:`run`'s child started now and collected later (``.result()``), so that it runs beside the steps
    before the one that reads it."""
    return fork_start(_child, (), timeout, f"generating {CLASS} and probing it")
