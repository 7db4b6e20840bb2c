"""The history's ``--confirm`` on rows written here: which pairs, how an outcome is merged, cached and shown.

No env is built: the runtime check is a function of the test's (``runner``), the verdicts come from the real
pair reader judging small tables made here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from matrix.scan.history import grid, history_confirm
from matrix.scan.history.history_confirm import Outcome, boundaries, merge, pick
from matrix.scan.history.history_page import counted_line, heatmap, markdown
from probes.checks.pair_compat.pairs import TARGET
from tests.history_inputs import refs, table


def row(u: str, z: str, verdict: str, cls: str | None = "c") -> dict:
    return {"unsloth": u, "zoo": z, "verdict": verdict, "class": cls, "admitted": True}


def test_boundaries_are_both_sides_of_each_change_along_the_zoo_axis() -> None:
    pairs = [row("10", z, v) for z, v in (("1.0", "incompatible"), ("1.10", "compatible"), ("1.2", "incompatible"),
                                         ("2.0", "compatible"))]  # zoo order: 1.0 < 1.2 < 1.10 < 2.0 (not text order)
    pairs += [row("11", z, "compatible") for z in ("1.0", "1.2", "1.10", "2.0")]  # no change: no boundary
    assert boundaries(pairs) == {("10", "1.2"), ("10", "1.10")}


def test_pick_adds_one_pair_per_class_no_boundary_stands_for_newest_first_and_capped() -> None:
    pairs = [row("10", "1.0", "incompatible", "A"), row("10", "2.0", "compatible", "B"),
             row("10", "3.0", "compatible", "B"),  # boundary 1.0|2.0 covers classes A and B
             row("9", "1.0", "compatible", "C"), row("9", "2.0", "compatible", "C"),  # C: no boundary
             row("9", "3.0", "compatible", "D"), row("8", "3.0", "compatible", "D"),  # D: newest member (9, 3.0)
             row("7", "1.0", "unknown", None)]  # not read: no class, and alone on its row: no change
    assert pick(pairs, 12) == [("10", "2.0", "boundary"), ("10", "1.0", "boundary"), ("9", "3.0", "class"),
                               ("9", "2.0", "class")]
    assert pick(pairs, 3) == pick(pairs, 12)[:3]
    assert pick(pairs, 0) == []


@pytest.mark.parametrize(("static", "outcome", "verdict", "by"), [
    ("compatible", "imports", "compatible", "runtime"),
    ("degraded", "imports", "degraded", "runtime"),
    ("incompatible", "skew", "incompatible", "runtime"),
    ("incompatible", "imports", "inconsistent", "inconsistent"),  # an import that succeeds is never incompatible
    ("compatible", "skew", "inconsistent", "inconsistent"),
    ("unknown", "skew", "incompatible", "runtime"),  # the runtime decides what the source could not
    ("unknown", "imports", "unknown", "runtime"),
    ("incompatible", "n/a", "incompatible", "static-only"),
    ("compatible", "n/a", "compatible", "static-only"),
])
def test_merge(static: str, outcome: str, verdict: str, by: str) -> None:
    got = merge(row("10", "1.0", static), Outcome(outcome, "why", 1.0), "boundary")
    assert (got["verdict"], got["confirmed_by"], got["static_verdict"]) == (verdict, by, static)
    assert got["runtime"]["outcome"] == outcome and got["confirm_why"] == "boundary"


def document() -> dict:
    """unsloth 10 needs ``loss.b``: zoo 1.0 lacks it (incompatible), zoo 2.0 has it (compatible)."""
    uns = [{"version": "10", "refs": refs("unsloth_zoo.loss.b"), "plain": None, "sha256": "u10"}]
    zoo = [{"version": "1.0", "table": table("a"), "sha256": "z1"}, {"version": "2.0", "table": table("a", "b"),
                                                                    "sha256": "z2"}]
    judged = grid.judge_all(TARGET, uns, zoo)
    return {"check": "x", "unsloth": [{"version": "10", "sha256": "u10", "plain_pick": "2.0", "floor": None}],
            "zoo": [{"version": z["version"], "sha256": z["sha256"]} for z in zoo], "newest_zoo": "2.0",
            "pairs": judged["pairs"], "classes": judged["classes"], "scan": {}, "runtime": "static",
            "lines": [grid.release_line("10", judged["pairs"])], "stats": {"classes": 2, "seconds": 0}}


def test_confirm_records_each_pair_caches_it_and_redoes_the_lines(tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []
    answers = {"1.0": Outcome("imports", "import unsloth succeeded", 2.0, {"unsloth": "10"}),  # static missed it
               "2.0": Outcome("imports", "import unsloth succeeded", 3.0)}

    def runner(u: str, z: str, _work: Path) -> Outcome:
        calls.append((u, z))
        return answers[z]

    lines: list[str] = []
    doc = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lines.append, runner=runner)
    by = {p["zoo"]: p for p in doc["pairs"]}
    assert calls == [("10", "2.0"), ("10", "1.0")]  # both sides of the one boundary, newest first
    assert (by["1.0"]["verdict"], by["1.0"]["static_verdict"], by["1.0"]["confirmed_by"]) == (
        "inconsistent", "incompatible", "inconsistent")
    assert (by["2.0"]["verdict"], by["2.0"]["confirmed_by"]) == ("compatible", "runtime")
    assert lines[0].startswith("confirm [1/2] unsloth 10 x zoo 2.0 (boundary): static compatible, runtime imports")
    assert doc["confirm"]["confirmed_by"] == {"inconsistent": 1, "runtime": 1}
    assert "zoo 1.0: inconsistent" in doc["lines"][0]  # the line no longer calls it incompatible
    again = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lines.append, runner=runner)
    assert len(calls) == 2 and again["pairs"] == doc["pairs"]  # the rerun built nothing: same answers, cached


def test_an_environment_failure_is_not_cached_and_another_wheel_is_another_pair(tmp_path: Path) -> None:
    calls: list[str] = []

    def runner(u: str, z: str, _work: Path) -> Outcome:
        calls.append(z)
        return Outcome("n/a", "uv pip install failed", 1.0, cacheable=False)

    doc = history_confirm.confirm(document(), max_n=1, cache=tmp_path, log=lambda _m: None, runner=runner)
    assert [p.get("confirmed_by") for p in doc["pairs"]] == [None, "static-only"]  # the cap: the newest pair only
    history_confirm.confirm(document(), max_n=1, cache=tmp_path, log=lambda _m: None, runner=runner)
    assert calls == ["2.0", "2.0"]


def test_markdown_and_heatmap_show_the_confirmed_pairs(tmp_path: Path) -> None:
    def runner(u: str, z: str, _work: Path) -> Outcome:
        if z == "1.0":
            return Outcome("skew", "ImportError: cannot import name 'b' from 'unsloth_zoo.loss'", 2.0)
        return Outcome("n/a", "no accelerator: RuntimeError: Found no NVIDIA driver", 1.0)

    doc = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lambda _m: None, runner=runner)
    md = markdown(doc)
    section = md[md.index("## Confirmed at runtime"):]
    assert "| 10 | 2.0 | boundary | compatible | n/a | static-only | no accelerator: RuntimeError" in section
    assert "| 10 | 1.0 | boundary | incompatible | skew | runtime | ImportError: cannot import name 'b'" in section
    assert section.index("| 10 | 2.0 |") < section.index("| 10 | 1.0 |")
    page = heatmap(doc)
    assert page.count('<td class="rt"') == 2
    assert "static incompatible, runtime skew: ImportError: cannot import name &#x27;b&#x27;" in page
    assert "## Confirmed at runtime" not in markdown(document())  # without --confirm: no section
    assert 'class="rt"' not in heatmap(document())


def test_an_inconsistent_pair_has_its_own_colour() -> None:
    doc = document()
    doc["pairs"][0] = merge(doc["pairs"][0], Outcome("imports", "import unsloth succeeded", 1.0), "boundary")
    assert "background:#6a1b9a" in heatmap(doc) and "inconsistent 1" in markdown(doc)
    assert "inconsistent" not in markdown(document()).split("\n")[2]  # no zero count without a confirmation


def test_the_in_env_entry_classifies_the_import_with_the_checks_rule(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A made-up unsloth whose import fails on a zoo name inside a wrapper: ``skew``, the innermost message."""
    import json
    import sys

    from probes.checks.pair_compat import confirm as entry

    (tmp_path / "unsloth").mkdir()
    (tmp_path / "unsloth_zoo").mkdir()
    (tmp_path / "unsloth_zoo" / "__init__.py").write_text("")
    (tmp_path / "unsloth_zoo" / "loss.py").write_text("a = 1\n")
    (tmp_path / "unsloth" / "__init__.py").write_text(
        "try:\n    from unsloth_zoo.loss import gone\nexcept ImportError as e:\n"
        "    raise ImportError('Unsloth: Please install unsloth_zoo') from e\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("unsloth", "unsloth_zoo", "unsloth_zoo.loss"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert entry.main(["--out", str(tmp_path / "out.json")]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert (got["imported"], got["class"]) == (False, "skew")
    assert got["reason"].startswith("ImportError: cannot import name 'gone' from 'unsloth_zoo.loss'")
    assert [e["link"] for e in got["chain"]] == ["raised", "__cause__"]
    (tmp_path / "unsloth" / "__init__.py").write_text("from unsloth_zoo.loss import a\n")
    for name in ("unsloth", "unsloth_zoo", "unsloth_zoo.loss"):
        sys.modules.pop(name, None)
    assert entry.import_once() == {"imported": True, "class": "ok", "reason": "import unsloth succeeded",
                                   "chain": []}
    for name in ("unsloth", "unsloth_zoo", "unsloth_zoo.loss"):
        sys.modules.pop(name, None)


def test_the_history_bench_writes_both_runs_against_the_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from matrix.scan.history import history_bench

    seen: list[tuple[list[str], str]] = []

    def timed(argv: list[str], env: dict[str, str], log: Path) -> dict:
        folder = Path(argv[argv.index("-o") + 1])
        seen.append((argv, env["SKEWMATRIX_CACHE"]))
        (folder / "history.json").write_text(json.dumps({"pairs": [{}] * 3, "stats": {"peak_rss_mib": 99.0}}))
        return {"seconds": 700.0 if "cold" in log.name else 12.5, "returncode": 0}

    monkeypatch.setattr(history_bench, "timed", timed)
    assert history_bench.bench_history(["history", "--no-scan"], tmp_path) == 0
    got = json.loads((tmp_path / "bench-history.json").read_text())
    assert (got["cold"]["met"], got["warm"]["met"]) == (False, True)  # 700 s > 600 s; 12.5 s < 60 s
    assert got["warm"]["peak_rss_mib"] == 99.0 and got["cold"]["pairs"] == 3
    assert seen[0][1] == seen[1][1] and "--no-scan" in seen[0][0]  # the warm run reuses the cold run's cache
    out = capsys.readouterr().out
    assert "cold 700.0 s (target < 600 s: NOT met)" in out and "warm 12.5 s (target < 60 s: met)" in out


# ---------------------------------------------------------------- the stubbed import mode (runtime-stubbed)
@pytest.mark.parametrize(("static", "outcome", "verdict", "by"), [
    ("incompatible", "skew", "incompatible", "runtime-stubbed"),  # the stubbed import really raised the zoo error
    ("compatible", "imports", "compatible", "runtime-stubbed"),
    ("degraded", "imports", "degraded", "runtime-stubbed"),
    ("incompatible", "imports", "inconsistent", "inconsistent"),  # a stubbed import that succeeds contradicts it
    ("unknown", "skew", "incompatible", "runtime-stubbed"),
    ("incompatible", "n/a", "incompatible", "static-only"),  # the stubs were not enough: the static verdict stands
])
def test_merge_keeps_a_stubbed_confirmation_apart_from_a_real_import(static: str, outcome: str, verdict: str,
                                                                     by: str) -> None:
    rt = Outcome(outcome, "why", 1.0, mode="stubbed", plain_reason="no accelerator: RuntimeError: no driver")
    got = merge(row("10", "1.0", static), rt, "class")
    assert (got["verdict"], got["confirmed_by"]) == (verdict, by)
    assert got["runtime"]["mode"] == "stubbed" and got["runtime"]["plain_reason"].startswith("no accelerator")
    if by == "inconsistent":
        assert "import unsloth (stubbed) imports" in got["reason"]


def fake_env(tmp_path: Path) -> history_confirm.envrun.Throwaway:
    return history_confirm.envrun.Throwaway(tmp_path / "python", tmp_path, tmp_path)


@pytest.mark.parametrize(("plain", "modes", "by"), [
    (Outcome("n/a", "no accelerator: RuntimeError: Found no NVIDIA driver", 1.0), ["plain", "stubbed"],
     "stubbed"),  # the real import asked the GPU: imported again, stubbed
    (Outcome("imports", "import unsloth succeeded", 1.0), ["plain"], "plain"),  # a real answer: kept
    (Outcome("skew", "ImportError: cannot import name 'b' from 'unsloth_zoo.loss'", 1.0), ["plain"], "plain"),
    (Outcome("n/a", "KeyError: 'x' (at unsloth/models/rl.py:3)", 1.0), ["plain"], "plain"),  # not the GPU: no stubs
])
def test_the_stubbed_import_runs_only_when_the_real_one_wanted_an_accelerator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plain: Outcome, modes: list[str], by: str) -> None:
    ran: list[str] = []

    def once(_env: object, _t0: float, _entry: str, *, stubbed: bool) -> Outcome:
        ran.append("stubbed" if stubbed else "plain")
        return Outcome("skew", "ImportError: cannot import name 'b' from 'unsloth_zoo.loss'", 2.0) if stubbed else plain

    monkeypatch.setattr(history_confirm, "_import_once", once)
    got = history_confirm._import_in(fake_env(tmp_path), 0.0, "probes.checks.pair_compat.confirm")
    assert ran == modes and got.mode == by
    assert got.plain_reason == (plain.reason if by == "stubbed" else None)


