"""``nox -s bench -- history`` against all three of its targets, with the runs faked (no child process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from matrix.scan.history import history_bench


def test_a_run_over_the_memory_target_is_not_met_and_the_load_is_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def timed(argv: list[str], env: dict[str, str], log: Path) -> dict:
        folder = Path(argv[argv.index("-o") + 1])
        rss = 1500.0 if "cold" in log.name else 300.0  # MiB: the cold run over 1 GiB, the warm one under
        (folder / "history.json").write_text(json.dumps({"pairs": [], "stats": {"peak_rss_mib": rss}}))
        return {"seconds": 100.0 if "cold" in log.name else 10.0, "returncode": 0}

    monkeypatch.setattr(history_bench, "timed", timed)
    monkeypatch.setattr(history_bench.os, "getloadavg", lambda: (3.5, 2.0, 1.0))
    assert history_bench.bench_history(["history", "--all"], tmp_path) == 0
    got = json.loads((tmp_path / "bench-history.json").read_text())
    assert (got["cold"]["met"], got["warm"]["met"]) == (False, True)  # 100 s < 600 s, but 1500 MiB > 1024 MiB
    assert got["cold"]["load_avg"] == {"before": [3.5, 2.0, 1.0], "after": [3.5, 2.0, 1.0]}
    out = capsys.readouterr().out
    assert "peak RSS 1500.0 MiB (target < 1024 MiB: NOT met)" in out and "load average 3.5 -> 3.5" in out


def test_the_peak_is_the_whole_runs_as_the_command_prints_it_after_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def timed(argv: list[str], env: dict[str, str], log: Path) -> dict:
        folder = Path(argv[argv.index("-o") + 1])
        (folder / "history.json").write_text(json.dumps({"pairs": [], "stats": {"peak_rss_mib": 600.0}}))
        # the document was measured before writing
        log.write_text("wrote history.json\npeak RSS 1100.5 MiB (this process and its workers)\n")
        return {"seconds": 10.0, "returncode": 0}

    monkeypatch.setattr(history_bench, "timed", timed)
    history_bench.bench_history(["history"], tmp_path)
    got = json.loads((tmp_path / "bench-history.json").read_text())
    assert got["warm"]["peak_rss_mib"] == 1100.5 and got["warm"]["met"] is False


def test_a_failed_history_run_is_the_harness_failing_exit_2_and_help_is_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The exit table says bench exits 0 or 2, never 1; argparse's --help is a code, not a SystemExit."""
    def timed(argv: list[str], env: dict[str, str], log: Path) -> dict:
        log.write_text("skewmatrix history: the index could not be reached\n")  # as the real run logs
        return {"seconds": 1.0, "returncode": 2}

    monkeypatch.setattr(history_bench, "timed", timed)
    monkeypatch.setattr(history_bench.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert history_bench.bench_history(["history"], tmp_path) == 2
    assert history_bench.bench_history(["history", "--help"], tmp_path) == 0
    assert "exit codes:" in capsys.readouterr().out


def test_history_parses_through_the_one_factory_with_the_exit_table() -> None:
    from matrix import errors
    from matrix.scan.history import history_cmd

    assert history_cmd.parser().epilog == errors.epilog("history")
    assert history_cmd.main(["--no-such-option"], Path("/nonexistent")) == 2
    assert history_cmd.main(["--help"], Path("/nonexistent")) == 0


def test_a_second_pair_reader_is_an_error_not_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    from matrix.errors import SkewmatrixError
    from matrix.scan.history import readers
    from probes import checks

    one = checks.with_capability("pairs")
    assert readers.pair_target()[0] == one[0]
    monkeypatch.setattr(checks, "with_capability", lambda kind: [*one, "another-check"])
    with pytest.raises(SkewmatrixError, match="--check is required"):
        readers.pair_target()


def test_the_peak_counts_the_processes_below_the_command() -> None:
    """A child holding 150 MiB while the run is measured is in the peak (the analyses run in worker processes,
    so this process's own high-water mark would miss them)."""
    import subprocess
    import sys

    from matrix.scan.history.history_cmd import PeakRss, tree_rss_kib

    before_kib = tree_rss_kib()  # what this process holds now (its high-water mark may be far above)
    hold = "import sys, time; b = b'x' * (150 * 2**20); print('held', flush=True); time.sleep(1.5)"
    with PeakRss(every=0.05) as peak, subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE,
                                                       text=True) as child:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        peak.sample()
    assert peak.peak_kib >= before_kib + 140 * 1024
    assert max(v for k, v in peak.parts_kib.items() if k != "history") >= 140 * 1024  # the child, by its name
    assert peak.mib >= round(peak.peak_kib / 1024, 1)
