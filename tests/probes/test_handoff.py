"""One hand-off to the probes: the harness puts what a probe needs on its command line, and the probes read no
variable of ours from the environment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from matrix import spec
from matrix.cells import cell as cell_mod
from matrix.cells.cell import CellRun
from matrix.envs import envrun
from matrix.envs.tools import Ran
from probes import handoff

ROOT = Path(__file__).resolve().parents[2]
# The harness's settings a probe's docs may name (to say where a hand-off value comes from); no probe reads one.
USER_KNOBS = {"SKEWMATRIX_DIFF_EXAMPLES", "SKEWMATRIX_DIFF_SEED"}


def test_the_handoff_round_trips_through_a_spawned_phases_command_line() -> None:
    h = handoff.Handoff(guard_module="pkg.guard", train=False, trees={"tree": "/src/tree"})
    assert handoff.argv(h) == ["--guard-module=pkg.guard", "--no-train", "--tree=tree=/src/tree"]
    assert handoff.parse(handoff.argv(h)) == h
    assert handoff.parse([]) == handoff.Handoff()
    # a spawned raw phase must find the run's raw findings too, and name its cell in what it stores
    shared = handoff.Handoff(raw_cache="/out/raw-cache/1/abc.json", cell="u1__z1")
    assert handoff.argv(shared) == ["--raw-cache=/out/raw-cache/1/abc.json", "--cell=u1__z1"]
    sized = handoff.Handoff(examples=500, seed=7)  # a property-based suite's size and seed (the harness's settings)
    assert handoff.argv(sized) == ["--examples=500", "--seed=7"] and handoff.parse(handoff.argv(sized)) == sized
    assert handoff.parse(handoff.argv(shared)) == shared


def test_a_malformed_tree_is_refused() -> None:
    with pytest.raises(SystemExit, match="expected NAME=PATH"):
        handoff.parse(["--tree", "nopath"])


def test_the_cell_runner_hands_guard_module_and_training_on_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], dict[str, str]]] = []

    def run(argv: list[str], *, env: dict[str, str], **_: Any) -> Ran:
        seen.append((argv, env))
        return Ran(argv, None)

    monkeypatch.setattr(envrun, "run", run)
    monkeypatch.setattr(cell_mod, "installed", lambda env_dir: [])
    builds = {"unsloth": {"package": "unsloth", "guard_module": "pkg.guard"},
              "unsloth_zoo": {"package": "unsloth-zoo"}}
    record = CellRun("c", builds, spec.CellOptions(train=False), "m", tmp_path)
    monkeypatch.setenv("SKEWMATRIX_TRAIN", "on")  # a stray variable of the caller's shell changes nothing
    for name in ("SKEWMATRIX_RUN_ID", "SKEWMATRIX_PROGRESS", "SKEWMATRIX_FANIN"):  # what `nox` hands its sessions
        monkeypatch.setenv(name, "x")
    cell_mod.record_and_probe(record, tmp_path / "env", tmp_path / "env" / "bin" / "python", lambda _: None)
    [(argv, env)] = seen
    assert "--guard-module=pkg.guard" in argv and "--no-train" in argv
    mine = [a for a in argv if a.startswith(("--guard-module", "--no-train", "--tree"))]
    assert handoff.parse(mine) == handoff.Handoff(guard_module="pkg.guard", train=False)
    assert [k for k in env if k.startswith("SKEWMATRIX_") and k != "SKEWMATRIX_TRAIN"] == []


def test_probes_read_no_variable_of_the_harness() -> None:
    names = set()
    for path in sorted((ROOT / "probes").rglob("*.py")):
        names |= set(re.findall(r"SKEWMATRIX_[A-Z][A-Z_]*", path.read_text(encoding="utf-8")))
    assert names <= USER_KNOBS, names - USER_KNOBS
