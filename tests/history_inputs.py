"""Small hand-made inputs of the history's pair reader: one unsloth reference list and a zoo table, shared by the
history's unit tests (the shapes ``probes.checks.pair_compat.references`` and ``symbols`` produce)."""

from __future__ import annotations


def refs(path: str) -> dict:
    """An unsloth release that imports ``path`` at module level of ``unsloth/models/_utils.py``."""
    return {"refs": [{"path": path, "kind": "from", "modules": 1, "file": "unsloth/models/_utils.py", "line": 3,
                      "function": None, "swallowed": [], "branch": None, "import_time": True}], "unparsed": []}


def table(*names: str) -> dict:
    """A zoo release whose module ``unsloth_zoo.loss`` binds ``names``."""
    return {"modules": {"unsloth_zoo": {"names": [], "unknown": [], "package": True},
                        "unsloth_zoo.loss": {"names": list(names), "unknown": [], "package": False}}}