def test_the_import_runs_offline_and_the_stubbed_one_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], dict[str, str]]] = []

    def run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> history_confirm.envrun.Ran:
        seen.append((argv, env))
        (tmp_path / argv[argv.index("--out") + 1].rpartition("/")[2]).write_text(
            '{"class": "environment", "reason": "no accelerator: RuntimeError: Found no NVIDIA driver"}')
        return history_confirm.envrun.Ran(argv, 0)

    monkeypatch.setattr(history_confirm.envrun, "run", run)
    monkeypatch.setattr(history_confirm.envrun, "probes_path", lambda root: root / "pythonpath")
    got = history_confirm._import_in(fake_env(tmp_path), 0.0, "entry")
    assert [a[-1] for a, _ in seen] == [str(tmp_path / "import-plain.json"), "--stubbed"]
    for _, env in seen:
        assert (env["UNSLOTH_DISABLE_AUTO_UPDATES"], env["PIP_NO_INDEX"], env["UV_OFFLINE"]) == ("1", "1", "1")
    assert (got.outcome, got.mode) == ("n/a", "stubbed")  # neither import answered: the static verdict stands


def test_the_pair_is_installed_with_the_patched_libraries_of_its_date(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"unsloth": [{"version": "10", "uploaded": "2025-03-14T15:09:33Z"}],
           "zoo": [{"version": "1.0", "uploaded": "2025-03-13T13:43:53Z"}, {"version": "2.0", "uploaded": None}]}
    assert history_confirm.era_of(doc, "10", "1.0") == "2025-03-14T15:09:33Z"  # the later of the two
    assert history_confirm.era_of(doc, "10", "2.0") is None
    got: dict[str, list[str]] = {}

    class Boom(history_confirm.envrun.ThrowawayError):
        pass

    def throwaway(_w: Path, _p: str, _py: str, requirements: list[str], overrides: list[str], _t: float) -> None:
        got.update(requirements=requirements, overrides=overrides)
        raise Boom("stop here")

    monkeypatch.setattr(history_confirm.envrun, "throwaway", throwaway)
    out = history_confirm.run_pair("10", "1.0", tmp_path, entry="e", era="2025-03-14T15:09:33Z")
    assert (out.outcome, out.cacheable) == ("n/a", False)
    assert got["overrides"] == ["unsloth==10", "unsloth_zoo==1.0"]
    assert "--exclude-newer-package=transformers=2025-03-14T15:09:33Z" in got["requirements"]
    assert "--exclude-newer-package=trl=2025-03-14T15:09:33Z" in got["requirements"]
    assert not any("torch" in r for r in got["requirements"])  # torch stays the newest: the one in the uv cache
    assert history_confirm.era_options(None) == []


