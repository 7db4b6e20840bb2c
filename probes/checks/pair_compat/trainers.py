"""The trainer classes unsloth generates from TRL's source through zoo (``UnslothSFTTrainer``,
``UnslothGRPOTrainer``), generated in a cell after its own ``import unsloth`` succeeded.

unsloth rewrites TRL's trainer source and has zoo's compiler (``create_new_function``) write and import the
result, with zoo's RL replacements spliced in; the rewritten source imports zoo names that no static reading
of unsloth's own files sees (they sit in strings). ``import unsloth`` does this only where it patches for
training (``PatchFastRL``: not under ``UNSLOTH_ALLOW_CPU=1``, the cell's default CPU mode), so this step calls
unsloth's own per-trainer generator (``unsloth.models.rl``; the newest releases split it into a wrapper that
logs and swallows and an ``_impl`` that raises, which is preferred) once per trainer, each in a forked child:
what it patches into TRL (the generated class replaces ``trl.trainer.<module>.<Class>``) stays out of this
process, and a hang costs :data:`TIMEOUT_S`, not the cell.

Per trainer, ``state``:

* ``generated`` -- ``trl.trainer.<module>.<Class>`` is unsloth's ``Unsloth<Class>`` afterwards (or was already:
  an import that patched for training);
* ``skew`` -- the generation failed on zoo: an ImportError, AttributeError or NameError whose chain names
  ``unsloth_zoo`` (the innermost such message is kept), or a swallowed one that unsloth logged;
* ``n/a`` -- with the reason: ``import unsloth`` failed, TRL or its trainer module is not installed, this
  unsloth has no generator, or the generation needs an accelerator;
* ``error`` -- anything else, with the message.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
import sys
import time
from typing import Any

from probes.common import Forked, dist_version, exception_chain, fork_start, in_fork

# (label, TRL module under trl.trainer, TRL class, the feature a failure degrades)
TRAINERS: tuple[tuple[str, str, str, str], ...] = (
    ("SFT", "sft_trainer", "SFTTrainer", "SFT trainer"),
    ("GRPO", "grpo_trainer", "GRPOTrainer", "RL trainers"),
)
GENERATOR_MODULE = "unsloth.models.rl"
GENERATORS = ("_patch_trl_rl_trainers_impl", "_patch_trl_rl_trainers")  # raising one first
SKEW_TYPES = ("ImportError", "ModuleNotFoundError", "AttributeError", "NameError")
ACCELERATOR_WORDS = ("cuda", "gpu", "accelerator", "device capability", "nvidia", "no backend")
TIMEOUT_S = 180.0
STATES = ("generated", "skew", "n/a", "error")
# A failure unsloth caught and logged ("Could not build the patched trl.trainer.x ...: ImportError: ...").
LOGGED_ERROR = re.compile(r"\b(" + "|".join(SKEW_TYPES) + r"|[A-Z]\w*(?:Error|Exception)): (.*)", re.S)
TRL_LACKS = ("Could not import trl.trainer", "Could not find Trainer class", "Could not find Config class",
             "Could not load")


def names_zoo(link: dict[str, Any]) -> bool:
    """Does one link of an exception chain name zoo (its message, its ``name``; a NameError by where it was
    raised, since its message names only the missing name)?"""
    if "unsloth_zoo" in f"{link.get('message') or ''} {link.get('name') or ''}":
        return True
    return link.get("type") == "NameError" and any("unsloth_zoo" in w for w in link.get("where") or [])


def judge_failure(chain: list[dict[str, Any]]) -> tuple[str, str]:
    """``(state, reason)`` of a failed generation from its exception chain (outermost first)."""
    for link in reversed(chain):  # the innermost zoo error names what is missing, not a wrapper
        if link.get("type") in SKEW_TYPES and names_zoo(link):
            return "skew", f"{link['type']}: {str(link.get('message'))[:300]}"
    for link in chain:
        if any(w in str(link.get("message")).lower() for w in ACCELERATOR_WORDS):
            return "n/a", f"needs an accelerator: {link['type']}: {str(link.get('message'))[:300]}"
    first = chain[0] if chain else {"type": "?", "message": "no exception recorded"}
    return "error", f"{first['type']}: {str(first.get('message'))[:300]}"


def judge_logged(messages: list[str]) -> tuple[str, str]:
    """``(state, reason)`` when the generator returned without generating, from what unsloth logged."""
    said = [m for m in messages if "Could not" in m or "Error" in m]
    for m in said:
        found = LOGGED_ERROR.search(m)
        if found and found.group(1) in SKEW_TYPES and "unsloth_zoo" in found.group(2):
            return "skew", f"{found.group(1)}: {found.group(2).strip()[:300]} (unsloth caught and logged it)"
    for m in said:
        if any(m.lstrip().removeprefix("Unsloth: ").startswith(p) for p in TRL_LACKS):
            return "n/a", f"this TRL lacks it: {m.strip()[:300]}"
    why = said[-1].strip()[:300] if said else "nothing logged"
    return "error", f"unsloth's generator returned without generating the class ({why})"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def generate(module: str, cls: str) -> dict[str, Any]:
    """In this process: generate ``Unsloth<cls>`` from ``trl.trainer.<module>`` with unsloth's generator."""
    if importlib.util.find_spec("trl") is None:
        return {"state": "n/a", "reason": "TRL is not installed"}
    trl_module = f"trl.trainer.{module}"
    try:
        found = importlib.util.find_spec(trl_module)
    except Exception as exc:  # the parent package itself failed to import
        return {"state": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    if found is None:
        return {"state": "n/a", "reason": f"TRL {dist_version('trl')} has no {trl_module}"}
    loaded = sys.modules.get(trl_module)
    if loaded is not None and getattr(getattr(loaded, cls, None), "__name__", "") == f"Unsloth{cls}":
        return {"state": "generated", "reason": "already generated by import unsloth", "class": f"Unsloth{cls}"}
    rl = importlib.import_module(GENERATOR_MODULE)
    name = next((g for g in GENERATORS if callable(getattr(rl, g, None))), None)
    if name is None:
        return {"state": "n/a", "reason": f"this unsloth has no trainer generator ({GENERATOR_MODULE} defines "
                                          f"none of {', '.join(GENERATORS)})"}
    capture = _Capture()
    log = getattr(rl, "logger", None)
    loggers = [lg for lg in (log, logging.getLogger()) if isinstance(lg, logging.Logger)]
    for lg in loggers:  # a forked child: what is changed here ends with it
        lg.addHandler(capture)
        lg.setLevel(logging.INFO)
    getattr(rl, name)(module)
    made = getattr(importlib.import_module(trl_module), cls, None)
    if getattr(made, "__name__", "") == f"Unsloth{cls}":
        return {"state": "generated", "reason": f"{GENERATOR_MODULE}.{name}({module!r})", "class": made.__name__}
    state, reason = judge_logged(capture.messages)
    return {"state": state, "reason": reason}


def _child(conn: Any, module: str, cls: str) -> None:
    try:
        out = generate(module, cls)
    except Exception as exc:  # the finding: how the generation failed
        state, reason = judge_failure(exception_chain(exc))
        out = {"state": state, "reason": reason, "chain": exception_chain(exc)}
    conn.send(out)
    conn.close()


def forked(module: str, cls: str, timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """:func:`generate` in a forked child (its patches and a hang stay there), judged by its result or end."""
    return in_fork(_child, (module, cls), timeout, f"generating {cls}")


def start(timeout: float = TIMEOUT_S) -> dict[str, Forked]:
    """Every trainer's generation started at once, each in its own forked child, by TRL module: collected by
    :func:`trainers` (``run=started(...)``). zoo's compiler writes each generated trainer under its own name,
    behind a lock per file, so the children do not meet."""
    return {module: fork_start(_child, (module, cls), timeout, f"generating {cls}") for _, module, cls, _ in TRAINERS}


def started(children: dict[str, Forked]) -> Any:
    """A ``run`` for :func:`trainers` that collects what :func:`start` started (or generates one not started)."""
    def run(module: str, cls: str) -> dict[str, Any]:
        child = children.get(module)
        return child.result() if child is not None else forked(module, cls)
    return run


def trainers(imported: dict[str, Any] | None, run: Any = forked) -> dict[str, Any]:
    """Every trainer of :data:`TRAINERS`, each ``{trainer, module, feature, state, reason, seconds}`` (the
    seconds this call waited for it: less than the generation took when it was started early)."""
    rows = []
    for label, module, cls, feature in TRAINERS:
        base = {"trainer": label, "module": f"trl.trainer.{module}", "feature": feature, "class": f"Unsloth{cls}"}
        if not (imported or {}).get("imported"):
            rows.append({**base, "state": "n/a", "reason": "import unsloth failed", "seconds": 0.0})
            continue
        start = time.perf_counter()
        got = run(module, cls)
        rows.append({**base, **got, "seconds": round(time.perf_counter() - start, 3)})
    return {"trainers": rows, "trl": dist_version("trl")}
