"""The shared training scaffolding's pure parts (``probes/training_run.py``) and the shared one-file scan target.

The trainer-driving parts need torch and transformers in a real stack: the checks' training steps cover them
on real builds (``tests/integration/test_train_real.py``, the matrices). Here: the arguments, the records, the
judgement of a step from its runs, and the step's envelope around a check's runs, with a stand-in for the one
torch call it makes (the thread count), since the harness's venv has no torch.
"""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from probes import training, training_run
from probes.checks.capabilities import one_file_target

# A config class of some version: these fields only, with defaults other than the probe's.
FakeArgs = dataclasses.make_dataclass("FakeArgs", [
    ("output_dir", str), ("gradient_accumulation_steps", int, 1), ("logging_steps", int, 500),
    ("logging_nan_inf_filter", bool, True), ("report_to", "list | None", None), ("max_length", int, 0)])


def test_trainer_args_drop_what_the_class_lacks_and_name_the_missing_required_ones() -> None:
    args = training_run.trainer_args(FakeArgs, {"output_dir": "/o", "logging_steps": 1, "packing": False})
    assert args == FakeArgs(output_dir="/o", logging_steps=1)
    with pytest.raises(training.NotApplicable, match=r"^FakeArgs has no loss_type, beta$"):
        training_run.trainer_args(FakeArgs, {"output_dir": "/o"}, required=("loss_type", "logging_steps", "beta"))


def test_sft_config_sets_the_spec_and_the_routes_extras() -> None:
    spec = training.RunSpec("x", 2, 3, frozenset())
    args = training_run.sft_config(FakeArgs, "/o", spec, max_length=7)
    # GA from the spec, a log line per step unfiltered, nothing reported, the route's extra kept.
    assert args == FakeArgs(output_dir="/o", gradient_accumulation_steps=2, logging_steps=1,
                            logging_nan_inf_filter=False, report_to=[], max_length=7)


def test_base_args_are_a_new_dict_each_time() -> None:
    first, second = training_run.base_args(), training_run.base_args()
    first["report_to"].append("wandb")
    assert second["report_to"] == []


def test_one_count_per_step_unless_micro_batches_differ() -> None:
    assert training_run.one_or_all([]) is None
    assert training_run.one_or_all(["tensor(0)", "tensor(0)"]) == "tensor(0)"
    assert training_run.one_or_all(["tensor(0)", "tensor(3)"]) == ["tensor(0)", "tensor(3)"]


def step(n: int, left: int, n_items: str) -> dict:
    return {"step": n, "labels_left": left, "micro_batches": [{"labels_left": left, "n_items": n_items}]}


def test_a_run_record_names_its_fully_masked_steps() -> None:
    steps = [step(1, 5, "5"), step(2, 0, "0"), step(3, 0, "0")]
    assert training_run.run_record("ga1", steps, trainer="T") == {
        "name": "ga1", "trainer": "T", "masked_steps": [2, 3], "steps": steps}


def run(name: str, outcome: str, first: int | None, steps: list, **more: object) -> dict:
    return {"name": name, "outcome": outcome, "first_nan_step": first, "nan_until_end": first is not None,
            "symptom": f"{name} {outcome}", "steps": steps, **more}


def test_the_step_is_its_worst_run_with_every_symptom_and_the_first_runs_evaluation() -> None:
    evaluation = {"outcome": "clean"}
    runs = [run("ga1", "clean", None, [step(1, 0, "tensor(0)")], evaluation=evaluation),
            run("ga2", "nan-logged", 2, [step(1, 4, "tensor(4)"), step(2, 0, "tensor(0)")])]
    out = training_run.judged(runs)
    assert out == {"outcome": "nan-logged", "first_nan_step": 2, "nan_until_end": True, "runs": runs,
                   "reason": "ga1: ga1 clean; ga2: ga2 nan-logged", "evaluation": evaluation,
                   "n_items_seen": ["tensor(0)", "tensor(4)"], "kernel_calls": 3, "masked_inputs": ["tensor(0)"]}
    assert "evaluation" not in runs[0], "the evaluation is the step's, not kept twice"


