"""Inputs of the static detector: a wheel's files or the installed package, read as text and never imported.

``files_reader`` / ``analyze_files`` serve the scan (``{relative path: text}`` of a wheel's members);
``locate_installed``, ``installed_reader`` and ``detect_installed`` serve the probe, which finds the installed
``unsloth_zoo`` with ``importlib.util.find_spec`` and reads its files.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path

from .judge import analyze_source
from .values import CE_MODULE, CE_PATH, CE_REL, ModuleReader, StaticVerdict


def files_reader(files: Mapping[str, str]) -> ModuleReader:
    """A ``read_module`` over ``{relative path: text}`` (``unsloth_zoo/x/y.py`` or ``.../__init__.py``)."""
    by_path = {k.replace("\\", "/").lstrip("./"): v for k, v in files.items()}

    def read(dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        return by_path.get(f"{base}.py", by_path.get(f"{base}/__init__.py"))

    return read


def analyze_files(files: Mapping[str, str]) -> StaticVerdict:
    """Judge a zoo release from its Python files, ``{relative path: text}`` with paths like
    ``unsloth_zoo/fused_losses/cross_entropy_loss.py`` (other files of the wheel are read as needed)."""
    reader = files_reader(files)
    text = reader(CE_MODULE)
    if text is None:
        return StaticVerdict("absent", f"no {CE_PATH}", None)
    return analyze_source(text, CE_PATH, read_module=reader)


def locate_installed() -> Path | None:
    """Path of the installed zoo CE module, found without executing zoo."""
    spec = importlib.util.find_spec("unsloth_zoo")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        candidate = Path(loc).joinpath(*CE_REL)
        if candidate.is_file():
            return candidate
    return None


def installed_reader(roots: Iterable[Path]) -> ModuleReader:
    """A ``read_module`` over the installed package directories (files are read, never imported)."""
    roots = list(roots)

    def read(dotted: str) -> str | None:
        parts = dotted.split(".")
        if parts[0] != "unsloth_zoo":
            return None
        for root in roots:
            base = root.joinpath(*parts[1:])
            for cand in (base.with_name(base.name + ".py") if parts[1:] else None, base / "__init__.py"):
                if cand is not None and cand.is_file():
                    return cand.read_text(encoding="utf-8", errors="replace")
        return None

    return read


def detect_installed() -> StaticVerdict:
    spec = importlib.util.find_spec("unsloth_zoo")
    if spec is None:
        return StaticVerdict("absent", "unsloth_zoo is not installed")
    path = locate_installed()
    if path is None:
        return StaticVerdict("absent", "unsloth_zoo has no fused_losses/cross_entropy_loss.py")
    roots = [Path(loc) for loc in spec.submodule_search_locations or []]
    return analyze_source(path.read_text(encoding="utf-8", errors="replace"), str(path),
                          read_module=installed_reader(roots))
