"""The cases of the GPU check and the exact wheels each one needs: data, shared by the builder and the runner.

A case is one unsloth build on one zoo build, installed with ``--no-deps``
next to an existing CUDA Python that already has torch, transformers, peft and
accelerate. Each case pins every extra distribution that ``import unsloth``
and the probes need on such an image (measured here: on an env holding only
what the GPU image holds, ``import unsloth`` failed on ``datasets``, then on
``multiprocess``, and passed once these were added). The companion pins are
the versions uv resolved for the same pair in a full env (``/work/envs``), so
each case runs the trl and datasets its zoo was resolved with. Left out on
purpose, each imported by unsloth only inside ``try`` (it degrades without
them): bitsandbytes (4-bit and the 8-bit optimizer; the wheel alone is about
the whole 64 MiB budget), xformers (built against one torch release; unsloth
falls back to SDPA), torchao (C++ extension tied to a torch release),
diffusers and hf_transfer (diffusion models and downloads: neither is used
offline).
"""

from __future__ import annotations

from dataclasses import dataclass

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
DTYPES = ("fp32", "bf16", "fp16+scaler")


@dataclass(frozen=True)
class Case:
    """One unsloth build x one zoo build, by the build names the matrix files use."""

    name: str
    unsloth_build: str  # "u2026.10.9" (PyPI) or "u2026.10.9-guard" (our backport)
    zoo_version: str
    guard: bool

    @property
    def zoo_build(self) -> str:
        return f"z{self.zoo_version}"

    def pins(self) -> tuple[tuple[str, str], ...]:
        """(project, version) of every wheel this case installs; unsloth comes from the guard wheel when ``guard``."""
        unsloth = () if self.guard else (("unsloth", UNSLOTH_VERSION),)
        return (*unsloth, ("unsloth-zoo", self.zoo_version), *COMPANIONS[self.zoo_version])

    def unsloth_row(self, compile_mode: str) -> str:
        """The build name of this case's GPU row: distinct from the CPU row, so both fit one report."""
        return f"{self.unsloth_build}-cuda-compile-{compile_mode}"

    def cell_id(self, compile_mode: str) -> str:
        return f"{self.unsloth_row(compile_mode)}__{self.zoo_build}"


CASES: tuple[Case, ...] = (
    Case("zoo-2026.9.3", "u2026.10.9", "2026.9.3", guard=False),
    Case("zoo-2026.10.9", "u2026.10.9", "2026.10.9", guard=False),
    Case("guard-zoo-2026.9.3", "u2026.10.9-guard", "2026.9.3", guard=True),
)


def case(name: str) -> Case:
    for c in CASES:
        if c.name == name:
            return c
    raise KeyError(f"no GPU case {name!r}; cases: {', '.join(c.name for c in CASES)}")


def all_pins() -> list[tuple[str, str]]:
    """Every (project, version) some case needs, once, plus the guard's base wheel."""
    seen: dict[tuple[str, str], None] = {("unsloth", UNSLOTH_VERSION): None}
    for c in CASES:
        for pin in c.pins():
            seen.setdefault(pin, None)
    return list(seen)