def test_a_step_whose_runs_made_no_evaluation_has_none() -> None:
    out = training_run.judged([run("dapo", "crash", None, [])])
    assert out["outcome"] == "crash" and "evaluation" not in out


class Threads:
    """Stands in for torch's thread count, the envelope's one torch call."""

    def __init__(self) -> None:
        self.n, self.during = 8, None

    def get_num_threads(self) -> int:
        return self.n

    def set_num_threads(self, n: int) -> None:
        self.n = n


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Threads:
    t = Threads()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=t.get_num_threads,
                                                                  set_num_threads=t.set_num_threads))
    return t


class NoGrpoRoute(training.NotApplicable):
    pass


def envelope(runs, unavailable=None) -> dict:  # type: ignore[no-untyped-def]
    return training_run.probe_run("a route", "cpu", False, ("pytest",), runs, unavailable)


def test_the_runs_are_made_on_one_thread_and_judged(threads: Threads) -> None:
    def runs(result: dict) -> list:
        threads.during = threads.n
        result["trainer"] = "T"
        return [run("ga1", "clean", None, [step(1, 0, "None")])]

    out = envelope(runs)
    assert (threads.during, threads.n) == (1, 8), "one thread while training, the caller's count after"
    assert (out["ok"], out["outcome"], out["trainer"], out["route"], out["reason"]) == (
        True, "clean", "T", "a route", "ga1: ga1 clean")
    assert out["versions"]["pytest"] == pytest.__version__ and isinstance(out["seconds"], float)


def test_a_route_the_stack_lacks_is_na_with_empty_runs(threads: Threads) -> None:
    def runs(result: dict) -> list:
        raise NoGrpoRoute("no dapo")

    plain = envelope(runs)
    assert (plain["ok"], plain["outcome"], plain["reason"], plain["runs"], plain["kernel_calls"]) == (
        True, "n/a", "n/a: no dapo", [], 0)
    assert "unavailable" not in plain
    assert envelope(runs, unavailable=NoGrpoRoute)["unavailable"] == "no dapo"
    assert threads.n == 8


def test_the_probes_own_failure_is_an_error_with_its_traceback(threads: Threads) -> None:
    def runs(result: dict) -> list:
        raise KeyError("labels")

    out = envelope(runs)
    assert (out["ok"], out["outcome"], out["reason"]) == (False, "error", "training probe failed: KeyError: 'labels'")
    assert "KeyError" in out["error"] and out["runs"] == [] and out["first_nan_step"] is None
    assert threads.n == 8


# ---------------------------------------------------------------- the one-file scan target


def test_a_one_file_target_reads_the_detectors_file_and_is_absent_without_it() -> None:
    seen = []

    def analyze_source(text: str, path: str) -> dict:
        seen.append((text, path))
        return {"verdict": "vulnerable", "reason": "divides", "line": 7}

    detector = types.ModuleType("made_up_static")
    detector.REL, detector.FUNCTION, detector.analyze_source = ("sub", "ops.py"), "kernel_fn", analyze_source
    target = one_file_target(detector, runtime="pkg.runtime:run")
    assert (target.package, target.file, target.function, target.follow_imports, target.runtime, target.guard) == (
        "unsloth_zoo", "unsloth_zoo/sub/ops.py", "kernel_fn", False, "pkg.runtime:run", None)
    assert target.detector is detector and target.folder == "unsloth_zoo/sub/"
    assert target.detect({"unsloth_zoo/sub/ops.py": "src", "unsloth_zoo/other.py": "x"}) == {
        "verdict": "vulnerable", "reason": "divides", "evidence_line": 7}
    assert seen == [("src", "unsloth_zoo/sub/ops.py")]
    assert target.detect({"unsloth_zoo/other.py": "x"}) == {
        "verdict": "absent", "reason": "no unsloth_zoo/sub/ops.py", "evidence_line": None}
