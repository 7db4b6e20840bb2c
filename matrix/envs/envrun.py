"""The env runner: build an env, link ``probes`` onto PYTHONPATH, clean the environment, run our code there.

Every process the harness starts in an env goes through here: a cell's
probes (``matrix.cells.cell``), pinned's interpreter check (``matrix.cli.pinned``),
the bench floor (``matrix.cli.bench``), the mutation runner and its survivor
envs (``matrix.mutation``, ``matrix.mutation.survivors``), the scan's runtime
confirmation (``matrix.scan.confirm``) and the GPU device check
(``matrix.gpu``: interpreter, installer, probes, measurement). They all get
the same result type, ``matrix.envs.tools.Ran``.

* **build**: ``ensure_env`` / ``create_env`` make a uv venv; what goes into
  it is a ``matrix.envs.recipe.Recipe``, applied by ``recipe.apply`` (an
  overrides file, so a pair whose metadata refuses the other still installs:
  the skew under test).
* **link**: ``probes_path`` is a PYTHONPATH entry holding one symlink,
  ``probes`` -> the repository's ``probes``; nothing else of the repository
  is importable in the env.
* **clean**: ``clean_env`` is the one definition of the environment those
  processes get: the caller's, minus ``UNSLOTH_*`` (a variable of the
  caller's shell would change what unsloth does), ``VIRTUAL_ENV*``,
  ``PYTHONPATH`` and ``PYTHONHOME``, plus ``RUN_ENV`` (the libraries under
  test stay offline and silent; no bytecode next to the linked probes), plus
  ``NO_SELF_UPDATE`` (the pair under test stays put: the switches releases
  honour against updating themselves, and every installer a library could
  start -- pip, uv, a proxy-aware download -- pointed at a closed port with
  no index, no find-links and no config file), plus what the caller names
  (e.g. ``UNSLOTH_ALLOW_CPU``).
* **throwaway**: ``throwaway`` builds an env for one question (the scan's
  and the history's runtime confirmation) and deletes it afterwards.
* **run**: ``run`` runs a command with exactly that environment, its output
  captured or written to a log, and says when it timed out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from matrix import REPO_ROOT, settings
from matrix.envs.recipe import Recipe, apply
from matrix.envs.tools import Ran, redact_text, run_tool, uv_bin
from matrix.errors import SkewmatrixError

PROBES_DIR = REPO_ROOT / "probes"
# The probes need no network: keep the libraries under test off it (hubs, telemetry).
RUN_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1", "UNSLOTH_DISABLE_STATISTICS": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
# A closed port on the loopback interface: nothing listens on the discard port, so a connection is refused at once.
CLOSED = "http://127.0.0.1:9"
# The pair under test stays put (issue #30): unsloth 2025.1-2025.3 run `pip install --upgrade unsloth_zoo` inside
# `import unsloth` when zoo is older than they want (os.system, the `pip` on PATH); only 2025.3 honours the switch
# below. So a probe process also has no index to reach: pip and uv get no index (`PIP_NO_INDEX`, `UV_OFFLINE`, their
# index URLs at a closed port), ignore their config files (which may name an index or find-links), use no cache
# (uv's offline mode would install from it), and every proxy variable points at the closed port, with no
# exceptions (`no_proxy` empty). The caller's own PIP_*/UV_* variables are dropped first (e.g. PIP_FIND_LINKS).
NO_SELF_UPDATE = {
    "UNSLOTH_DISABLE_AUTO_UPDATES": "1",
    "PIP_NO_INDEX": "1", "PIP_INDEX_URL": CLOSED, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
    "UV_OFFLINE": "1", "UV_NO_CONFIG": "1", "UV_NO_CACHE": "1", "UV_INDEX_URL": CLOSED, "UV_DEFAULT_INDEX": CLOSED,
    **dict.fromkeys(("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"), CLOSED),
    "no_proxy": "", "NO_PROXY": "",
}
# The harness's own variables (what `nox` hands its session processes, and the run's settings) are ours, not the
# probes': a probe reads its hand-off from its command line (probes/handoff.py), never from these.
HARNESS_VARS = settings.names()
DROPPED = ("UNSLOTH_", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_", "UV_", *HARNESS_VARS)


class EnvBuildError(SkewmatrixError):
    """An env could not be created."""


def create_env(env_dir: Path, python: str, timeout: float = 300) -> Ran:
    """``uv venv`` at ``env_dir`` (a finding for the caller to judge, not an exception)."""
    return run_tool([uv_bin(), "venv", "--quiet", "--python", python, str(env_dir)], timeout=timeout)


def ensure_env(env_dir: Path, python: str) -> Path:
    """The env's interpreter, creating the env when it does not exist yet."""
    py = env_dir / "bin" / "python"
    if not py.exists():
        res = create_env(env_dir, python)
        if not res.ok:
            raise EnvBuildError(f"cannot create a Python {python} env at {env_dir}:\n{res.tail()}")
    return py


