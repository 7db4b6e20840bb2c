"""Release gating and pinned environments on real builds, with their exit codes 0, 1 and 2."""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from matrix.envs.tools import uv_bin
from matrix.index import IndexClient
from matrix.scan.cache import ScanIndex
from matrix.scan.fetch import Fetcher
from matrix.scan.history import candidate_tree, readers
from matrix.scan.terms import Want
from matrix.settings import scan_cache_dir
from tests.integration.harness import UNSLOTH, explain, run_nox

pytestmark = pytest.mark.integration
FUSED, CPU = "fused-ce-masked-nan", "cpu-ce-masked-nan"


def states(report: dict, check: str) -> dict[str, str]:
    return {c["cell_id"]: c["verdicts"][check]["guard"] for c in report["cells"]}


@pytest.fixture(scope="module")
def fixed_floor(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path, dict, str]:
    """``nox -s gate`` of unsloth 2026.10.9: zoo 2026.10.9 at the floor and the newest stack it admits; its
    report and Markdown read at once (a later ``--strict`` run writes into the same folder)."""
    out = tmp_path_factory.mktemp("fixed-floor")
    proc = run_nox(out / "envs", "-s", "gate", "--", "--unsloth", UNSLOTH, "--below", "0", out=out)
    gate = out / "gate"
    report = json.loads((gate / "report.json").read_text()) if (gate / "report.json").is_file() else {}
    markdown = (gate / "report.md").read_text() if (gate / "report.md").is_file() else ""
    return proc, out, report, markdown


def test_gate_on_a_fixed_floor_passes_with_a_latent_warning_and_strict_fails_it(fixed_floor) -> None:
    # unsloth 2026.10.9 admits zoo >= 2026.10.9: the fused kernel carries the fix there. zoo's CPU-backend
    # kernel of that release still returns NaN for an all-masked batch with no count, and nothing guards it;
    # but the CPU backend's SFTTrainer sends a count (tensor(0)) at fully masked steps, at both ends of the stack
    # range the candidate admits (the gate crosses the floor and the newest transformers/TRL): latent, a
    # warning that passes the default gate (exit 0) and fails --strict (exit 1).
    proc, tmp_path, report, _ = fixed_floor
    assert proc.returncode == 0, explain(proc)
    ids = [c["cell_id"] for c in report["cells"]]
    assert ids == [f"candidate__z{UNSLOTH}__floor", f"candidate__z{UNSLOTH}__newest"]
    assert set(states(report, FUSED).values()) == {"not-needed"}
    assert set(states(report, CPU).values()) == {"missing"}
    for cell in report["cells"]:
        v = cell["verdicts"][CPU]
        assert (v["reach"], v["gate_fail"], v["gate_warn"]) == ("latent", False, True), cell["cell_id"]
        # the trainer sent a count (tensor(0) measured here), never None, at the fully masked micro-batches
        assert "num_items_in_batch=tensor(0)" in v["reach_reason"]
        assert v["training"]["masked_inputs"] and "None" not in v["training"]["masked_inputs"]
    floor, newest = (c["stack"]["resolved"] for c in report["cells"])
    assert (floor["transformers"], floor["trl"]) < (newest["transformers"], newest["trl"])
    assert f"{CPU}: LATENT" in proc.stdout and "gate: exit 0" in proc.stdout
    strict = run_nox(tmp_path / "envs", "-s", "gate", "--", "--unsloth", UNSLOTH, "--below", "0", "--strict",
                     out=tmp_path)
    assert strict.returncode == 1, explain(strict)
    assert "gate: exit 1" in strict.stdout


def _train(cell: dict, check: str) -> dict:
    return next(s for s in cell["checks"][check]["steps"] if s["name"] == "train")["result"]


