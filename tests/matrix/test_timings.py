"""Where a cell's time went (matrix/cells/timings.py), from a cell JSON of our own making."""

from __future__ import annotations

import pytest

from matrix.cells import timings

FUSED, GRPO = "fused-ce-masked-nan", "grpo-normalizer-nan"


def cell(total: float = 60.0, reused: bool = False) -> dict:
    raw_s = 0.0 if reused else 20.0
    return {
        "cell_id": "u__z", "seconds": total,
        "steps": [{"name": "materialize", "seconds": 1.0}, {"name": "admissibility", "seconds": 0.5},
                  {"name": "install", "seconds": 3.0}, {"name": "record", "seconds": 0.5},
                  {"name": "probes", "seconds": 54.0}, {"name": f"probe:{FUSED}:runtime", "seconds": raw_s}],
        # the static detectors ran inside the phase processes' 48 s (static_in_phases), after torch's 4 s
        "probes": {"static_s": 5.0, "torch_import_s": 4.0, "phases_s": 52.0, "import_unsloth_s": 30.0,
                   "static_in_phases": True,
                   "waited_for_raw_s": 0.0 if reused else 2.0, "import_unsloth_cpu_backend_s": 10.0,
                   "process_s": {"raw": 0.1 if reused else 25.0, "unsloth": 43.0, "cpu-backend": 20.0},
                   "raw_reuse": {"reused": reused, "digest": "d1", "from_cell": "u0__z" if reused else "u__z"}},
        "checks": {
            FUSED: {"steps": [{"name": "runtime", "process": "raw", "seconds": raw_s},
                              {"name": "guard", "process": "unsloth", "seconds": 1.0},
                              {"name": "train", "process": "unsloth", "seconds": 6.0}]},
            GRPO: {"steps": [{"name": "runtime", "process": "raw", "seconds": 0.0 if reused else 5.0},
                             {"name": "train", "process": "raw", "seconds": 0.0 if reused else 3.0},
                             {"name": "guard", "process": "unsloth", "seconds": 0.25},
                             {"name": "train2", "process": "cpu-backend", "seconds": 4.0}]},
        },
    }


def test_the_wall_parts_add_up_to_the_cells_seconds() -> None:
    b = timings.breakdown(cell())
    # 1 + 0.5 + 3 + 0.5 harness steps; torch 4 + phase processes 48 of the 54 s probes step: 2 s left there
    assert b["wall"] == {"materialize": 1.0, "admissibility": 0.5, "install": 3.0, "record": 0.5, "static": 0.0,
                         "torch import": 4.0, "phase processes": 48.0, "probe start and end": 2.0, "other": 1.0}
    assert sum(b["wall"].values()) == pytest.approx(b["total"]) == 60.0
    assert b["processes"]["static"] == {"wall": 5.0, "steps": 0.0}


def test_a_probe_json_whose_static_detectors_ran_first() -> None:
    old = cell()
    old["probes"].update(static_in_phases=None, phases_s=45.0)  # torch 4 + processes 41, static 5 before them
    b = timings.breakdown(old)
    assert (b["wall"]["static"], b["wall"]["phase processes"], b["wall"]["probe start and end"]) == (5.0, 41.0, 4.0)
    assert sum(b["wall"].values()) == pytest.approx(60.0)


def test_each_process_and_each_checks_cost() -> None:
    b = timings.breakdown(cell())
    assert b["processes"]["raw"] == {"wall": 25.0, "steps": 28.0}  # 20 + 5 + 3
    assert b["processes"]["unsloth"] == {"wall": 43.0, "steps": 7.25, "import_unsloth": 30.0, "waited_for_raw": 2.0}
    assert b["processes"]["cpu-backend"] == {"wall": 20.0, "steps": 4.0, "import_unsloth": 10.0}
    # the GRPO check's added cost: its steps wherever they ran, 5 + 3 + 0.25 + 4
    assert b["cost"] == {FUSED: 27.0, GRPO: 12.25}
    assert b["steps"][GRPO] == {"runtime": 5.0, "train": 3.0, "guard": 0.25, "train2": 4.0}
    assert b["raw_reused_from"] is None and b["raw_digest"] == "d1"


def test_a_reused_raw_phase_costs_nothing_and_names_its_producer() -> None:
    b = timings.breakdown(cell(reused=True))
    assert b["raw_reused_from"] == "u0__z"
    assert b["processes"]["raw"]["steps"] == 0.0 and b["cost"][GRPO] == 4.25


def test_where_the_time_goes_sums_over_cells_with_shares_and_the_floor() -> None:
    rows = {"a": timings.breakdown(cell(60.0)), "b": timings.breakdown(cell(40.0, reused=True))}
    rows["b"]["cell_id"] = "b"
    s = timings.where_time_goes(rows, {"a": 20.0, "b": 30.0})
    assert s["total_s"] == 100.0 and s["cells"] == 2
    assert s["wall"]["phase processes"] == {"s": 96.0, "share": 0.96}
    # cell b's seconds are 40 against parts that sum to 59: its "other" is floored at 0, never negative
    assert s["wall"]["other"] == {"s": 1.0, "share": 0.01}
    assert s["check_cost"][FUSED] == {"s": 34.0, "share": 0.34}  # 27 + 7 (its raw runtime was reused)
    assert next(iter(s["wall"])) == "phase processes"  # largest first
    assert s["processes"]["unsloth"]["import_unsloth"] == 60.0
    assert s["raw_reused_cells"] == ["b"]
    assert (s["floor_s"], s["floor_share"]) == (50.0, 0.5)
    text = timings.render(rows, {"a": 20.0, "b": 30.0}, s)
    assert "where the time goes (2 cells, 100.0 s in all)" in text
    assert f"{GRPO} 16.5 s (16.5%)" in text  # 12.25 + 4.25
    assert "u0__z" in text.splitlines()[2]  # cell b's row names where its raw findings came from


def test_an_error_cell_without_probes_still_breaks_down() -> None:
    b = timings.breakdown({"cell_id": "x", "seconds": 2.0, "steps": [{"name": "install", "seconds": 2.0}],
                           "probes": None, "checks": None})
    assert b["wall"]["install"] == 2.0 and b["processes"] == {} and b["cost"] == {}
