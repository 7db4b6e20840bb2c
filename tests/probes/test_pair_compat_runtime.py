"""pair-compat's runtime classification and its verdict in a cell, on exception chains and check sections
written here."""

from __future__ import annotations

from probes.checks.pair_compat.phases import classify_chain
from probes.checks.pair_compat.verdict import classify


def err(type_: str, message: str, link: str = "raised") -> dict:
    return {"type": type_, "message": message, "link": link, "name": None, "where": []}


def test_a_zoo_name_anywhere_in_the_chain_is_skew_even_under_a_wrapper() -> None:
    chain = [err("ImportError", "Unsloth: Please install unsloth_zoo via `pip install unsloth_zoo`"),
             err("ImportError", "cannot import name '_unsloth_get_batch_samples' from 'unsloth_zoo.loss_utils'",
                 "__context__")]
    assert classify_chain(chain)[0] == "skew"
    assert classify_chain([err("AttributeError", "module 'unsloth_zoo.utils' has no attribute 'x'")])[0] == "skew"


def test_no_accelerator_and_anything_else_is_environment() -> None:
    cls, why = classify_chain([err("RuntimeError", "Found no NVIDIA driver on your system")])
    assert cls == "environment" and why.startswith("no accelerator")
    cls, why = classify_chain([err("ValueError", "bad config")])
    assert (cls, why) == ("environment", "ValueError: bad config")
    # a zoo name in an error that is not an import or attribute error is not skew
    assert classify_chain([err("RuntimeError", "unsloth_zoo failed to patch")])[0] == "environment"


def section(static: str, cls: str | None) -> dict:
    result = {"class": cls, "reason": f"{cls} why"}
    steps = [] if cls is None else [{"name": "runtime", "status": "ok", "result": result}]
    return {"static": {"verdict": static, "reason": "r"}, "steps": steps}


def test_a_pair_that_imports_is_never_vulnerable() -> None:
    v = classify(section("vulnerable", "ok"), {})
    assert v.zoo.value == "inconsistent" and v.guard.value == "error"
    assert classify(section("fixed", "ok"), {}).guard.value == "not-needed"


def test_an_environment_failure_leaves_the_static_verdict_standing() -> None:
    v = classify(section("vulnerable", "environment"), {})
    assert (v.zoo.value, v.guard.value) == ("vulnerable", "missing")
    assert v.runtime.startswith("n/a: environment why")
    assert classify(section("fixed", "environment"), {}).guard.value == "not-needed"
    assert classify(section("fixed", "skew"), {}).guard.value == "broken"
    assert classify(section("vulnerable", "skew"), {}).guard.value == "missing"


def test_the_chain_keeps_the_zoo_error_a_wrapper_raised_from_or_during() -> None:
    from pathlib import Path

    from probes.checks import PhaseContext
    from probes.checks.pair_compat.phases import runtime
    from probes.common import exception_chain

    def wrapped(explicit: bool) -> BaseException:
        try:
            try:
                raise ImportError("cannot import name 'x' from 'unsloth_zoo.loss_utils'", name="unsloth_zoo.loss_utils")
            except ImportError as inner:
                if explicit:
                    raise ImportError("Unsloth: Please install unsloth_zoo") from inner
                raise ImportError("Unsloth: Please install unsloth_zoo")  # noqa: B904 -- a wrapper as unsloth writes it
        except ImportError as outer:
            return outer
        raise AssertionError("unreachable")

    for explicit, link in ((True, "__cause__"), (False, "__context__")):
        chain = exception_chain(wrapped(explicit))
        assert [e["type"] for e in chain] == ["ImportError", "ImportError"]
        assert chain[0]["message"].startswith("Unsloth: Please install") and chain[1]["link"] == link
        assert chain[1]["name"] == "unsloth_zoo.loss_utils"
        ctx = PhaseContext("cpu", False, "allow-cpu", Path("."), shared={},
                           imported={"imported": False, "chain": chain})
        got = runtime(ctx)
        assert got["class"] == "skew" and "'x'" in got["reason"]
    ok = PhaseContext("cpu", False, "allow-cpu", Path("."), shared={}, imported={"imported": True, "chain": []})
    assert runtime(ok)["class"] == "ok"


