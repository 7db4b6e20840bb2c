"""``nox -s gate -- --zoo SOURCE`` on real releases and on backports of zoo 2026.10.9 built here by the harness:
a zoo that drops a name unsloth 2026.10.x imports at module level fails the gate structurally and names the
releases; a zoo that reverts the fused CE fix fails on the hazard; zoo 2026.10.9 as released passes, with one
real cell. The first two read wheels only (``--cells 0``); the unsloth side is narrowed with ``--against`` to
the releases the tests name, to keep CI cheap (the wheels are read once into the scan's cache)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from matrix.sources.backport import cached_backport, download_wheel, wheel_cache
from matrix.sources.backport_build import load_manifest
from matrix.sources.interface import sha256_file
from tests.integration.harness import ROOT, explain, run_nox

pytestmark = pytest.mark.integration
ZOO = "2026.10.9"
AGAINST = ">=2026.10.7"  # unsloth 2026.10.7, 2026.10.8, 2026.10.9: each imports patch_layernorm at module level
HEAD = 10  # what a zoo maintainer reads first


def backport(name: str, tmp: Path) -> Path:
    """The wheel of backport ``tests/backports/<name>`` on zoo 2026.10.9 from the index (the harness's builder)."""
    base = download_wheel("unsloth_zoo", ZOO, wheel_cache())
    return cached_backport(load_manifest(ROOT / "tests" / "backports" / name), base, sha256_file(base), tmp / name,
                           name)


def gate(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str], dict[str, Any]]:
    proc = run_nox(tmp / "envs", "-s", "gate", "--", *args, out=tmp)
    doc_path = tmp / "gate" / "zoo-gate.json"
    assert doc_path.is_file(), explain(proc)
    return proc, proc.stdout.splitlines()[:HEAD], json.loads(doc_path.read_text())


def test_a_zoo_that_drops_a_name_recent_unsloth_imports_fails_and_names_the_releases(tmp_path: Path) -> None:
    # The backport renames zoo's `patch_layernorm` away (and drops it from __all__). unsloth 2026.10.7-2026.10.9
    # import it at module level (unsloth/kernels/layernorm.py, unsloth/models/_utils.py): `import unsloth` fails
    # with the candidate, where zoo 2026.10.9 as released (the previous build of this version) works.
    wheel = backport("zoo-drop-patch-layernorm", tmp_path)
    proc, head, doc = gate(tmp_path, "--zoo", str(wheel), "--cells", "0", "--against", AGAINST)
    assert proc.returncode == 1, explain(proc)
    assert head[0].startswith(f"gate --zoo: FAIL: unsloth_zoo {ZOO} (path {wheel.name}) beside zoo {ZOO}")
    assert head[1] == (f"regression: unsloth 2026.10.7 … 2026.10.9 (3): worked with zoo {ZOO}, incompatible with "
                       "the candidate: missing `unsloth_zoo.patching_utils.patch_layernorm` (import unsloth fails)")
    assert "gate: exit 1 (fail)" in head
    assert doc["previous"] == ZOO and doc["cells"] is None
    admitted = doc["structural"]["admitted"]
    assert {e["unsloth"]: (e["candidate"], e["previous"], e["regression"]) for e in admitted} == dict.fromkeys(
        ("2026.10.7", "2026.10.8", "2026.10.9"), ("incompatible", "compatible", True))
    # the hazards are those of 2026.10.9: nothing reverted
    assert not any(h.get("reverted") for h in doc["hazards"])


def test_a_zoo_that_reverts_the_fused_ce_fix_fails_on_the_hazard(tmp_path: Path) -> None:
    # The backport makes zoo's zero guard return the count as given: the fused CE divides an all-masked batch by
    # 0 again. Zoo 2026.10.9 as released is fixed: a reverted fix, while every unsloth still imports it.
    wheel = backport("zoo-revert-ce-guard", tmp_path)
    proc, head, doc = gate(tmp_path, "--zoo", str(wheel), "--cells", "0", "--against", AGAINST)
    assert proc.returncode == 1, explain(proc)
    assert head[0].startswith("gate --zoo: FAIL:")
    assert head[1].startswith(f"reverted fix: fused-ce-masked-nan: zoo {ZOO} is fixed, the candidate vulnerable: ")
    haz = {h["check"]: h for h in doc["hazards"]}
    assert (haz["fused-ce-masked-nan"]["previous"], haz["fused-ce-masked-nan"]["candidate"]) == ("fixed",
                                                                                                 "vulnerable")
    # the other kernels are untouched: the CPU kernel was vulnerable in 2026.10.9 already (not a revert)
    assert (haz["cpu-ce-masked-nan"]["candidate"], haz["cpu-ce-masked-nan"]["reverted"]) == ("vulnerable", False)
    assert [e["candidate"] for e in doc["structural"]["admitted"]] == ["compatible"] * 3
    assert not any(e["regression"] for e in doc["structural"]["admitted"])


def test_the_released_zoo_passes_with_one_real_cell(tmp_path: Path) -> None:
    # zoo 2026.10.9 from the index, against the release before it (2026.10.8): every unsloth of the range imports
    # with it, no check goes from fixed to vulnerable, and the one cell (the newest unsloth x the candidate)
    # passes the gate (its CPU-backend kernel is latent there: a WARN, as in the unsloth gate).
    proc, head, doc = gate(tmp_path, "--zoo", ZOO, "--cells", "1", "--against", AGAINST)
    assert proc.returncode == 0, explain(proc)
    assert head[0] == (f"gate --zoo: PASS: unsloth_zoo {ZOO} (pypi unsloth_zoo-{ZOO}-py3-none-any.whl) beside zoo "
                       "2026.10.8")
    assert doc["previous"] == "2026.10.8"
    assert [e["candidate"] for e in doc["structural"]["admitted"]] == ["compatible"] * 3
    assert {h["check"]: h["candidate"] for h in doc["hazards"]} == {
        "fused-ce-masked-nan": "fixed", "cpu-ce-masked-nan": "vulnerable", "grpo-normalizer-nan": "fixed"}
    assert doc["cells"]["ids"] == ["u2026.10.9__candidate"] and doc["cells"]["code"] == 0
    assert "gate: exit 0 (pass)" in head
