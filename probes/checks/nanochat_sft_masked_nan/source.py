"""Where the nanochat source tree under test is, found without importing it. Stdlib only.

In order: the path the harness handed over (``--tree nanochat=PATH``,
``probes.handoff``: what a matrix cell passes); else the tree that holds the importable ``nanochat`` package (a cell
that put the tree on ``sys.path``). A tree must hold ``nanochat/gpt.py`` and
``scripts/chat_sft.py``; anything else is :class:`NoTree` with the reason.
"""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Mapping
from pathlib import Path

from probes import handoff

from . import SOURCE

GPT = "nanochat/gpt.py"
SFT = "scripts/chat_sft.py"


class NoTree(Exception):
    """No usable nanochat source tree; the message says what was looked at."""


def _check(root: Path, how: str) -> Path:
    missing = [rel for rel in (GPT, SFT) if not (root / rel).is_file()]
    if missing:
        raise NoTree(f"{how}: {root} has no {', '.join(missing)}")
    return root.resolve()


def find_tree(trees: Mapping[str, str] | None = None) -> Path:
    trees = handoff.given().trees if trees is None else trees
    given = trees.get(str(SOURCE["tree"]))
    if given:
        return _check(Path(given), f"--tree {SOURCE['tree']}")
    try:
        spec = importlib.util.find_spec(str(SOURCE["package"]))
    except (ImportError, ValueError) as exc:
        raise NoTree(f"nanochat cannot be located ({type(exc).__name__}: {exc})") from exc
    if spec is None or not spec.submodule_search_locations:
        raise NoTree(f"no nanochat source tree: no --tree {SOURCE['tree']}=PATH given and no nanochat package is "
                     "importable")
    return _check(Path(next(iter(spec.submodule_search_locations))).parent, "the importable nanochat package")


def describe(root: Path) -> dict[str, str | None]:
    """The tree's path and, where it is a git checkout, its commit (recorded with every result)."""
    sha = None
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                 timeout=20, check=False)
            sha = out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            sha = None
    return {"path": str(root), "commit": sha}