def test_evaluation_on_the_floor_and_newest_stacks(fixed_floor) -> None:
    # Issue 27, item 5: trainer.evaluate() after training, on an eval set whose middle batch has no label left.
    # transformers 4.52.4's prediction_step hands compute_loss no count (5.x counts the shifted labels), and
    # zoo's CPU backend turns its chunked CE on only for a training step with gradients: in evaluation the
    # model's stock forward computes the loss, transformers' ForCausalLMLoss, a mean over no label = NaN. So
    # on the floor eval_loss is NaN, and not through this check's kernel (never called in evaluation): a
    # stack hazard, named, while the kernel's reach stays latent (the gate still passes). With TRL 1.15 the
    # evaluation goes through TRL's own loss, which floors the count: finite. The fused check's model calls
    # zoo's fused entry in evaluation too; zoo 2026.10.9 answers 0.0 for None and tensor(0) alike.
    proc, _, report, markdown = fixed_floor
    assert proc.returncode == 0, explain(proc)
    floor, newest = (c for c in report["cells"])  # floor first (the ids are checked above)
    assert floor["cell_id"].endswith("__floor") and newest["cell_id"].endswith("__newest")
    ev = _train(floor, CPU)["evaluation"]
    assert (ev["outcome"], ev["source"], ev["eval_loss"], ev["kernel_calls"]) == ("nan-logged", "stack", "nan", 0)
    assert [b["count"] for b in ev["batches"]] == ["None"] * 3
    assert [b["loss"] for b in ev["batches"]][1] == "nan" and ev["masked_inputs"] == ["None"]
    assert ev["model_loss_function"] == "transformers.loss.loss_utils.ForCausalLMLoss"
    assert "a stack hazard, not this check's kernel" in ev["symptom"]
    v = floor["verdicts"][CPU]
    assert (v["guard"], v["reach"], v["gate_fail"], v["gate_warn"]) == ("missing", "latent", False, True)
    assert "stack hazard" in v["reach_reason"] and v["training"]["evaluation"]["source"] == "stack"
    assert "stack hazard" in markdown
    ev = _train(newest, CPU)["evaluation"]
    assert (ev["outcome"], ev["source"], ev["kernel_calls"]) == ("clean", None, 0)
    assert isinstance(ev["eval_loss"], float) and ev["batches"][1]["loss"] == 0.0
    v = newest["verdicts"][CPU]
    assert v["reach"] == "latent" and "stack hazard" not in v["reach_reason"]
    for cell, sent in ((floor, "None"), (newest, "tensor(0)")):
        ev = _train(cell, FUSED)["evaluation"]
        assert (ev["outcome"], ev["kernel_calls"], ev["masked_inputs"]) == ("clean", 3, [sent]), ev
        assert ev["batches"][1]["kernel_calls"] == [{"n_items": sent, "raw_loss": 0.0}]
        assert cell["verdicts"][FUSED]["guard"] == "not-needed"


def test_gate_fails_a_candidate_whose_floor_is_vulnerable(tmp_path: Path) -> None:
    # unsloth 2026.10.5 admits zoo >= 2026.10.5, a release the scan finds vulnerable.
    proc = run_nox(tmp_path / "envs", "-s", "gate", "--", "--unsloth", "2026.10.5", "--below", "0", out=tmp_path)
    assert proc.returncode == 1, explain(proc)
    report = json.loads((tmp_path / "gate" / "report.json").read_text())
    fused = states(report, FUSED)
    vulnerable = [c for c in report["cells"] if c["cell_id"].startswith("candidate__z2026.10.5__")]
    assert vulnerable and {fused[c["cell_id"]] for c in vulnerable} == {"missing"}
    # the fused kernel of 2026.10.5 NaNs on the count of 0 the trainer sends: a real run shows it
    assert {c["verdicts"][FUSED]["reach"] for c in vulnerable} == {"exposed"}
    assert {fused[c] for c in fused if c.startswith(f"candidate__z{UNSLOTH}__")} == {"not-needed"}
    scan = json.loads((tmp_path / "gate" / "scan.json").read_text())
    assert "gate: zoo 2026.10.5: admitted floor" in proc.stdout
    # the remedy names the release from which no vulnerable one follows
    assert f"unsloth_zoo>={scan['timeline']['fixed_since']}" in proc.stdout


