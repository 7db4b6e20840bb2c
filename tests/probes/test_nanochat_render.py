"""The nanochat check's drill-down: what a maintainer reads before merging a fix (synthetic step payloads)."""

from __future__ import annotations

from typing import Any

from probes.checks.nanochat_sft_masked_nan import render


def section(runs: list[dict[str, Any]], failing: dict[str, str]) -> dict[str, Any]:
    tests = [{"id": t, "outcome": "fail" if t in failing else "pass", "reason": failing.get(t, "ok")}
             for t in ("n1-partial-reference", "n2-normal-backward", "n3-all-masked-micro-batch",
                       "n5-other-reductions")]
    return {"static": {"verdict": "fixed", "reason": "gpt.py:1: guarded", "loop": {"verdict": "unguarded",
                                                                                    "reason": "no test"}},
            "steps": [{"name": "behavior", "status": "ok", "result": {"tests": tests}},
                      {"name": "train", "status": "ok", "result": {"runs": runs}}]}


def test_a_crash_a_nan_and_a_changed_reduction_are_each_said_plainly() -> None:
    runs = [{"name": "ga1", "gradient_accumulation_steps": 1, "outcome": "crash", "first_nan_step": None,
             "crash": {"type": "RuntimeError", "message": "element 0 of tensors does not require grad",
                       "at_step": 2, "where": "loss.backward()"},
             "loss_lines": ["step 00001 (10%) | loss: 2.5 | lrm: 1.00"]},
            {"name": "ga4", "gradient_accumulation_steps": 4, "outcome": "nan-logged", "first_nan_step": 3,
             "loss_lines": ["step 00001 | loss: 3.1 | x", "step 00002 | loss: 2.9", "step 00003 | loss: nan"]}]
    d = render.details(section(runs, {"n5-other-reductions": "reduction='none' returned a scalar",
                                      "n3-all-masked-micro-batch": "backward raised"}))
    items = dict(d.items)
    assert items["does chat_sft.py train"] == ("ga1: no, RuntimeError at step 2 (loss.backward()); "
                                               "ga4: yes, 3 logged steps")
    assert items["logged loss finite"] == "ga1: yes; ga4: no, NaN from step 3"
    # n3 is about the masked case itself, not about other callers: only n5 is named
    assert items["other callers of GPT.forward"] == "n5-other-reductions: reduction='none' returned a scalar"
    (table,) = d.tables
    assert table.rows[1][5] == "3.1, 2.9, nan" and table.rows[0][2] == "crash"
    assert table.bad == frozenset({(0, 2), (1, 2)})


def test_a_clean_fix_says_other_callers_are_unchanged() -> None:
    runs = [{"name": "ga1", "gradient_accumulation_steps": 1, "outcome": "clean", "first_nan_step": None,
             "loss_lines": [f"step {i} | loss: 0.5" for i in range(12)]}]
    d = render.details(section(runs, {}))
    items = dict(d.items)
    assert items["other callers of GPT.forward"] == "unchanged (n1, n2, n5 pass)"
    assert items["does chat_sft.py train"] == "ga1: yes, 12 logged steps"
    assert d.tables[0].rows[0][5].endswith(", …") and d.tables[0].bad == frozenset()
