"""The pair under test stays put (issue #30.4), on real envs.

unsloth 2025.1 to 2025.3 run ``pip install --upgrade unsloth_zoo`` inside
``import unsloth`` when zoo is older than they want (``os.system``, the
``pip`` on PATH; only 2025.3 honours ``UNSLOTH_DISABLE_AUTO_UPDATES=1``).
Two checks, with small packages made here (wheels written with ``zipfile``):

* a probe process's environment (``envrun.clean_env``) makes every install at
  import fail: ``python -m pip``, ``os.system("pip ...")`` with the env's own
  ``pip`` first on PATH (an activated venv), and ``uv pip install`` all try
  to upgrade a package from the index, in a tiny venv (no torch), and the env
  is left as it was;
* a cell whose probes changed its env is an ``error`` naming the change: an
  ``unsloth`` whose import installs a newer ``unsloth_zoo`` from a local wheel
  (allowed offline), probed in place by the real CLI (``python -m matrix
  pinned --python``), next to a real torch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from matrix.cells.installed import changes, snapshot
from matrix.envs import envrun, recipe
from matrix.envs.tools import uv_bin
from tests.integration.harness import ROOT, nox_env

pytestmark = pytest.mark.integration

# In uv's cache from the other integration modules (the default matrix's zoo 2026.9.3 resolves it).
TORCH = "torch==2.12.1"
# Something on the index that no env here holds, for a self-update to reach for.
TARGET = "six"


def wheel(out: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of ``files`` (path -> source), with METADATA, WHEEL and a RECORD of real digests."""
    info = f"{name}-{version}.dist-info"
    contents = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: skewmatrix-test\nRoot-Is-Purelib: true\n"
                                 "Tag: py3-none-any\n"}
    rows = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(text.encode())}")
    contents[f"{info}/RECORD"] = "\n".join([*rows, f"{info}/RECORD,,"]) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_in_zip, text in contents.items():
            zf.writestr(name_in_zip, text)
    return path


def build(env_dir: Path, *requirements: str) -> Path:
    """A uv venv with ``requirements`` installed through the harness's own recipe."""
    assert envrun.create_env(env_dir, "3.11").ok
    python = env_dir / "bin" / "python"
    res = recipe.apply(recipe.Recipe(python="3.11", requirements=requirements), python, env_dir.parent, 600)
    assert res.ok, res.tail()
    return python


GRABBERS = {
    # what a library may run at import to update something: each records its exit status in the cwd
    "grab_pip": f"r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--upgrade', '{TARGET}'])\n"
                "open('attempts.txt', 'a').write(f'python -m pip {r.returncode}\\n')\n",
    "grab_system": f"r = os.system('pip install --upgrade --no-cache-dir --no-deps {TARGET}')\n"
                   "open('attempts.txt', 'a').write(f'os.system pip {r}\\n')\n",
    "grab_uv": "r = subprocess.run([{uv!r}, 'pip', 'install', '--python', sys.executable, '--upgrade', "
               f"'{TARGET}'])\n"
               "open('attempts.txt', 'a').write(f'uv pip {r.returncode}\\n')\n",
}


def test_a_probe_process_cannot_install_from_the_index(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    made = [wheel(wheels, name, "1.0", {f"{name}/__init__.py": "import os, subprocess, sys\n"
                                        + code.replace("{uv!r}", repr(uv_bin()))})
            for name, code in GRABBERS.items()]
    env_dir = tmp_path / "env"
    python = build(env_dir, "pip", *map(str, made))
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(env_dir, {"pip"})
    # The env's own bin first on PATH, as in an activated venv: `pip` is this env's pip.
    env = envrun.clean_env(None, PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}")
    ran = envrun.run([str(python), "-c", "import grab_pip, grab_system, grab_uv"], cwd=work, env=env, timeout=300)
    assert ran.ok, ran.tail()
    attempts = dict(line.rsplit(" ", 1) for line in (work / "attempts.txt").read_text().splitlines())
    assert set(attempts) == {"python -m pip", "os.system pip", "uv pip"}
    assert all(code != "0" for code in attempts.values()), (attempts, ran.tail())
    assert changes(before, snapshot(env_dir, {"pip"})) == []
    assert not list((env_dir / "lib").glob(f"python3*/site-packages/{TARGET}-*.dist-info"))


def test_a_cell_whose_probes_upgraded_zoo_is_an_error_naming_it(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    newer = wheel(wheels / "newer", "unsloth_zoo", "2025.3.17", {"unsloth_zoo/__init__.py": "__version__ = 'new'\n"})
    old_zoo = wheel(wheels, "unsloth_zoo", "2024.12.1", {"unsloth_zoo/__init__.py": "__version__ = 'old'\n"})
    # unsloth 2025.2.x's check, with a local wheel instead of the index (which a probe process cannot reach)
    unsloth = wheel(wheels, "unsloth", "2025.2.15", {"unsloth/__init__.py": (
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-m', 'pip', 'install', '--upgrade', '--no-deps', {str(newer)!r}])\n")})
    env_dir = tmp_path / "env"
    python = build(env_dir, "pip", TORCH, str(old_zoo), str(unsloth))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "matrix", "pinned", "--python", str(python)], cwd=ROOT,
                          env=nox_env(out), capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]  # an error cell: no verdict
    (path,) = (out / "pinned" / "cells").glob("*/cell.json")
    cell = json.loads(path.read_text())
    assert cell["cell_id"] == "pinned-2025.2.15__2024.12.1"
    assert cell["error"]["kind"] == "probe"
    assert "unsloth_zoo 2024.12.1 -> 2025.3.17" in cell["error"]["message"]
    assert cell["stay_put"]["changes"] == ["unsloth_zoo 2024.12.1 -> 2025.3.17"]
    assert "unsloth_zoo 2024.12.1 -> 2025.3.17" in proc.stdout  # the report carries the reason
    shutil.rmtree(env_dir)
