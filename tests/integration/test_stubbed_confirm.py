"""``history --confirm`` on an unsloth that asks the GPU inside ``import unsloth``: the stubbed import decides.

Two throwaway envs (unsloth 2025.3.10 with zoo 2025.3.8 and 2025.3.9, the pair of unsloth #1992/#2003), read by
hand from the wheels:

* ``unsloth/__init__.py`` of 2025.3.10 raises ``NotImplementedError("Unsloth: No NVIDIA GPU found? ...")`` when
  ``torch.cuda.is_available()`` is False, before it imports anything of zoo: on a CPU host the real import is
  ``n/a`` for want of an accelerator (before the stubbed mode both pairs were ``static-only``);
* with the accelerator queries stubbed, the import gets on to ``unsloth/models/_utils.py:102``
  (``from unsloth_zoo.loss_utils import _unsloth_get_batch_samples``): zoo 2025.3.8 lacks the name, so the
  import raises that ImportError (the static verdict says incompatible: confirmed), zoo 2025.3.9 has it and the
  import succeeds (static compatible: confirmed);
* zoo 2025.3.8 is older than the 2025.3.9 that unsloth's import wants, so unsloth would run
  ``pip install --upgrade unsloth_zoo``: UNSLOTH_DISABLE_AUTO_UPDATES keeps it from trying, and the zoo the
  import ran against is still 2025.3.8.
* transformers is resolved as of 2025-03-13/14 (the later upload of each pair): a 4.x, not the 5.x of today.

One more env (unsloth 2025.3.11 with zoo 2025.3.9, unsloth #2015), read by hand from the wheels: unsloth's
``models/rl_replacements.py`` reads ``RL_REPLACEMENTS["grpo_compute_loss_slow"]`` at import, and zoo 2025.3.9's
``rl_replacements.py`` builds ``RL_REPLACEMENTS`` without that key, so the stubbed import raises
``KeyError: 'grpo_compute_loss_slow'``. The message names no zoo module; the pair reader's key reads make it the
skew (before, it was ``environment`` and the pair ``static-only``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def history(cache: Path, folder: Path, *args: str) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, "-m", "matrix", "history", *args, "--no-scan", "--confirm", "-o",
                           str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "SKEWMATRIX_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((folder / "history.json").read_text()), proc.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path, Path]:
    cache, folder = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("out")
    doc, log = history(cache, folder, "--unsloth", "==2025.3.10", "--zoo", ">=2025.3.8,<=2025.3.9")
    return doc, log, folder, cache


def test_a_pair_the_gpu_question_left_static_only_is_confirmed_stubbed(run: tuple) -> None:
    doc, log, _, _ = run
    by = {p["zoo"]: p for p in doc["pairs"]}
    bad, good = by["2025.3.8"], by["2025.3.9"]
    assert (bad["static_verdict"], good["static_verdict"]) == ("incompatible", "compatible")
    for p in (bad, good):
        rt = p["runtime"]
        assert (rt["mode"], p["confirmed_by"], p["confirm_why"]) == ("stubbed", "runtime-stubbed", "boundary")
        assert rt["plain_reason"].startswith("no accelerator: NotImplementedError: Unsloth: No NVIDIA GPU found?")
        assert rt["versions"]["unsloth"] == "2025.3.10" and rt["versions"]["transformers"].startswith("4.")
    assert (bad["runtime"]["outcome"], bad["verdict"]) == ("skew", "incompatible")
    assert bad["runtime"]["reason"].startswith("ImportError: cannot import name '_unsloth_get_batch_samples' from "
                                               "'unsloth_zoo.loss_utils'")
    assert bad["runtime"]["versions"]["unsloth_zoo"] == "2025.3.8"  # no auto-update ran
    assert (good["runtime"]["outcome"], good["verdict"]) == ("imports", "compatible")
    assert "unsloth 2025.3.10 x zoo 2025.3.8 (boundary): static incompatible, runtime skew (stubbed) -> " \
           "runtime-stubbed" in log


def test_the_pages_show_runtime_stubbed_and_every_env_was_deleted(run: tuple) -> None:
    _, _, folder, cache = run
    md = (folder / "history.md").read_text()
    assert "| 2025.3.10 | 2025.3.8 | boundary | incompatible | skew | runtime-stubbed | ImportError" in md
    assert "(confirmed_by runtime-stubbed)" in (folder / "history.html").read_text()
    assert not list((cache / "history-confirm" / "envs").iterdir())


def test_a_keyerror_on_a_key_unsloth_reads_from_a_zoo_dict_is_the_skew(tmp_path: Path) -> None:
    doc, log = history(tmp_path / "cache", tmp_path / "out", "--unsloth", "==2025.3.11", "--zoo", "==2025.3.9")
    assert "unsloth 2025.3.11 x zoo 2025.3.9 (class): static incompatible, runtime skew (stubbed) -> " \
           "runtime-stubbed" in log
    (p,) = doc["pairs"]
    assert p["static_verdict"] == "incompatible"
    assert "grpo_compute_loss_slow" in json.dumps(p["missing"])  # the reader's key read
    rt = p["runtime"]
    assert (rt["mode"], rt["outcome"], p["confirmed_by"], p["verdict"]) == (
        "stubbed", "skew", "runtime-stubbed", "incompatible")
    assert rt["reason"].startswith("KeyError: 'grpo_compute_loss_slow' (a key unsloth reads from a zoo dict)")
    assert rt["at"].startswith("unsloth/models/rl_replacements.py:")
    assert rt["versions"]["unsloth_zoo"] == "2025.3.9"
    assert doc["confirm"]["tally"] == {"confirmed stubbed": 1} and doc["confirm"]["counted"] == 1