@dataclass(frozen=True)
class Throwaway:
    """A throwaway env: its interpreter, a scratch working directory, and ``root`` (both lie under it)."""

    python: Path
    scratch: Path
    root: Path


class ThrowawayError(SkewmatrixError):
    """A throwaway env could not be built (its message says which command failed, with its output's tail)."""


@contextmanager
def throwaway(workdir: Path, prefix: str, python: str, requirements: list[str], overrides: list[str],
              timeout: float) -> Iterator[Throwaway]:
    """A fresh env under ``workdir`` with ``requirements`` installed (``overrides`` forced, as a cell does),
    deleted on leaving, also when it could not be built (:class:`ThrowawayError`, raised on entry)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=workdir))
    try:
        env_dir = root / "env"
        res = create_env(env_dir, python)
        if not res.ok:
            raise ThrowawayError(f"uv venv failed: {res.tail(3)}")
        py = env_dir / "bin" / "python"
        recipe = Recipe(python=python, requirements=tuple(requirements), overrides=tuple(overrides))
        res = apply(recipe, py, root, timeout, quiet=True)
        if not res.ok:
            raise ThrowawayError(f"uv pip install {' '.join(requirements)} failed (exit {res.returncode}): "
                                 f"{res.tail(3)}")
        scratch = root / "work"
        scratch.mkdir()
        yield Throwaway(py, scratch, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def probes_path(where: Path) -> Path:
    """``where/pythonpath``: a PYTHONPATH entry that exposes ``probes`` and nothing else of the repository."""
    pp = where / "pythonpath"
    pp.mkdir(parents=True, exist_ok=True)
    link = pp / "probes"
    if link.is_symlink() and link.resolve() != PROBES_DIR.resolve():
        link.unlink()
    if not link.exists():
        link.symlink_to(PROBES_DIR, target_is_directory=True)
    return pp


def clean_env(pythonpath: Path | None, **extra: str) -> dict[str, str]:
    """The environment of a process that runs our code in an env (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    env.update(RUN_ENV)
    env.update(NO_SELF_UPDATE)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env.update(extra)
    return env


def run(argv: list[str], *, cwd: Path | None, env: dict[str, str], timeout: float, log: Path | None = None) -> Ran:
    """Run ``argv`` with exactly ``env`` (never merged with ours; build it with :func:`clean_env`); stdout and
    stderr go to ``log`` when given, else they are captured (credentials redacted)."""
    try:
        if log is not None:
            with log.open("w", encoding="utf-8") as fh:
                proc = subprocess.run(argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout,
                                      check=False)
            return Ran(argv, proc.returncode)
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return Ran(argv, None)
    except FileNotFoundError as exc:
        return Ran(argv, 127, "", f"{argv[0]}: not found ({exc})")
    return Ran(argv, proc.returncode, redact_text(proc.stdout), redact_text(proc.stderr))


def run_python(python: Path, code: str, *, cwd: Path | None = None, timeout: float = 300, **extra: str) -> Ran:
    """``python -c CODE`` in an env, with the environment a cell's processes get (:func:`clean_env`: offline,
    no stray PYTHONPATH or UNSLOTH_* of ours) plus ``extra``: the interpreter checks of pinned and the GPU run,
    and the bench floor, run exactly where a cell would."""
    return run([str(python), "-c", code], cwd=cwd, env=clean_env(None, **extra), timeout=timeout)