def test_a_cached_stubbed_outcome_stays_stubbed_and_the_pages_name_it(tmp_path: Path) -> None:
    calls: list[str] = []

    def runner(u: str, z: str, _work: Path) -> Outcome:
        calls.append(z)
        if z == "1.0":
            return Outcome("skew", "ImportError: cannot import name 'b' from 'unsloth_zoo.loss'", 2.0, mode="stubbed",
                           plain_reason="no accelerator: NotImplementedError: Unsloth: No NVIDIA GPU found?")
        return Outcome("imports", "import unsloth succeeded", 3.0, mode="stubbed", plain_reason="no accelerator: x")

    doc = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lambda _m: None, runner=runner)
    again = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lambda _m: None, runner=runner)
    assert len(calls) == 2 and again["pairs"] == doc["pairs"]
    assert [p["confirmed_by"] for p in again["pairs"]] == ["runtime-stubbed", "runtime-stubbed"]
    assert again["confirm"]["confirmed_by"] == {"runtime-stubbed": 2}
    md = markdown(again)
    assert "| 10 | 1.0 | boundary | incompatible | skew | runtime-stubbed | ImportError: cannot import name 'b'" in md
    assert "(confirmed_by runtime-stubbed)" in heatmap(again)


def fake_torch(root: Path) -> None:
    """A torch whose accelerator queries fail the way a CUDA build's do on a host without a driver."""
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text("from torch import cuda, _C\n")
    (root / "torch" / "_C.py").write_text("def _cuda_getCurrentRawStream(i):\n    raise RuntimeError('no driver')\n")
    (root / "torch" / "cuda.py").write_text(
        "def _no():\n    raise RuntimeError('Found no NVIDIA driver on your system.')\n"
        "def is_available():\n    return False\n"
        "def get_device_capability(device=None):\n    _no()\n")