def test_the_runtime_step_is_an_unsloth_step_that_reads_the_cells_own_import() -> None:
    from probes.checks.pair_compat import phases

    assert not phases.RAW_STEPS  # no second `import unsloth` in a child of the raw process
    # both read the import: the trainers step says n/a itself when the import failed
    assert [(s.name, s.reads_import) for s in phases.UNSLOTH_STEPS] == [("runtime", True), ("trainers", True)]


def own(static: str, pair: str, cls: str | None, breaks_at: str | None = None) -> dict:
    s = section(static, cls)
    s["static"].update({"pair": pair, "reason": f"{pair}: missing `x` (save / GGUF export)", "breaks_at": breaks_at})
    return s


def test_the_check_speaks_its_own_words_and_a_degraded_pair_warns() -> None:
    from reports.gate import evaluate

    ok = classify(own("fixed", "compatible", "ok"), {})
    assert (ok.guard.value, ok.word, ok.warn) == ("not-needed", "compatible", "")
    deg = classify(own("fixed", "degraded", "ok"), {})
    assert (deg.guard.value, deg.word) == ("not-needed", "degraded")
    assert "save / GGUF export" in deg.warn  # the features it breaks
    d = deg.to_dict()
    assert d["gate_warn"] and not d["gate_fail"]
    # degraded on a host where the import cannot run: the static reading alone still warns
    assert classify(own("fixed", "degraded", "environment"), {}).word == "degraded"
    bad = classify(own("vulnerable", "incompatible", "skew"), {})
    assert (bad.guard.value, bad.word) == ("missing", "incompatible") and bad.to_dict()["gate_fail"]
    load = classify(own("vulnerable", "incompatible", "environment", "model-load"), {})
    assert load.word == "incompatible (breaks at model load)" and load.to_dict()["gate_fail"]
    assert classify(own("unknown", "unknown", "environment"), {}).word == "unknown"
    rep = {"gate": {}, "cells": [{"cell_id": "a", "verdicts": {"pair-compat": d}},
                                 {"cell_id": "b", "verdicts": {"pair-compat": d}}]}
    outcome = evaluate(rep)
    assert outcome.passed
    assert outcome.headline() == "GATE PASS: all 2 cells pass (2 degraded warning(s), WARN)"
    # the two cells share one line, and a degraded pair is no latent reach: strict mode is not mentioned
    [line] = outcome.lines()
    assert line.startswith("pair-compat: degraded (WARN: passes the gate; degraded: missing `x` (save / GGUF")
    assert line.endswith(": 2 cells: a, b") and "strict" not in line


def test_a_pair_that_imports_and_breaks_at_model_load_is_incompatible_not_inconsistent() -> None:
    s = own("vulnerable", "incompatible", "ok", "model-load")
    v = classify(s, {})
    assert (v.zoo.value, v.guard.value, v.word) == ("vulnerable", "missing", "incompatible (breaks at model load)")
    assert v.guard_reason.startswith("the pair imports, but the first model load fails")
    # an import break the import contradicts stays inconsistent
    assert classify(own("vulnerable", "incompatible", "ok", "import"), {}).zoo.value == "inconsistent"


def test_a_keyerror_on_a_key_the_reading_found_missing_is_the_skew() -> None:
    s = own("vulnerable", "incompatible", "environment", "import")
    s["static"]["missing"] = [{"name": "unsloth_zoo.rl_replacements.RL_REPLACEMENTS['grpo_compute_loss_slow']",
                               "key": "grpo_compute_loss_slow", "breaks": "import"}]
    s["steps"][0]["result"]["chain"] = [err("KeyError", "'grpo_compute_loss_slow'")]
    v = classify(s, {})
    assert (v.zoo.value, v.guard.value) == ("vulnerable", "missing") and not v.runtime.startswith("n/a")
    s["steps"][0]["result"]["chain"] = [err("KeyError", "'another_key'")]  # a KeyError the reading did not predict
    assert classify(s, {}).runtime.startswith("n/a")


