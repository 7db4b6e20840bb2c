"""Bad input never yields a traceback: the matrix loader and the cell-result loader, fuzzed.

Every input either loads or raises the loader's own error type with a message
naming the file; nothing else escapes (no KeyError, TypeError, RecursionError...).
"""

from __future__ import annotations

import json
import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matrix import spec
from matrix.cells.collect import ResultFileError, load_cell
from matrix.errors import SpecError
from tests.reports.cells import make_cell

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True), st.text(max_size=40))
json_values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                           st.dictionaries(st.text(max_size=12), kids, max_size=4)),
                           max_leaves=20)
keys = st.sampled_from(["schema", "options", "build", "pairs", "gate", "name", "package", "source", "version",
                        "path", "url", "ref", "base", "backport", "include", "exclude", "product", "fail_on",
                        "python", "device", "compile", "timeout", "torch", "cpu_mode", "unsloth", "zoo"])
toml_scalars = st.one_of(st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
                         st.text(alphabet=string.printable + "éü☃\u202e", max_size=30),
                         st.sampled_from(["pypi", "path", "git", "backport", "unsloth", "unsloth_zoo", "2026.9.3",
                                          "../../etc/passwd", "/etc/passwd", "a" * 5000, "cpu", "on"]))
inline = st.dictionaries(keys, toml_scalars, max_size=4)
tables = st.dictionaries(keys, st.one_of(toml_scalars, st.lists(st.one_of(toml_scalars, inline), max_size=3), inline),
                         max_size=6)
documents = st.dictionaries(keys, st.one_of(toml_scalars, tables, st.lists(tables, max_size=4)), max_size=5)

COUNTS = {"matrix_text": 0, "matrix_data": 0, "cell": 0}


def _quote(v: object) -> str:
    return json.dumps(v) if not isinstance(v, bool) else str(v).lower()


def to_toml(doc: dict) -> str:
    """A naive TOML writer: enough to reach the validator with odd shapes and values."""
    lines, tails = [], []
    for k, v in doc.items():
        if isinstance(v, dict):
            tails.append(f"[{k}]\n" + "".join(f"{kk} = {_scalar(vv)}\n" for kk, vv in v.items()))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for t in v:
                tails.append(f"[[{k}]]\n" + "".join(f"{kk} = {_scalar(vv)}\n" for kk, vv in t.items()))
        else:
            lines.append(f"{k} = {_scalar(v)}")
    return "\n".join(lines) + "\n" + "\n".join(tails)


def _scalar(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_scalar(x)}" for k, x in v.items()) + "}"
    return _quote(v)


@SETTINGS
@given(text=st.text(max_size=400))
def test_matrix_loader_on_arbitrary_text(tmp_path: Path, text: str) -> None:
    COUNTS["matrix_text"] += 1
    p = tmp_path / "fuzz.toml"
    p.write_text(text, encoding="utf-8")
    try:
        spec.load(p, check_index=False)
    except SpecError as exc:
        assert str(p) in str(exc) and exc.problems


@SETTINGS
@given(doc=documents)
def test_matrix_loader_on_structured_documents(tmp_path: Path, doc: dict) -> None:
    COUNTS["matrix_data"] += 1
    p = tmp_path / "fuzz.toml"
    p.write_text(to_toml(doc), encoding="utf-8")
    try:
        m = spec.load(p, check_index=False)
    except SpecError as exc:
        assert str(p) in str(exc) and all(isinstance(x, str) and x for x in exc.problems)
    else:
        assert m.cells, "a loaded matrix always has at least one cell"


def _index_ok(target: object, key: object) -> bool:
    if isinstance(target, dict):
        return True
    return isinstance(target, list) and isinstance(key, int) and -len(target) <= key < len(target)


def _mutate(cell: dict, path: list, value: object) -> dict:
    target = cell
    for key in path[:-1]:
        if not _index_ok(target, key) or (isinstance(target, dict) and key not in target):
            return cell
        target = target[key]
    if _index_ok(target, path[-1]):
        target[path[-1]] = value
    return cell


paths = st.lists(st.one_of(st.sampled_from(["builds", "unsloth", "zoo", "probes", "steps", "result", "static",
                                            "verdict", "forward", "original", "tests", "error", "kind", "message",
                                            "admissible", "value", "classification", "torch", "name", "options",
                                            "installed", "routes", "public", "seconds", "describe"]),
                           st.integers(min_value=-3, max_value=3)), min_size=1, max_size=6)


@SETTINGS
@given(path=paths, value=json_values)
def test_cell_loader_on_mutated_results(tmp_path: Path, path: list, value: object) -> None:
    COUNTS["cell"] += 1
    cell = _mutate(make_cell(), path, value)
    p = tmp_path / "cell.json"
    p.write_text(json.dumps(cell), encoding="utf-8")
    try:
        load_cell(p)
    except ResultFileError as exc:
        assert str(p) in str(exc)


@SETTINGS
@given(raw=st.binary(max_size=300))
def test_cell_loader_on_garbage(tmp_path: Path, raw: bytes) -> None:
    p = tmp_path / "cell.json"
    p.write_bytes(raw)
    try:
        load_cell(p)
    except ResultFileError as exc:
        assert str(p) in str(exc)