def test_the_stubbed_entry_gets_past_the_gpu_question_to_the_zoo_error(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An unsloth shaped like 2025.3.10: it raises without a GPU, asks the capability, runs ``ldconfig``
    through ``os.system``, then imports a zoo name its zoo lacks."""
    import json
    import os
    import sys

    from probes.checks.pair_compat import confirm as entry

    fake_torch(tmp_path)
    (tmp_path / "unsloth").mkdir()
    (tmp_path / "unsloth_zoo").mkdir()
    (tmp_path / "unsloth_zoo" / "__init__.py").write_text("")
    (tmp_path / "unsloth_zoo" / "loss.py").write_text("a = 1\n")
    (tmp_path / "unsloth" / "__init__.py").write_text(
        "import os, torch\nif not torch.cuda.is_available():\n    raise NotImplementedError('Unsloth: No NVIDIA GPU "
        "found? Unsloth currently only supports GPUs!')\nmajor, minor = torch.cuda.get_device_capability()\n"
        "assert torch.cuda.is_bf16_supported() and torch.cuda.device_count() == 1\n"
        "assert os.system('ldconfig /usr/lib64-nvidia') != 0\n"
        "from unsloth_zoo.loss import gone\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(os, "system", os.system)  # restored after the test: the stubs replace it
    names = ("unsloth", "unsloth_zoo", "unsloth_zoo.loss", "torch", "torch.cuda", "torch._C")
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert entry.main(["--out", str(tmp_path / "plain.json")]) == 0
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert (plain["class"], plain["mode"]) == ("environment", "plain")
    assert plain["reason"].startswith("no accelerator: NotImplementedError: Unsloth: No NVIDIA GPU found?")
    for name in names:
        sys.modules.pop(name, None)
    assert entry.main(["--out", str(tmp_path / "stubbed.json"), "--stubbed"]) == 0
    got = json.loads((tmp_path / "stubbed.json").read_text())
    assert (got["imported"], got["class"], got["mode"]) == (False, "skew", "stubbed")
    assert got["reason"].startswith("ImportError: cannot import name 'gone' from 'unsloth_zoo.loss'")
    assert got["stubs"]["refused"] == ["ldconfig /usr/lib64-nvidia"]  # asked, not run
    assert "torch.cuda.get_device_capability" in got["stubs"]["patched"]
    for name in names:
        sys.modules.pop(name, None)


def test_a_stubbed_import_failing_on_something_else_is_stub_insufficient_with_its_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyError on a zoo dict (unsloth 2025.3.11 x zoo 2025.3.9) names no zoo module: not a skew by the check's
    rule, so ``environment``, and the reason says where it was raised."""
    import json
    import os
    import sys

    from probes.checks.pair_compat import confirm as entry

    fake_torch(tmp_path)
    (tmp_path / "unsloth").mkdir()
    (tmp_path / "unsloth" / "__init__.py").write_text(
        "import torch\ntorch.cuda.get_device_capability()\nREPL = {}\nx = REPL['grpo_compute_loss_slow']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(os, "system", os.system)
    names = ("unsloth", "torch", "torch.cuda", "torch._C")
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert entry.main(["--out", str(tmp_path / "out.json"), "--stubbed"]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["class"] == "environment"
    assert got["reason"] == "stub insufficient: KeyError: 'grpo_compute_loss_slow' (at unsloth/__init__.py:4)"
    for name in names:
        sys.modules.pop(name, None)


def raised(root: Path, files: dict[str, str], call: str) -> BaseException:
    """The exception ``call`` raises with ``files`` written under ``root`` (``site-packages/...``) importable."""
    import importlib
    import sys

    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    sys.path.insert(0, str(root / "site-packages"))
    tops = {n.split("/")[1] for n in files}
    try:
        module, _, func = call.rpartition(".")
        getattr(importlib.import_module(module), func)()
    except Exception as exc:
        return exc
    finally:
        sys.path.remove(str(root / "site-packages"))
        for name in [m for m in sys.modules if m.split(".")[0] in tops]:
            del sys.modules[name]
    raise AssertionError(f"{call} raised nothing")


TORCH_CUDA = {"site-packages/torch/__init__.py": "from torch import cuda\n",
              "site-packages/torch/cuda/__init__.py": (
                  "def _lazy_init():\n    raise AssertionError('Torch not compiled with CUDA enabled')\n"
                  "def stream():\n    _lazy_init()\n")}


def test_a_failure_is_placed_at_the_unsloth_line_that_asked_torch_not_in_torch(tmp_path: Path) -> None:
    from probes.checks.pair_compat.confirm import origin

    files = {**TORCH_CUDA, "site-packages/unsloth/__init__.py": "",
             "site-packages/unsloth/kernels.py": (
                 "import torch\ndef go():\n    try:\n        torch.cuda.stream()\n"
                 "    except AssertionError as e:\n        raise RuntimeError('wrapped') from e\n")}
    # three frames deep in torch: the chain's last three frames hold no unsloth line, the whole traceback does
    assert origin(raised(tmp_path, files, "unsloth.kernels.go")) == ("unsloth/kernels.py:4", "torch")


def test_a_failure_outside_unsloth_and_zoo_is_placed_at_its_own_frame_and_names_its_package(tmp_path: Path) -> None:
    from probes.checks.pair_compat.confirm import origin

    files = {"site-packages/xformers/__init__.py": "def load():\n    raise ImportError('xformers wants torch 2.4')\n"}
    assert origin(raised(tmp_path, files, "xformers.load")) == ("xformers/__init__.py:2", "xformers")
    files = {"site-packages/unsloth_zoo/__init__.py": "", "site-packages/unsloth_zoo/utils.py": (
        "import xformers\ndef go():\n    xformers.load()\n"),
        "site-packages/xformers/__init__.py": "def load():\n    raise ImportError('xformers wants torch 2.4')\n"}
    assert origin(raised(tmp_path, files, "unsloth_zoo.utils.go")) == ("unsloth_zoo/utils.py:3", "xformers")


def test_a_keyerror_on_a_zoo_dict_key_is_the_skew_in_the_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shaped like unsloth 2025.3.11 x zoo 2025.3.9: unsloth reads ``RL_REPLACEMENTS["grpo_compute_loss_slow"]``
    at import and the zoo dict lacks the key."""
    import json
    import os
    import sys

    from probes.checks.pair_compat import confirm as entry

    fake_torch(tmp_path)
    for d in ("unsloth", "unsloth/models", "unsloth_zoo"):
        (tmp_path / d).mkdir()
    (tmp_path / "unsloth_zoo" / "__init__.py").write_text("")
    (tmp_path / "unsloth_zoo" / "rl_replacements.py").write_text("RL_REPLACEMENTS = {'grpo_compute_loss': 1}\n")
    (tmp_path / "unsloth" / "__init__.py").write_text(
        "import torch\ntorch.cuda.get_device_capability()\nfrom .models import rl\n")
    (tmp_path / "unsloth" / "models" / "__init__.py").write_text("")
    (tmp_path / "unsloth" / "models" / "rl.py").write_text(
        "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS\nslow = RL_REPLACEMENTS['grpo_compute_loss_slow']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(os, "system", os.system)
    names = ("unsloth", "unsloth.models", "unsloth.models.rl", "unsloth_zoo", "unsloth_zoo.rl_replacements", "torch",
             "torch.cuda", "torch._C")
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert entry.main(["--out", str(tmp_path / "out.json"), "--stubbed"]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert (got["class"], got["at"], got["raised_in"]) == ("skew", "unsloth/models/rl.py:2", None)
    assert got["reason"] == ("KeyError: 'grpo_compute_loss_slow' (a key unsloth reads from a zoo dict) "
                             "(at unsloth/models/rl.py:2)")
    for name in names:
        sys.modules.pop(name, None)


def test_spread_picks_classes_evenly_over_the_window_besides_the_boundaries() -> None:
    from matrix.scan.history.history_confirm import spread_evenly

    items = [(str(u), "1.0") for u in range(10)]
    assert spread_evenly(items, 2) == [("2", "1.0"), ("7", "1.0")]  # the middle of each half
    assert spread_evenly(items, 5) == [(str(u), "1.0") for u in (1, 3, 5, 7, 9)]
    assert spread_evenly(items, 0) == [] and spread_evenly(items, 12) == items
    pairs = [row("20", "1.0", "incompatible", "A"), row("20", "2.0", "compatible", "B")]  # the one boundary
    pairs += [row(str(u), "1.0", "compatible", f"K{u}") for u in range(10, 19)]  # nine classes, one release each
    assert pick(pairs, 3) == [("20", "2.0", "boundary"), ("20", "1.0", "boundary"), ("18", "1.0", "class")]
    got = pick(pairs, 3, spread=3)  # the newest three as before, and three classes spread over the nine
    assert got == [("20", "2.0", "boundary"), ("20", "1.0", "boundary"), ("18", "1.0", "class"),
                   ("17", "1.0", "spread"), ("14", "1.0", "spread"), ("11", "1.0", "spread")]
    assert pick(pairs, 0, spread=1) == [("14", "1.0", "spread")]


def test_the_confirm_block_counts_every_class_once_by_its_best_pair_with_the_reason() -> None:
    from matrix.scan.history.history_confirm import tally

    def done(u: str, z: str, cls: str, by: str, **rt: str) -> dict:
        return {**row(u, z, "compatible", cls), "confirmed_by": by,
                "runtime": {"outcome": "n/a" if by == "static-only" else "imports", "reason": "", **rt}}

    stub_short = {"mode": "stubbed", "reason": "stub insufficient: no accelerator: AssertionError: Torch not compiled "
                                               "with CUDA enabled (at unsloth/kernels/utils.py:72)",
                  "at": "unsloth/kernels/utils.py:72", "raised_in": "torch"}
    pairs = [done("10", "1.0", "A", "runtime"), done("10", "2.0", "A", "static-only", **stub_short),
             done("9", "1.0", "B", "static-only", **stub_short), done("9", "2.0", "B", "runtime-stubbed"),
             done("8", "1.0", "C", "static-only", **stub_short),
             done("8", "2.0", "H", "static-only", **(stub_short | {"at": "unsloth/kernels/utils.py:80"})),
             done("7", "1.0", "D", "static-only", mode="stubbed", reason="stub insufficient: ImportError: no "
                  "xformers (at unsloth/models/llama.py:5)", at="unsloth/models/llama.py:5", raised_in="xformers"),
             done("6", "1.0", "E", "static-only", reason="uv pip install unsloth==6 failed (exit 1): no wheel"),
             done("5", "1.0", "F", "static-only", reason="ValueError: bad (at unsloth/models/_utils.py:9)",
                  at="unsloth/models/_utils.py:9", raised_in="transformers"),
             row("4", "1.0", "compatible", "G"), row("4", "2.0", "compatible", "G"),
             row("3", "1.0", "unknown", None)]  # not read: no class
    got = tally(pairs, 7)
    assert (got["counted"], got["spread"]) == (8, 7)  # one category per file: lines 72 and 80 are one
    assert got["tally"] == {"confirmed real": 1, "confirmed stubbed": 1,
                            "static-only: stub insufficient: accelerator query at unsloth/kernels/utils.py": 2,
                            "static-only: needs a package of its era: xformers": 1,
                            "static-only: does not install": 1,
                            "static-only: environment: ValueError at unsloth/models/_utils.py": 1,
                            "not picked": 1}
    assert got["examples"]["confirmed real"] == "10 x 1.0"


def test_the_pages_carry_the_counted_line(tmp_path: Path) -> None:
    def runner(u: str, z: str, _work: Path) -> Outcome:
        if z == "1.0":
            return Outcome("skew", "ImportError: cannot import name 'b' from 'unsloth_zoo.loss'", 2.0, mode="stubbed")
        return Outcome("n/a", "stub insufficient: no accelerator: RuntimeError: no driver (at unsloth/k.py:3)", 1.0,
                       mode="stubbed", at="unsloth/k.py:3", raised_in="torch")

    doc = history_confirm.confirm(document(), max_n=12, cache=tmp_path, log=lambda _m: None, runner=runner, spread=4)
    assert (doc["confirm"]["counted"], doc["confirm"]["spread"]) == (2, 4)
    line = ("Counted: 2 equivalence classes, --confirm-spread 4: 1 confirmed stubbed, 1 static-only "
            "(stub insufficient: accelerator query at unsloth/k.py: 1).")
    assert line in markdown(doc).split("\n")
    assert f"<p>{line}</p>" in heatmap(doc)
    assert "Counted:" not in markdown(document()) and "Counted:" not in heatmap(document())
    doc["confirm"]["tally"] = {"confirmed real": 1, "not picked": 5, "static-only: does not install": 2}
    assert counted_line(doc) == ("Counted: 2 equivalence classes, --confirm-spread 4: 1 confirmed real, 2 static-only "
                                 "(does not install: 2), 5 not picked.")  # the reasons before what was not picked


def test_the_stubs_answer_the_memory_query_spelled_through_torch_cuda_memory(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Shaped like zoo's ``temporary_patches/gpt_oss.py`` (2025.12 .. 2026.8): ``torch.cuda.memory.mem_get_info(0)``
    at import, once ``is_available()`` says yes. torch re-exports the function as ``torch.cuda.mem_get_info``;
    stubbing only that name left the submodule's asking the driver (10 of the measured window's pairs)."""
    import json
    import os
    import sys

    from probes.checks.pair_compat import confirm as entry

    (tmp_path / "torch" / "cuda").mkdir(parents=True)
    (tmp_path / "torch" / "__init__.py").write_text("from torch import cuda, _C\n")
    (tmp_path / "torch" / "_C.py").write_text("")
    (tmp_path / "torch" / "cuda" / "memory.py").write_text(
        "def mem_get_info(device=None):\n    raise RuntimeError('Found no NVIDIA driver on your system.')\n")
    (tmp_path / "torch" / "cuda" / "__init__.py").write_text(
        "from . import memory\nfrom .memory import mem_get_info\ndef is_available():\n    return False\n")
    for d in ("unsloth", "unsloth_zoo"):
        (tmp_path / d).mkdir()
    (tmp_path / "unsloth_zoo" / "__init__.py").write_text(
        "import torch\nif torch.cuda.is_available():\n    free, total = torch.cuda.memory.mem_get_info(0)\n"
        "    assert total == 80 * 1024**3\n")
    (tmp_path / "unsloth" / "__init__.py").write_text("import unsloth_zoo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(os, "system", os.system)
    names = ("unsloth", "unsloth_zoo", "torch", "torch.cuda", "torch.cuda.memory", "torch._C")
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert entry.main(["--out", str(tmp_path / "out.json"), "--stubbed"]) == 0
    got = json.loads((tmp_path / "out.json").read_text())
    assert (got["class"], got["reason"]) == ("ok", "import unsloth succeeded")
    assert "torch.cuda.memory.mem_get_info" in got["stubs"]["patched"]
    for name in names:
        sys.modules.pop(name, None)
