"""Secrets never reach stored tool output; uv is looked up once, under a lock."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from matrix.envs import tools
from matrix.envs.tools import redact_text, run_tool
from matrix.envs.tools import uv_bin as REAL_UV_BIN  # bound at import: the unit tests' guard replaces tools.uv_bin
from matrix.index import redact


def test_redacts_url_credentials_and_tokens() -> None:
    text = "GET https://alice:s3cr3t@pypi.example/simple/torch/ failed; token=abc123 PASSWORD=hunter2"
    out = redact_text(text)
    assert "s3cr3t" not in out and "alice" not in out and "abc123" not in out and "hunter2" not in out
    assert "https://***@pypi.example/simple/torch/" in out


def test_run_tool_output_is_redacted() -> None:
    res = run_tool(["sh", "-c", "echo 'index https://u:p4ss@host/simple' >&2; exit 3"])
    assert res.returncode == 3 and "p4ss" not in res.stderr and "https://***@host/simple" in res.stderr


def test_index_url_redaction() -> None:
    assert redact("https://user:tok@host/simple") == "https://***@host/simple"
    assert redact("https://host/simple") == "https://host/simple"


def test_uv_bin_is_looked_up_once_under_a_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads asking for uv at once (the history's resolver thread beside its readers) look it up one at a time
    and once: ``find_uv_bin`` reads ``sysconfig``, whose first use raced on CPython 3.11 (``"uv" + None``)."""
    import uv

    lock, inside, most, calls = threading.Lock(), [0], [0], [0]

    def slow_find() -> str:
        with lock:
            inside[0] += 1
            calls[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        with lock:
            inside[0] -= 1
        return "/opt/uv/bin/uv"

    monkeypatch.setattr(uv, "find_uv_bin", slow_find)
    tools._uv_bin.cache_clear()
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda _: REAL_UV_BIN(), range(4)))
    finally:
        tools._uv_bin.cache_clear()
    assert got == ["/opt/uv/bin/uv"] * 4
    assert (most[0], calls[0]) == (1, 1)


def test_a_started_tool_is_read_later_and_a_late_one_is_killed(tmp_path: Path) -> None:
    done = tools.start_tool([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                            tmp_path, "quick", timeout=60)
    res = done.wait()
    assert res.ok and res.stdout.strip() == "out" and res.stderr.strip() == "err"
    late = tools.start_tool([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, "late", timeout=0.5)
    res = late.wait()
    assert res.timed_out and "timed out after 0.5 s" in res.stderr and late.proc.poll() is not None


def test_questions_still_running_are_stopped_when_the_cell_is_left(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt (or any error) inside the cell leaves no question running behind it."""
    from matrix.cells import install
    from matrix.envs.recipe import Recipe

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setattr(install.recipe, "admissibility_argv", lambda *a: sleeper)
    monkeypatch.setattr(install.recipe, "index_pins_argv", lambda *a: sleeper)
    with pytest.raises(KeyboardInterrupt), install.asking(Recipe(), tmp_path, [], Path("python"), True) as asked:
        raise KeyboardInterrupt
    assert asked.admit.proc.poll() is not None and asked.pins.proc.poll() is not None
