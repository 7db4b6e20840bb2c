"""Sharing the raw phase's findings between cells (probes/rawcache.py): looked up under a lock, stored only when
every step ended ok, and marked as reused with the digest and the cell that produced them."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from probes import rawcache


def findings(ok: bool = True, seconds: float = 4.0) -> dict[str, Any]:
    return {"checks": {
        "fused-ce-masked-nan": {"steps": {"runtime": {"ok": True, "seconds": seconds, "verdict": "vulnerable"},
                                          "differential-oracle": {"ok": ok, "seconds": 1.5}},
                                "shared": {"behavior_before": {"x": 1}}},
        "grpo-normalizer-nan": {"steps": {"train": {"ok": True, "skipped": "n/a: off", "seconds": 0.0}},
                                "shared": {}}}}


class Counter:
    def __init__(self, result: dict[str, Any]) -> None:
        self.calls, self.result = 0, result

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return json.loads(json.dumps(self.result))


def test_the_first_cell_runs_the_phase_and_the_next_reuses_it(tmp_path: Path) -> None:
    path = str(tmp_path / "cache" / "abc123.json")
    first, second = Counter(findings()), Counter(findings(seconds=99.0))
    mine = rawcache.run_or_reuse(path, "cell-a", first)
    assert first.calls == 1
    assert mine["reuse"] == {"reused": False, "digest": "abc123", "from_cell": "cell-a", "stored": True}
    assert mine["checks"]["fused-ce-masked-nan"]["steps"]["runtime"]["seconds"] == 4.0
    theirs = rawcache.run_or_reuse(path, "cell-b", second)
    assert second.calls == 0  # not run again
    assert theirs["reuse"] == {"reused": True, "digest": "abc123", "from_cell": "cell-a", "seconds_saved": 5.5}
    runtime = theirs["checks"]["fused-ce-masked-nan"]["steps"]["runtime"]
    # the findings are the producer's; the seconds this cell spent on them are none
    assert runtime == {"ok": True, "seconds": 0.0, "verdict": "vulnerable", "reused_from": "cell-a"}
    assert theirs["checks"]["fused-ce-masked-nan"]["shared"] == {"behavior_before": {"x": 1}}


A = {"prefix": "/envs/cell-a", "workdir": "/out/cells/a/work", "pythonpath0": "/out/cells/a/pythonpath"}
B = {"prefix": "/envs/cell-b", "workdir": "/out/cells/b/work", "pythonpath0": "/out/cells/b/pythonpath"}


def test_reused_findings_name_this_cells_files(tmp_path: Path) -> None:
    """A guard check compares the file of the function it finds after `import unsloth` with the raw
    phase's: findings from another cell's env must name this cell's env, or zoo's own function would look
    replaced (the same bytes lie under another prefix)."""
    zoo = "/lib/python3.11/site-packages/unsloth_zoo/rl_replacements.py"
    produced = findings()
    produced["checks"]["grpo-normalizer-nan"]["shared"] = {
        "fingerprint": {"file": A["prefix"] + zoo, "line": 426}, "env": {"PYTHONPATH": A["pythonpath0"],
                                                                         "PATH": A["prefix"] + "/bin:/usr/bin"},
        "scratch": A["workdir"] + "/scratch.txt", "neighbour": "/envs/cell-a-fix" + zoo, "cwd": A["workdir"]}
    path = str(tmp_path / "k.json")
    rawcache.run_or_reuse(path, "cell-a", Counter(produced), A)
    got = rawcache.run_or_reuse(path, "cell-b", Counter(findings()), B)["checks"]["grpo-normalizer-nan"]["shared"]
    assert got == {"fingerprint": {"file": B["prefix"] + zoo, "line": 426},
                   "env": {"PYTHONPATH": B["pythonpath0"], "PATH": B["prefix"] + "/bin:/usr/bin"},
                   "scratch": B["workdir"] + "/scratch.txt",
                   "neighbour": "/envs/cell-a-fix" + zoo,  # a longer name that starts alike is another place
                   "cwd": B["workdir"]}
    # the stored entry keeps the producer's places
    assert rawcache.stored(Path(path))["result"]["checks"]["grpo-normalizer-nan"]["shared"]["cwd"] == A["workdir"]


def test_places_are_the_env_the_working_directory_and_the_pythonpath(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", f"/out/cells/a/pythonpath{os.pathsep}/extra")
    got = rawcache.places(tmp_path)
    assert got == {"prefix": sys.prefix, "workdir": str(tmp_path), "pythonpath0": "/out/cells/a/pythonpath",
                   "pythonpath1": "/extra"}


def test_another_digest_runs_the_phase(tmp_path: Path) -> None:
    rawcache.run_or_reuse(str(tmp_path / "abc.json"), "cell-a", Counter(findings()))
    other = Counter(findings())
    got = rawcache.run_or_reuse(str(tmp_path / "def.json"), "cell-b", other)
    assert other.calls == 1 and got["reuse"]["reused"] is False


def test_a_step_error_or_a_broken_module_is_not_handed_on(tmp_path: Path) -> None:
    path = str(tmp_path / "k.json")
    failed = rawcache.run_or_reuse(path, "cell-a", Counter(findings(ok=False)))
    assert failed["reuse"]["stored"] is False and not Path(path).exists()
    broken = {"checks": {"x": {"steps": {}, "shared": {"error": "ImportError: no"}}}}
    assert rawcache.run_or_reuse(path, "cell-a", Counter(broken))["reuse"]["stored"] is False
    again = Counter(findings())
    rawcache.run_or_reuse(path, "cell-b", again)
    assert again.calls == 1


def test_no_cache_path_just_runs(tmp_path: Path) -> None:
    plain = Counter(findings())
    assert rawcache.run_or_reuse(None, None, plain) == findings() and plain.calls == 1


def test_an_unreadable_or_foreign_entry_is_not_reused(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text("{truncated")
    assert rawcache.stored(path) is None
    path.write_text(json.dumps({"schema": rawcache.SCHEMA, "digest": "other", "cell": "c", "result": {}}))
    assert rawcache.stored(path) is None  # stored under another digest's name
    fresh = Counter(findings())
    rawcache.run_or_reuse(str(path), "cell-b", fresh)
    assert fresh.calls == 1 and rawcache.stored(path)["cell"] == "cell-b"


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_two_cells_at_once_run_the_phase_once(tmp_path: Path) -> None:
    """Under `nox -j` the second cell waits on the lock for the first one's findings instead of running
    the phase itself (handshakes through files, no timing)."""
    path = str(tmp_path / "k.json")
    started, go, out_b = tmp_path / "a-started", tmp_path / "go", tmp_path / "b.json"

    def slow() -> dict[str, Any]:
        started.write_text("")
        _wait_for(go)
        return findings()

    def must_not_run() -> dict[str, Any]:
        raise AssertionError("the second cell ran the raw phase")

    pid_a = os.fork()
    if pid_a == 0:
        try:
            rawcache.run_or_reuse(path, "cell-a", slow)
        finally:
            os._exit(0)
    _wait_for(started)  # cell a holds the lock now
    pid_b = os.fork()
    if pid_b == 0:
        code = 1
        try:
            out_b.write_text(json.dumps(rawcache.run_or_reuse(path, "cell-b", must_not_run)))
            code = 0
        finally:
            os._exit(code)
    go.write_text("")
    for pid in (pid_a, pid_b):
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert json.loads(out_b.read_text())["reuse"]["from_cell"] == "cell-a"
