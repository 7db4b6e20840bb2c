"""Locating and running the external tools the harness drives (uv, git).

``uv_bin()`` prefers the ``uv`` Python package that skewmatrix depends on,
then ``uv`` on PATH. ``run_tool`` runs a tool of ours (uv, git) with our
environment, captures its output, and returns it as :class:`Ran`, the one
result type of every process the harness starts (``matrix.envs.envrun`` runs the
processes in an env with the same type); callers decide what a non-zero
exit means (uv: 1 = no resolution, 2 = network or usage error).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from matrix.errors import SkewmatrixError

_UV_LOCK = threading.Lock()


def uv_bin() -> str:
    """The ``uv`` binary, looked up once. Locked: the history resolves with uv in a thread while the readers'
    threads start, and ``find_uv_bin`` reads ``sysconfig``, whose first use is not thread-safe on CPython 3.11
    (two threads at once got ``None`` for a scheme path and crashed on ``"uv" + None``)."""
    with _UV_LOCK:
        return _uv_bin()


@functools.cache
def _uv_bin() -> str:
    try:
        from uv import find_uv_bin

        return os.fsdecode(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise SkewmatrixError("uv: not found. Install it with `pip install uv` (skewmatrix depends on it).")


CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@")
TOKEN_ENV = re.compile(r"(?i)(token|password|secret|api[_-]?key)=\S+")


def redact_text(text: str) -> str:
    """Hide credentials in URLs (``https://user:pass@host``) and ``token=...`` pairs."""
    return TOKEN_ENV.sub(r"\1=***", CREDENTIALS.sub(r"\g<scheme>***@", text))


@dataclass(frozen=True)
class Ran:
    """How a process ended: its command, its exit code (None: it ran past its timeout) and, when captured, its
    output (credentials redacted)."""

    argv: list[str]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def tail(self, n: int = 30) -> str:
        text = (self.stdout + "\n" + self.stderr).strip()
        return "\n".join(text.splitlines()[-n:])


def run_tool(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
             timeout: float | None = None, exact_env: dict[str, str] | None = None) -> Ran:
    """Run a tool of ours with our environment plus ``env`` (or with exactly ``exact_env``)."""
    full_env = dict(exact_env) if exact_env is not None else {**os.environ, **(env or {})}
    try:
        proc = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return Ran(argv, None, out, err + f"\n{argv[0]}: timed out after {timeout} s")
    except FileNotFoundError as exc:
        return Ran(argv, 127, "", f"{argv[0]}: not found ({exc})")
    # Tool output ends up in cell JSON and reports: never let an index credential through.
    return Ran(argv, proc.returncode, redact_text(proc.stdout), redact_text(proc.stderr))


class Started:
    """A tool of ours started now and read later (:func:`start_tool`): a question whose answer only feeds the
    record, asked while other work runs. Its output goes to files, so no thread reads it; it shares our process
    group, so an interrupt that reaches us reaches it too."""

    def __init__(self, argv: list[str], logs: Path, name: str, timeout: float) -> None:
        self.argv = argv
        self.timeout = timeout
        self.started = time.perf_counter()
        self.out, self.err = logs / f"{name}.stdout", logs / f"{name}.stderr"
        logs.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.failed: Ran | None = None
        try:
            with self.out.open("wb") as out, self.err.open("wb") as err:
                self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        except OSError as exc:
            self.failed = Ran(argv, 127, "", f"{argv[0]}: cannot start ({exc})")

    def wait(self) -> Ran:
        """How it ended (waiting at most what is left of its timeout; then it is killed and counts as timed
        out), with its output, credentials redacted."""
        if self.failed is not None or self.proc is None:
            return self.failed or Ran(self.argv, 127)
        left = max(0.0, self.timeout - (time.perf_counter() - self.started))
        try:
            code: int | None = self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        read = lambda p: redact_text(p.read_text(encoding="utf-8", errors="replace"))  # noqa: E731
        return Ran(self.argv, code, read(self.out), read(self.err)
                   + ("" if code is not None else f"\n{self.argv[0]}: timed out after {self.timeout} s"))

    def kill(self) -> None:
        """Stop it when its answer is no longer wanted (a no-op once it has ended)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def start_tool(argv: list[str], logs: Path, name: str, timeout: float) -> Started:
    """Start a tool of ours with our environment; its output goes to ``logs/NAME.stdout`` and ``.stderr``."""
    return Started(argv, logs, name, timeout)
