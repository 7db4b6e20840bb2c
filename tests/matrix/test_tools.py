"""Secrets never reach stored tool output."""

from __future__ import annotations

from matrix.envs.tools import redact_text, run_tool
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
