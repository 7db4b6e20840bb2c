"""A cell with a trainer stack: overrides and admissibility lines, the cell JSON's ``stack``, the digest."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from matrix import spec
from matrix.cells import cell as cell_mod
from matrix.cells import install as install_mod
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


class Asked:
    """A question started by the cell (``matrix.envs.tools.start_tool``), answered at once: uv exit ``code``; an
    index-pins question writes the lock ``pins`` (by default what INSTALLED holds)."""

    def __init__(self, argv: list[str], code: int = 0, pins: list[str] | None = None) -> None:
        self.argv, self.code, self.started, self.killed = argv, code, 0.0, False
        lock = Path(argv[argv.index("--output-file") + 1]) if "--output-file" in argv else None
        if code == 0 and lock is not None and lock.name == "index.lock":
            lines = pins if pins is not None else [f"{d['name']}=={d['version']}" for d in INSTALLED]
            lock.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def wait(self) -> Ran:
        return Ran(self.argv, self.code, "", "" if self.code == 0 else "no answer")

    def kill(self) -> None:
        self.killed = True


@pytest.fixture
def fake_tools(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """uv and the probe process replaced: uv calls are recorded and succeed (a question started beside the
    install too, answered by :class:`Asked`), the probes exit 1."""
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
    monkeypatch.setattr(install_mod, "start_tool", lambda argv, *a, **k: calls.append(argv) or Asked(argv))
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


def installs(calls: list[list[str]]) -> list[list[str]]:
    return [a for a in calls if a[1:3] == ["pip", "install"]]


def one(tmp_path: Path) -> tuple[spec.Matrix, spec.Cell]:
    m = matrix(tmp_path)
    (c,) = m.cells
    return m, c


def test_an_empty_env_installs_from_uvs_cache_and_the_index_confirms_it(tmp_path: Path, fake_tools: list) -> None:
    m, c = one(tmp_path)
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    (only,) = installs(fake_tools)
    assert "--offline" in only
    # the index is asked what the same install would give in this env: same lines, same overrides, its python
    pins = next(a for a in fake_tools if a[1:3] == ["pip", "compile"] and "--overrides" in a)
    build = tmp_path / "out" / "cells" / c.id / "build"
    assert pins[pins.index("--python") + 1] == str(tmp_path / "env" / "bin" / "python")
    assert (build / "index.in").read_text().splitlines() == ["unsloth==2026.10.9", "unsloth-zoo==2026.9.3"]
    assert record["install_check"] == {"from_cache": True, "matches_index": True, "drift": [], "redo": False,
                                       "message": "the env holds what the index resolves today"}
    steps = {s["name"]: s for s in record["steps"]}
    assert steps["install"]["from_cache"] is True and steps["admissibility"]["beside"] == "install and probes"
    assert record["admissible"]["value"] is True
    assert schema_problems(record) == []


@pytest.mark.parametrize(("pins", "code", "says"), [
    ([f"{d['name']}=={d['version']}" for d in INSTALLED if d["name"] != "trl"] + ["trl==0.19.0"], 0,
     "trl: the env has 0.18.2, the index resolves 0.19.0"),
    ([f"{d['name']}=={d['version']}" for d in INSTALLED] + ["accelerate==1.2.0"], 0,
     "accelerate: the index resolves 1.2.0, the env has none"),
    ([f"{d['name']}=={d['version']}" for d in INSTALLED if d["name"] != "torch"], 0,
     "torch 2.12.1: in the env, not in what the index resolves"),
    (None, 2, "the index did not answer (uv exit 2)"),
    ([f"{d['name']}=={d['version']}" for d in INSTALLED] + ["accelerate>=1.2"], 0,
     "the index's answer is unreadable: line 6 pins no single version"),
])
def test_a_cache_the_index_disagrees_with_is_redone_from_the_index_in_a_fresh_env(
        tmp_path: Path, fake_tools: list, monkeypatch: pytest.MonkeyPatch, pins: list[str] | None, code: int,
        says: str) -> None:
    monkeypatch.setattr(install_mod, "start_tool",
                        lambda argv, *a, **k: fake_tools.append(argv) or Asked(argv, code if "--python" in argv
                                                                                 else 0, pins))
    m, c = one(tmp_path)
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    first, second = installs(fake_tools)
    assert "--offline" in first and "--offline" not in second
    assert any(a[1] == "venv" and a[-1] == str(tmp_path / "env") for a in fake_tools)  # a fresh env for the redo
    check = record["install_check"]
    assert check["from_cache"] is False and check["redo"] is False  # the redo installed from the index
    before = check["before_redo"]
    assert before["redo"] is True and before["from_cache"] is True
    assert says in before["drift"] or before["message"].startswith(says)
    assert json.loads((tmp_path / "out" / "cells" / c.id / "cell.json").read_text())["install_check"] == check
    assert schema_problems(record) == []


def test_a_cache_that_cannot_answer_falls_back_to_the_index_and_drops_the_pins_question(
        tmp_path: Path, fake_tools: list, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Asked] = []

    def run_tool(argv: list[str], **_: Any) -> Ran:
        fake_tools.append(argv)
        return Ran(argv, 2 if "--offline" in argv else 0, "", "cache miss" if "--offline" in argv else "")

    monkeypatch.setattr(recipe, "run_tool", run_tool)
    monkeypatch.setattr(install_mod, "start_tool", lambda argv, *a, **k: asked.append(Asked(argv)) or asked[-1])
    m, c = one(tmp_path)
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    first, second = installs(fake_tools)
    assert "--offline" in first and "--offline" not in second
    assert [q.killed for q in asked if "--python" in q.argv] == [True]
    assert record["install_check"]["from_cache"] is False and "before_redo" not in record["install_check"]
    log = (tmp_path / "out" / "cells" / c.id / "install.log").read_text()
    assert "from uv's cache (exit 2)" in log and "from the index (exit 0)" in log


def test_an_env_that_holds_packages_or_a_tree_recipe_installs_from_the_index(tmp_path: Path,
                                                                             fake_tools: list) -> None:
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "six-1.16.0.dist-info"
    site.mkdir(parents=True)
    m, c = one(tmp_path)
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    (only,) = installs(fake_tools)
    assert "--offline" not in only and record["install_check"]["from_cache"] is False
    assert not any("--overrides" in a for a in fake_tools if a[1:3] == ["pip", "compile"])  # no pins question
    assert not recipe.Recipe(requirements=("-r", "pyproject.toml"), admit=("pyproject.toml",)).from_cache_ok
    assert not recipe.Recipe(requirements=("x==1",), no_deps=True).from_cache_ok
    assert recipe.Recipe(requirements=("x==1",)).from_cache_ok


def test_the_admissibility_answer_is_recorded_when_the_install_fails(tmp_path: Path, fake_tools: list,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def run_tool(argv: list[str], **_: Any) -> Ran:
        fake_tools.append(argv)
        return Ran(argv, 1 if argv[1:3] == ["pip", "install"] else 0, "", "boom")

    monkeypatch.setattr(recipe, "run_tool", run_tool)
    m, c = one(tmp_path)
    record = cell_mod.run_cell(c, m, tmp_path / "out", tmp_path / "env", create_env=False, progress=lambda _: None)
    assert record["error"]["kind"] == "build" and record["admissible"]["value"] is True
    assert [s["name"] for s in record["steps"]][-2:] == ["install", "admissibility"]
    assert schema_problems(record) == []


def test_a_stored_result_that_asks_for_a_redo_is_not_reused(tmp_path: Path) -> None:
    path = tmp_path / "cell.json"
    path.write_text(json.dumps({"cell_digest": "d", "error": None, "install_check": {"redo": True}}))
    assert cell_mod.reusable(path, "d") is None
    path.write_text(json.dumps({"cell_digest": "d", "error": None, "install_check": {"redo": False}}))
    assert cell_mod.reusable(path, "d") is not None