def test_history_confirmation_agrees_with_a_model_load_break_when_the_import_succeeds() -> None:
    from matrix.scan.history.history_confirm import Outcome, merge

    ok = Outcome("imports", "import unsloth succeeded", 1.0)
    load = merge({"verdict": "incompatible", "breaks_at": "model-load"}, ok, "boundary")
    assert load["confirmed_by"] == "runtime" and load["verdict"] == "incompatible"
    at_import = merge({"verdict": "incompatible", "breaks_at": "import"}, ok, "boundary")
    assert at_import["confirmed_by"] == "inconsistent"


def test_a_keyerror_is_the_skew_only_on_a_key_unsloth_reads_from_a_zoo_dict() -> None:
    chain = [err("KeyError", "'grpo_compute_loss_slow'")]
    assert classify_chain(chain)[0] == "environment"  # without the key reads: a KeyError names no module
    cls, why = classify_chain(chain, frozenset({"grpo_compute_loss_slow", "grpo_trainer"}))
    assert (cls, why) == ("skew", "KeyError: 'grpo_compute_loss_slow' (a key unsloth reads from a zoo dict)")
    # a key unsloth does not read from a zoo dict stays the environment's; so does a KeyError on the key's text
    assert classify_chain([err("KeyError", "'other'")], {"grpo_compute_loss_slow"}) == ("environment",
                                                                                       "KeyError: 'other'")
    assert classify_chain([err("KeyError", "grpo_compute_loss_slow")], {"grpo_compute_loss_slow"})[0] == "environment"
    assert classify_chain([err("ValueError", "'grpo_compute_loss_slow'")], {"grpo_compute_loss_slow"})[0] == \
        "environment"


def test_the_key_reads_are_the_pair_readers_constant_subscripts_of_zoo_dicts() -> None:
    from probes.checks.pair_compat.phases import zoo_key_reads

    uns = {"unsloth/__init__.py": "from .models import rl\n",
           "unsloth/models/__init__.py": "",
           "unsloth/models/rl.py": (
               "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS\n"
               "import unsloth_zoo.rl_replacements as R\n"
               "slow = RL_REPLACEMENTS['grpo_compute_loss_slow']\n"  # a zoo dict, constant key: read
               "items = R.RL_PRE_ITEMS['grpo_trainer']\n"  # through a module alias
               "RL_REPLACEMENTS['mine'] = 1\nm = RL_REPLACEMENTS['mine']\n"  # a key unsloth stores: not zoo's to lack
               "own = {'x': 1}\nlocal = own['local_key']\n"  # unsloth's own dict
               "def f(k):\n    return RL_REPLACEMENTS[k]\n")}  # a computed key: not a constant read
    assert zoo_key_reads(uns) == {"grpo_compute_loss_slow", "grpo_trainer"}


def test_the_cells_own_runtime_step_counts_a_keyerror_on_a_key_unsloth_reads(monkeypatch, tmp_path) -> None:
    from probes.checks import PhaseContext
    from probes.checks.pair_compat import phases as pc

    uns = {"unsloth/__init__.py": "from .models import rl\n", "unsloth/models/__init__.py": "",
           "unsloth/models/rl.py": "from unsloth_zoo.rl_replacements import RL_REPLACEMENTS\n"
                                   "slow = RL_REPLACEMENTS['grpo_compute_loss_slow']\n"}
    monkeypatch.setattr(pc, "sources", lambda package: uns if package == "unsloth" else {})

    def step(message: str) -> dict:
        imported = {"imported": False, "chain": [err("KeyError", message)]}
        return pc.runtime(PhaseContext("cpu", False, "allow-cpu", tmp_path, shared={}, imported=imported))

    got = step("'grpo_compute_loss_slow'")
    assert (got["class"], got["reason"]) == ("skew", "KeyError: 'grpo_compute_loss_slow' (a key unsloth reads "
                                                     "from a zoo dict)")
    assert step("'something_else'")["class"] == "environment"