def test_gate_errors_when_the_candidate_cannot_be_built(tmp_path: Path) -> None:
    broken = tmp_path / "broken-unsloth"
    broken.mkdir()
    (broken / "pyproject.toml").write_text('[project]\nname = "unsloth"\nversion = "0"\ndynamic = ["nonsense"]\n'
                                           '[build-system]\nrequires = ["setuptools>=68"]\n'
                                           'build-backend = "setuptools.build_meta"\n')
    proc = run_nox(tmp_path / "envs", "-s", "gate", "--", "--unsloth", str(broken), "--below", "0",
                   out=tmp_path / "out")
    assert proc.returncode == 2, explain(proc)
    report = json.loads((tmp_path / "out" / "gate" / "report.json").read_text())
    assert {v["guard"] for c in report["cells"] for v in c["verdicts"].values()} == {"error"}
    assert all(c["error"]["kind"] == "build" for c in report["cells"])


def test_pinned_probes_an_existing_env_in_place(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    subprocess.run([uv_bin(), "venv", "-q", "-p", "3.11", str(env)], check=True)
    (tmp_path / "ov.txt").write_text("unsloth_zoo==2026.9.3\n")
    subprocess.run([uv_bin(), "pip", "install", "-q", "--python", str(env / "bin" / "python"),
                    f"unsloth=={UNSLOTH}", "unsloth_zoo==2026.9.3", "--overrides", str(tmp_path / "ov.txt")],
                   check=True)
    before = subprocess.run([uv_bin(), "pip", "freeze", "--python", str(env / "bin" / "python")],
                            capture_output=True, text=True, check=True).stdout
    proc = run_nox(tmp_path / "envs", "-s", "pinned", "--", "--python", str(env / "bin" / "python"),
                   out=tmp_path / "out")
    assert proc.returncode == 1, explain(proc)
    assert f"{FUSED}: EXPOSED: with unsloth_zoo 2026.9.3" in proc.stdout
    after = subprocess.run([uv_bin(), "pip", "freeze", "--python", str(env / "bin" / "python")],
                           capture_output=True, text=True, check=True).stdout
    assert before == after  # nothing was installed into it
    report = json.loads((tmp_path / "out" / "pinned" / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["verdicts"][FUSED]["guard"] == "missing" and cell["builds"]["zoo"]["source"] == "pinned"
    assert cell["verdicts"][CPU]["guard"] == "not-needed"  # zoo 2026.9.3 has no CPU backend


def test_pinned_builds_a_hashed_lock_exactly(tmp_path: Path) -> None:
    req = tmp_path / "req.in"
    req.write_text(f"unsloth=={UNSLOTH}\nunsloth_zoo==2026.10.9\n")
    lock = tmp_path / "requirements.txt"
    subprocess.run([uv_bin(), "pip", "compile", "-q", str(req), "--generate-hashes", "--python-version", "3.11",
                    "-o", str(lock)], check=True)
    assert "--hash=sha256:" in lock.read_text()
    proc = run_nox(tmp_path / "envs", "-s", "pinned", "--", "-r", str(lock), out=tmp_path / "out")
    # fused kernel fixed in 2026.10.9; its CPU-backend kernel NaNs only without a count, which the CPU
    # backend's SFTTrainer on this stack never sends: latent, a warning, exit 0
    assert proc.returncode == 0, explain(proc)
    assert "installing with --require-hashes" in proc.stdout
    assert f"{FUSED}: Safe: unsloth_zoo 2026.10.9 is not exposed" in proc.stdout
    assert f"{CPU}: LATENT" in proc.stdout and "num_items_in_batch=tensor(0)" in proc.stdout
    report = json.loads((tmp_path / "out" / "pinned" / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["verdicts"][CPU]["reach"] == "latent" and cell["stack"]["resolved"]["trl"]


def test_pinned_refuses_a_lock_whose_hash_does_not_match(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"unsloth_zoo==2026.10.9 --hash=sha256:{'0' * 64}\n")
    proc = run_nox(tmp_path / "envs", "-s", "pinned", "--", "-r", str(lock), out=tmp_path / "out")
    assert proc.returncode == 2, explain(proc)
    report = json.loads((tmp_path / "out" / "pinned" / "report.json").read_text())
    (cell,) = report["cells"]
    assert cell["error"]["kind"] == "build" and "hash" in cell["error"]["message"].lower()


# The structural verdict of a path candidate, read from its own tree (``matrix.scan.history.candidate_tree``):
# unsloth 2025.3.10's wheel unpacked (its ``unsloth/**.py`` and ``METADATA``, read from the index by the scan's
# fetcher), judged against the real zoo releases its floor admits, read by the history's readers. No env is
# built. unsloth 2025.3.10 declares ``unsloth_zoo>=2025.3.8`` and imports ``_unsloth_get_batch_samples`` from
# ``unsloth_zoo.loss_utils`` at import time (``unsloth/models/_utils.py``); zoo 2025.3.8 lacks it, 2025.3.9
# has it (unsloth #1992/#2003, read by hand from both wheels). So the tree as released fails the gate, and the
# same tree with its floor raised to 2025.3.9 passes.
TREE_VERSION, TREE_UPTO = "2025.3.10", "2025.3.9"  # TREE_UPTO: the zoo releases read stop there (the test's budget)


@pytest.fixture
def tree_gate_filters() -> Iterator[None]:
    """The readers parse every release with ``ast``; old zoo sources hold invalid escape sequences, whose
    warning (DeprecationWarning on Python 3.11, SyntaxWarning from 3.12) this suite's ``filterwarnings = error``
    would turn into a parse failure -- cached per release digest for every later reader. The gate runs with
    Python's default filters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@pytest.fixture(scope="module")
def unsloth_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:  # the released tree, unpacked
    cache = scan_cache_dir()
    index = ScanIndex(IndexClient(), cache=cache)
    row = next(r for r in readers.listed(index, "unsloth") if r.version == TREE_VERSION)
    f = row.release.pick()
    assert f is not None
    want = Want(name=lambda n: n.startswith("unsloth/") and n.endswith(".py"), metadata=True,
                key="test-gate-tree-sources")
    ex = Fetcher(cache, index.client.http).get(f, want)
    root = tmp_path_factory.mktemp("unsloth-2025.3.10")
    for member, text in ex.members.items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_text(text, encoding="utf-8")
    assert ex.metadata and "unsloth_zoo>=2025.3.8" in ex.metadata.replace(" ", "")
    (root / f"unsloth-{TREE_VERSION}.dist-info").mkdir()
    (root / f"unsloth-{TREE_VERSION}.dist-info" / "METADATA").write_text(ex.metadata, encoding="utf-8")
    return root


@pytest.mark.usefixtures("tree_gate_filters")
def test_the_tree_gate_fails_a_released_tree_on_the_zoo_its_floor_admits(unsloth_tree: Path) -> None:
    lines: list[str] = []
    assert candidate_tree.structural_tree_gate(unsloth_tree, lines.append, upto=TREE_UPTO) is True
    assert any("zoo floor 2025.3.8" in x and "2 admitted zoo release(s), 1 incompatible" in x for x in lines), lines
    assert any(x.startswith("gate: structural: zoo 2025.3.8: incompatible, missing ")
               and "unsloth_zoo.loss_utils._unsloth_get_batch_samples (unsloth/models/_utils.py:" in x
               for x in lines), lines


@pytest.mark.usefixtures("tree_gate_filters")
def test_the_tree_gate_passes_the_same_tree_with_its_floor_above_the_broken_zoo(unsloth_tree: Path,
                                                                                 tmp_path: Path) -> None:
    raised = shutil.copytree(unsloth_tree, tmp_path / unsloth_tree.name)
    meta = raised / f"unsloth-{TREE_VERSION}.dist-info" / "METADATA"
    meta.write_text(meta.read_text(encoding="utf-8").replace(">=2025.3.8", ">=2025.3.9"), encoding="utf-8")
    lines: list[str] = []
    assert candidate_tree.structural_tree_gate(raised, lines.append, upto=TREE_UPTO) is False
    assert any("zoo floor 2025.3.9" in x and "1 admitted zoo release(s), 0 incompatible" in x for x in lines), lines
