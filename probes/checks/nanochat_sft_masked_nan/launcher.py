"""Run the tree's ``scripts/chat_sft.py`` unmodified, as ``python -m scripts.chat_sft`` does, and record what it did.

``python -P launcher.py RECORD.json scripts.chat_sft ARGS...`` (the tree on
``PYTHONPATH``). The script runs through ``runpy.run_module(...,
run_name="__main__", alter_sys=True)``: the same module, globals and
``sys.argv`` shape as ``-m``. Two passive observers, neither of which
changes a value the script sees:

* ``builtins.next`` is wrapped: when the script pulls a micro-batch from its
  own ``train`` loader (a generator defined in ``chat_sft.py`` whose
  ``split`` local is ``"train"``), the number of targets that are not -1 is
  noted, per row. So a micro-batch is seen even when the loop never hands
  it to the model.
* ``torch.compile`` is wrapped: the module it returns gets a forward hook --
  outside the compiled region, so the compiled graph is the script's own --
  that notes each training-mode call (the micro-batch it belongs to, its
  valid targets, the loss value and whether it has a grad_fn) and how many
  parameters are non-finite at that moment (the weights the previous step
  left).

At exit (clean or not) ``RECORD.json`` holds those notes, the non-finite
parameter count of the model at the end, and the exception that ended the
run, if any; the exception is then re-raised so the run exits as it would.
Stdlib at import; torch is imported when the script imports it.
"""

from __future__ import annotations

import builtins
import json
import math
import runpy
import sys
import traceback
from typing import Any

IGNORE = -1
STATE: dict[str, Any] = {"micro_batches": [], "forwards": [], "compiled": False, "exception": None,
                         "final_nonfinite_params": None}
_MODEL: list[Any] = []
_next = builtins.next


def _number(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)


def _train_loader(obj: Any) -> bool:
    frame = getattr(obj, "gi_frame", None)
    code = getattr(obj, "gi_code", None)
    return (frame is not None and code is not None and code.co_filename.endswith("chat_sft.py")
            and frame.f_locals.get("split") == "train")


def recording_next(obj: Any, *default: Any) -> Any:
    watched = _train_loader(obj)
    value = _next(obj, *default)
    if watched and isinstance(value, tuple) and len(value) == 2:
        y = value[1]
        rows = [int(v) for v in (y != IGNORE).sum(dim=-1).tolist()]
        STATE["micro_batches"].append({"index": len(STATE["micro_batches"]), "valid_targets": sum(rows),
                                       "rows_valid": rows})
    return value


def _nonfinite(module: Any) -> int:
    import torch

    return sum(int((~torch.isfinite(p.detach())).sum()) for p in module.parameters())


def _hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
    if not module.training:
        return
    targets = args[1] if len(args) > 1 else kwargs.get("targets")
    if targets is None:
        return
    value = float(output.detach().float().reshape(-1)[0]) if output.numel() == 1 else None
    STATE["forwards"].append({
        "micro_batch": len(STATE["micro_batches"]) - 1,  # the loop prefetches after the forward
        "valid_targets": int((targets != IGNORE).sum()),
        "loss": None if value is None else _number(value),
        "grad_fn": output.grad_fn is not None,
        "nonfinite_params": _nonfinite(module),
    })


def install() -> None:
    import torch

    original = torch.compile

    def compile_recorded(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        compiled = original(model, *args, **kwargs)
        if isinstance(model, torch.nn.Module) and isinstance(compiled, torch.nn.Module) and not _MODEL:
            _MODEL.append(model)
            STATE["compiled"] = compiled is not model
            compiled.register_forward_hook(torch.compiler.disable(_hook), with_kwargs=True)
        return compiled

    torch.compile = compile_recorded
    builtins.next = recording_next


def main(argv: list[str]) -> int:
    record, module, args = argv[0], argv[1], argv[2:]
    sys.argv = [module, *args]
    install()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code not in (0, None):
            STATE["exception"] = {"type": "SystemExit", "message": str(exc.code), "frames": []}
        raise
    except BaseException as exc:
        STATE["exception"] = {"type": type(exc).__name__, "message": str(exc).splitlines()[0] if str(exc) else "",
                              "frames": [[f.filename, f.lineno, f.name, f.line or ""]
                                         for f in traceback.extract_tb(exc.__traceback__)[-16:]]}
        raise
    finally:
        builtins.next = _next
        if _MODEL:
            STATE["final_nonfinite_params"] = _nonfinite(_MODEL[0])
        with open(record, "w", encoding="utf-8") as fh:
            json.dump(STATE, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
