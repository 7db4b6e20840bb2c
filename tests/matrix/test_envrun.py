"""The one env runner: the clean environment, the probes link, and how a run ends (no env is built here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from matrix.envs import envrun


def test_clean_env_drops_the_callers_unsloth_venv_and_path_and_adds_the_offline_set(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k, v in {"UNSLOTH_ALLOW_CPU": "1", "VIRTUAL_ENV": "/v", "PYTHONPATH": "/p", "PYTHONHOME": "/h",
                 "KEEP_ME": "yes"}.items():
        monkeypatch.setenv(k, v)
    env = envrun.clean_env(tmp_path / "pp", UNSLOTH_IS_PRESENT="1")
    assert not {"UNSLOTH_ALLOW_CPU", "VIRTUAL_ENV", "PYTHONHOME"} & set(env)
    assert env["PYTHONPATH"] == str(tmp_path / "pp") and env["KEEP_ME"] == "yes"
    assert env["UNSLOTH_IS_PRESENT"] == "1"
    assert {k: env[k] for k in envrun.RUN_ENV} == envrun.RUN_ENV
    assert env["HF_HUB_OFFLINE"] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_probes_path_links_probes_and_nothing_else(tmp_path: Path) -> None:
    pp = envrun.probes_path(tmp_path)
    assert [p.name for p in pp.iterdir()] == ["probes"]
    assert (pp / "probes").resolve() == envrun.PROBES_DIR.resolve()
    assert envrun.probes_path(tmp_path) == pp  # a second call keeps the link


def test_run_uses_exactly_the_given_env_captures_or_logs_and_says_timeout(tmp_path: Path) -> None:
    code = "import os, sys; print(os.environ.get('ONLY'), os.environ.get('HOME')); sys.exit(3)"
    ran = envrun.run([sys.executable, "-c", code], cwd=tmp_path, env={"ONLY": "x"}, timeout=60)
    assert (ran.returncode, ran.stdout.strip()) == (3, "x None")
    log = tmp_path / "run.log"
    assert envrun.run([sys.executable, "-c", "print('logged')"], cwd=tmp_path, env={}, timeout=60,
                      log=log).returncode == 0
    assert log.read_text().strip() == "logged"
    slow = envrun.run([sys.executable, "-c", "import time; time.sleep(30)"], cwd=tmp_path, env={}, timeout=0.5)
    assert slow.returncode is None


def test_a_throwaway_env_is_deleted_after_use_and_when_it_cannot_be_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from matrix.envs.tools import Ran

    made: list[Path] = []

    def create_env(env_dir: Path, python: str, timeout: float = 300) -> Ran:
        (env_dir / "bin").mkdir(parents=True)
        made.append(env_dir)
        return Ran(["uv", "venv"], 0)

    installs: list[tuple[list[str], list[str]]] = []

    def apply(how: Any, py: Path, workdir: Path, timeout: float, *, quiet: bool = False) -> Ran:
        installs.append((list(how.requirements), list(how.overrides)))
        return Ran(["uv", "pip", "install"], 1 if "broken==1" in how.requirements else 0, "", "no solution found")

    monkeypatch.setattr(envrun, "create_env", create_env)
    monkeypatch.setattr(envrun, "apply", apply)
    with envrun.throwaway(tmp_path, "t-", "3.11", ["a==1", "b==2"], ["b==2"], 60) as env:
        assert env.python == made[0] / "bin" / "python" and env.scratch.is_dir()
        assert env.scratch.parent == env.root == made[0].parent
    assert installs == [(["a==1", "b==2"], ["b==2"])]
    assert not list(tmp_path.iterdir())  # deleted after use
    with (pytest.raises(envrun.ThrowawayError, match=r"uv pip install a==1 broken==1 failed \(exit 1\)"),
          envrun.throwaway(tmp_path, "t-", "3.11", ["a==1", "broken==1"], [], 60)):
        raise AssertionError("entered an env that could not be built")
    assert not list(tmp_path.iterdir())  # deleted when it could not be built


def test_a_probe_process_has_the_self_update_switches_and_no_index_to_reach(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue #30: `import unsloth` 2025.1-2025.3 runs `pip install --upgrade unsloth_zoo`; the caller's own index
    settings (a find-links folder, a config file, a proxy exception) must not reach a probe process."""
    for k, v in {"PIP_FIND_LINKS": "/opt/wheels", "PIP_EXTRA_INDEX_URL": "https://mirror", "UV_FIND_LINKS": "/w",
                 "UV_INDEX": "https://mirror", "no_proxy": "*", "https_proxy": "http://corp:3128",
                 "UNSLOTH_DISABLE_AUTO_UPDATES": "0"}.items():
        monkeypatch.setenv(k, v)
    env = envrun.clean_env(tmp_path / "pp")
    assert env["UNSLOTH_DISABLE_AUTO_UPDATES"] == "1"
    assert env["PIP_NO_INDEX"] == "1" and env["UV_OFFLINE"] == "1" and env["UV_NO_CACHE"] == "1"
    assert env["PIP_CONFIG_FILE"] == os.devnull and env["UV_NO_CONFIG"] == "1"
    assert not {"PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_INDEX"} & set(env)
    for k in ("PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "http_proxy", "https_proxy", "all_proxy",
              "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert env[k] == "http://127.0.0.1:9", k  # a closed port on the loopback interface
    assert env["no_proxy"] == env["NO_PROXY"] == ""
    assert envrun.run_python(Path(sys.executable), "import os; print(os.environ['PIP_NO_INDEX'])").stdout.strip() \
        == "1"  # the interpreter checks of pinned and the GPU run get the same


def test_the_closed_port_refuses_a_connection() -> None:
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(envrun.CLOSED)
    with pytest.raises(OSError), socket.create_connection((where.hostname, where.port), timeout=5):
        pass
