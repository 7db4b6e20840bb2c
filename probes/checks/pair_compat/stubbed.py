"""The ``stubbed`` import mode: answer the accelerator queries ``import unsloth`` makes, in the probe process only.

Releases of unsloth before mid-2026 ask the GPU inside ``import unsloth`` (2024.12 .. 2026.5:
``torch.cuda.get_device_capability()`` and ``is_bf16_supported()`` in ``unsloth/__init__.py``, 2025.3 first raises
when ``torch.cuda.is_available()`` is False; zoo's ``device_type.py`` asks ``is_available`` and the device's
name and properties; ``unsloth/kernels/utils.py`` and ``models/_utils.py`` ask the capability, the device count and
free memory; zoo's ``temporary_patches/gpt_oss.py`` asks ``torch.cuda.memory.mem_get_info``), so on a CPU host
the runtime side of such a pair is ``n/a``. :func:`install` makes torch answer as
one Ampere GPU (:data:`DEVICE`) would: the queries return fixed values, the calls that only manage a device
(``synchronize``, ``empty_cache``, ``set_device``, the ``torch.cuda.device`` context) do nothing. No kernel can run:
a tensor moved to ``cuda`` still fails, so whatever needs more than the answers stays a failure, which the caller
classifies (a failure that names no zoo name is ``n/a``: the stubs were not enough).

Two more things the old imports do are made harmless here, because the process runs in a throwaway env on a
shared host: ``triton``'s ``libcuda_dirs()`` answers an empty list (else unsloth 2024.12 .. 2026.5 runs
``ldconfig`` as a recovery) and ``os.system`` runs nothing (it answers exit 127 and the command is recorded in
:attr:`Stubbed.refused`): those releases run ``ldconfig`` and ``pip install --upgrade unsloth_zoo`` (2025.1 ..
2025.3) through it. The caller also sets ``UNSLOTH_DISABLE_AUTO_UPDATES=1`` and pip/uv offline.

Stdlib and torch only; torch is imported by :func:`install`, not by importing this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

GIB = 1024**3


@dataclass(frozen=True)
class Device:
    """What the stubs answer for the one device they pretend to have."""

    name: str = "NVIDIA A100-SXM4-80GB"
    capability: tuple[int, int] = (8, 0)  # Ampere: bf16, the route every release of the window supports
    total_memory: int = 80 * GIB
    multi_processor_count: int = 108


DEVICE = Device()


@dataclass
class Stubbed:
    """What :func:`install` replaced (``module.name``), and the commands ``os.system`` was asked to run."""

    device: Device
    patched: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device.name, "capability": list(self.device.capability), "patched": self.patched,
                "refused": self.refused}


def properties(device: Device) -> SimpleNamespace:
    """What ``torch.cuda.get_device_properties`` answers (the attributes the releases read)."""
    major, minor = device.capability
    return SimpleNamespace(name=device.name, major=major, minor=minor, total_memory=device.total_memory,
                           multi_processor_count=device.multi_processor_count, is_integrated=False,
                           is_multi_gpu_board=False, gcnArchName="", uuid="00000000-0000-0000-0000-000000000000",
                           L2_cache_size=40 * 1024**2, warp_size=32, max_threads_per_multi_processor=2048,
                           regs_per_multiprocessor=65536, shared_memory_per_block_optin=163 * 1024)


class _NoDevice:
    """``torch.cuda.device(i)``: a context that selects nothing (there is nothing to select)."""

    def __init__(self, device: Any = None) -> None:
        self.idx = device if isinstance(device, int) else 0

    def __enter__(self) -> _NoDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _returning(value: Any) -> Any:
    """A fresh function answering ``value`` whatever it is asked (one object per stub: torch's compiler keeps a
    rule per torch function object, and one object under two names with two rules is an error)."""

    def stub(*_a: Any, **_k: Any) -> Any:
        return value

    return stub


def answers(device: Device) -> dict[str, Any]:
    """``torch.cuda`` attribute -> its stub."""
    major_minor = device.capability
    free = device.total_memory - GIB
    queries = {"is_available": True, "device_count": 1, "current_device": 0, "get_device_capability": major_minor,
               "get_device_name": device.name, "get_device_properties": properties(device),
               "is_bf16_supported": major_minor >= (8, 0), "mem_get_info": (free, device.total_memory),
               "memory_allocated": 0, "memory_reserved": 0, "max_memory_allocated": 0, "max_memory_reserved": 0}
    no_ops = ("synchronize", "empty_cache", "ipc_collect", "set_device", "reset_peak_memory_stats")
    return {**{k: _returning(v) for k, v in queries.items()}, **{k: _returning(None) for k in no_ops},
            "device": _NoDevice}


def install(device: Device = DEVICE) -> Stubbed:
    """Replace the accelerator queries (see the module docstring); returns what was replaced and records
    what ``os.system`` is later asked to run."""
    import torch  # the one package imported here: the stubs are torch's

    done = Stubbed(device)
    memory = getattr(torch.cuda, "memory", None)
    for name, stub in answers(device).items():
        setattr(torch.cuda, name, stub)
        done.patched.append(f"torch.cuda.{name}")
        # torch.cuda re-exports torch.cuda.memory's functions: a caller that spells the submodule
        # (zoo's temporary_patches/gpt_oss.py: `torch.cuda.memory.mem_get_info(0)`) reaches the original. The same
        # stub object under both names, as torch has the same function under both.
        if memory is not None and hasattr(memory, name):
            setattr(memory, name, stub)
            done.patched.append(f"torch.cuda.memory.{name}")
    # unsloth/kernels/utils.py (2025.3 ..) keeps each device's current stream, asked of torch's C module directly
    torch._C._cuda_getCurrentRawStream = _returning(0)
    done.patched.append("torch._C._cuda_getCurrentRawStream")

    def refuse(command: str) -> int:
        done.refused.append(str(command)[:200])
        return 127

    os.system = refuse
    done.patched.append("os.system")
    _triton(done)
    return done


def _triton(done: Stubbed) -> None:
    """``libcuda_dirs()`` answers no directory instead of raising (there is no libcuda on a CPU host)."""
    try:
        from triton.backends.nvidia import driver
    except Exception:  # no triton, or a triton without the NVIDIA backend: unsloth's own fallback applies
        return
    if hasattr(driver, "libcuda_dirs"):
        driver.libcuda_dirs = lambda: []
        done.patched.append("triton.backends.nvidia.driver.libcuda_dirs")
