"""A cell with a trainer stack: overrides and admissibility lines, the cell JSON's ``stack``, the digest."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from matrix import spec
from matrix.cells import cell as cell_mod
from matrix.cells.cell import CellRun
from matrix.envs import envrun, recipe
from matrix.envs.tools import Ran
from matrix.sources import Materialized
from matrix.spec import trees
from tests.matrices import ONE_CELL

STACK = '[options]\ntorch = ">=2.12,<2.15"\n[[stack]]\nname = "floor"\ntransformers = "4.52.4"\ntrl = "==0.18.2"\n'
INSTALLED = [{"name": "torch", "version": "2.12.1", "tree_sha256": "0" * 64},
             {"name": "transformers", "version": "4.52.4", "tree_sha256": "1" * 64},
             {"name": "trl", "version": "0.18.2", "tree_sha256": "2" * 64},
             {"name": "unsloth", "version": "2026.10.9", "tree_sha256": "3" * 64},
             {"name": "unsloth_zoo", "version": "2026.9.3", "tree_sha256": "4" * 64}]


def matrix(tmp_path: Path, extra: str = STACK) -> spec.Matrix:
    p = tmp_path / "m.toml"
    p.write_text(ONE_CELL.replace("schema = 1\n", "schema = 1\n" + extra, 1), encoding="utf-8")
    return spec.load(p, check_index=False)


def schema_problems(record: dict[str, Any]) -> list[str]:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((spec.REPO_ROOT / "reports" / "cell.schema.json").read_text(encoding="utf-8"))
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(record)]


@pytest.fixture
def fake_tools(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """uv and the probe process replaced: uv calls are recorded and succeed, the probes exit 1."""
    calls: list[list[str]] = []

    def run_tool(argv: list[str], **_: Any) -> Ran:
        calls.append(argv)
        return Ran(argv, 0, "", "")

    real_run = subprocess.run

    def probes(argv: Any, *args: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        if list(argv[1:3]) != ["-m", "probes"]:
            return real_run(argv, *args, **kwargs)  # not the probe process (e.g. platform's `uname -p`)
        return subprocess.CompletedProcess(argv, 1)

    for module in (recipe, envrun):  # the admissibility question and the install (recipe), the env (envrun)
        monkeypatch.setattr(module, "uv_bin", lambda: "uv")
        monkeypatch.setattr(module, "run_tool", run_tool)
    monkeypatch.setattr(cell_mod, "disk_problem", lambda where: None)
    monkeypatch.setattr(cell_mod, "installed", lambda env_dir: [dict(d) for d in INSTALLED])
    monkeypatch.setattr(envrun.subprocess, "run", probes)
    return calls


def test_stack_cell_installs_its_stack_with_overrides_and_records_it(tmp_path: Path, fake_tools: list) -> None:
    m = matrix(tmp_path)
    (c,) = m.cells
    out = tmp_path / "out"
    record = cell_mod.run_cell(c, m, out, tmp_path / "env", create_env=False, progress=lambda _: None)
    build = out / "cells" / c.id / "build"
    lines = ["unsloth==2026.10.9", "unsloth-zoo==2026.9.3", "torch>=2.12,<2.15", "transformers==4.52.4",
             "trl==0.18.2"]
    assert (build / "overrides.txt").read_text().splitlines() == lines
    # a plain install is asked about the pair with the stack it requests
    assert (build / "pair.in").read_text().splitlines() == lines
    install = next(a for a in fake_tools if a[1:3] == ["pip", "install"])
    assert install[install.index("--overrides") + 1] == str(build / "overrides.txt")
    assert record["cell_id"] == "u1__z1__floor"
    assert record["options"]["transformers"] == "4.52.4" and record["options"]["trl"] == "==0.18.2"
    assert record["stack"] == {
        "name": "floor",
        "requested": {"torch": ">=2.12,<2.15", "transformers": "4.52.4", "trl": "==0.18.2"},
        "resolved": {"torch": "2.12.1", "transformers": "4.52.4", "trl": "0.18.2"},
    }
    assert record["error"]["kind"] == "probe"  # the fake probe process exited 1
    assert schema_problems(record) == []


def test_cell_without_stack_keeps_its_overrides(tmp_path: Path, fake_tools: list) -> None:
    m = matrix(tmp_path, extra="")
    (c,) = m.cells
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    build = tmp_path / "out" / "cells" / "u1__z1" / "build"
    assert (build / "overrides.txt").read_text().splitlines() == ["unsloth==2026.10.9", "unsloth-zoo==2026.9.3"]
    assert record["stack"]["name"] is None
    assert record["stack"]["requested"] == {"torch": None, "transformers": None, "trl": None}
    assert record["stack"]["resolved"]["trl"] == "0.18.2"


def test_pinned_env_record_has_no_stack_name_and_nothing_requested(tmp_path: Path) -> None:
    run = CellRun("pinned-1__2", {}, spec.CellOptions(), "pinned: x", tmp_path)
    assert run.record["stack"] == {"name": None, "requested": {},
                                   "resolved": {"torch": None, "transformers": None, "trl": None}}


def made() -> dict[str, Materialized]:
    return {"unsloth": Materialized("unsloth==2026.10.9", "unsloth==2026.10.9", None),
            "zoo": Materialized("unsloth-zoo==2026.9.3", "unsloth-zoo==2026.9.3", None)}


def test_digest_follows_the_stack_values_and_keeps_results_from_before_stacks(tmp_path: Path) -> None:
    (plain,) = matrix(tmp_path, extra="").cells
    (floor,) = matrix(tmp_path).cells
    (floor2,) = matrix(tmp_path, extra=STACK.replace('"4.52.4"', '"4.53.1"')).cells
    digests = {cell_mod.cell_digest(c, made()) for c in (plain, floor, floor2)}
    assert len(digests) == 3
    # options left to the resolver are not part of the digest: a result recorded before the trainer stack
    # options existed (ident without them) is still reused
    import hashlib

    ident = {"schema": cell_mod.CELL_SCHEMA,
             "builds": {r: {"pin": m.pin, "digest": None} for r, m in sorted(made().items())},
             "options": {k: v for k, v in sorted(plain.options.__dict__.items()) if k not in ("transformers", "trl")},
             "guard_module": None, "probes": cell_mod.probes_digest(),
             "recipe": trees.recipe_of(plain, made()).digest()}  # the install recipe's own digest (#31)
    old = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    assert cell_mod.cell_digest(plain, made()) == old


def test_reused_result_gains_its_stack_entry(tmp_path: Path) -> None:
    m = matrix(tmp_path)
    (c,) = m.cells
    run = CellRun.for_cell(c, m, tmp_path)
    path = tmp_path / "cell.json"
    old = {"cell_id": c.id, "installed": INSTALLED}
    got = cell_mod.restack(dict(old), run, path)
    assert got["stack"]["name"] == "floor" and got["stack"]["resolved"]["transformers"] == "4.52.4"
    assert json.loads(path.read_text())["stack"] == got["stack"]
    path.unlink()
    assert cell_mod.restack(got, run, path) is got and not path.exists()  # unchanged: not rewritten


def test_the_admissibility_question_is_asked_while_the_install_runs(tmp_path: Path, fake_tools: list,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain resolve only feeds the record, so it overlaps the install: here the resolve finishes only once
    the install has started, and the install only once the resolve has started. One after the other, the first
    would wait out its timeout and the record would say so."""
    started = {"compile": threading.Event(), "install": threading.Event()}
    seen: dict[str, bool] = {}

    def run_tool(argv: list[str], **_: Any) -> Ran:
        fake_tools.append(argv)
        if argv[1:3] in (["pip", "compile"], ["pip", "install"]):
            mine, other = argv[2], "install" if argv[2] == "compile" else "compile"
            started[mine].set()
            seen[mine] = started[other].wait(timeout=5)
            return Ran(argv, 1 if mine == "install" else 0, "", "boom" if mine == "install" else "")
        return Ran(argv, 0, "", "")

    monkeypatch.setattr(recipe, "run_tool", run_tool)
    m = matrix(tmp_path)
    (c,) = m.cells
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    assert seen == {"compile": True, "install": True}
    # the install failed, and the answer to the question is still recorded beside it
    assert record["error"]["kind"] == "build" and record["admissible"]["value"] is True
    steps = {s["name"]: s for s in record["steps"]}
    assert steps["admissibility"]["beside"] == "install" and steps["admissibility"]["ran_s"] >= 0
    assert [s["name"] for s in record["steps"]][-2:] == ["admissibility", "install"]
    assert schema_problems(record) == []
