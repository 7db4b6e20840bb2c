"""pair-compat's trainers step: generating unsloth's trainer classes from zoo source after the import, judged
per trainer, and what the verdict and the drill-down make of it.

The forked generation runs against small packages written here (a ``trl`` with two trainer modules, an
``unsloth.models.rl`` whose generator patches one and imports a zoo name the zoo written here lacks for the
other), the way unsloth's generator replaces ``trl.trainer.<module>.<Class>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from probes.checks.pair_compat import trainers as tr
from probes.checks.pair_compat.render import details
from probes.checks.pair_compat.verdict import classify


def link(type_: str, message: str, where: tuple[str, ...] = (), name: str | None = None, how: str = "raised") -> dict:
    return {"type": type_, "message": message, "link": how, "name": name, "where": list(where)}


def test_a_zoo_name_in_the_chain_is_skew_with_the_innermost_message() -> None:
    chain = [link("RuntimeError", "Unsloth: could not build the trainer from unsloth_zoo"),
             link("ImportError", "Unsloth: Please update unsloth_zoo", how="__cause__"),
             link("ImportError", "cannot import name 'sanitize_logprob' from 'unsloth_zoo.rl_replacements'",
                  how="__context__")]
    assert tr.judge_failure(chain) == (
        "skew", "ImportError: cannot import name 'sanitize_logprob' from 'unsloth_zoo.rl_replacements'")
    # an AttributeError that names zoo by its ImportError-style ``name`` only is skew too
    assert tr.judge_failure([link("ImportError", "cannot import name 'x'", name="unsloth_zoo.compiler")])[0] == "skew"
    # a NameError names only the missing name: skew when raised in zoo's code, else an error
    in_zoo = link("NameError", "name 'x' is not defined", where=("/env/site-packages/unsloth_zoo/compiler.py:9",))
    assert tr.judge_failure([in_zoo])[0] == "skew"
    assert tr.judge_failure([link("NameError", "name 'x' is not defined", where=("/trl/x.py:1",))])[0] == "error"


def test_other_failures_are_errors_and_a_missing_accelerator_is_na() -> None:
    assert tr.judge_failure([link("ValueError", "bad trl source")]) == ("error", "ValueError: bad trl source")
    # a zoo name in an error that is not an import, attribute or name error is not skew
    assert tr.judge_failure([link("RuntimeError", "unsloth_zoo failed")])[0] == "error"
    state, why = tr.judge_failure([link("RuntimeError", "Found no NVIDIA driver on your system")])
    assert state == "n/a" and why.startswith("needs an accelerator")


def test_what_unsloth_logged_when_it_swallowed_the_failure() -> None:
    swallowed = ("Unsloth: Could not build the patched trl.trainer.grpo_trainer, so training will use trl's own "
                 "trainer instead: ImportError: cannot import name 'x' from 'unsloth_zoo.rl_replacements'")
    state, why = tr.judge_logged(["Unsloth: patching", swallowed])
    assert state == "skew" and why.startswith("ImportError: cannot import name 'x'")
    state, why = tr.judge_logged(["Unsloth: Could not import trl.trainer.grpo_trainer: No module named 'vllm'"])
    assert state == "n/a" and "this TRL lacks it" in why
    assert tr.judge_logged(["Unsloth: Could not build ...: KeyError: 'unsloth_zoo'"])[0] == "error"
    assert tr.judge_logged([]) == ("error", "unsloth's generator returned without generating the class "
                                            "(nothing logged)")


def test_every_trainer_is_na_when_the_import_failed_and_nothing_is_generated() -> None:
    def never(module: str, cls: str) -> dict:
        raise AssertionError("no generation after a failed import")

    got = tr.trainers({"imported": False, "chain": []}, run=never)
    assert [(r["trainer"], r["state"], r["reason"]) for r in got["trainers"]] == [
        ("SFT", "n/a", "import unsloth failed"), ("GRPO", "n/a", "import unsloth failed")]


FAKE = {
    "trl/__init__.py": "",
    "trl/trainer/__init__.py": "",
    "trl/trainer/sft_trainer.py": "class SFTTrainer:\n    pass\n",
    "trl/trainer/grpo_trainer.py": "class GRPOTrainer:\n    pass\n",
    "unsloth_zoo/__init__.py": "",
    "unsloth_zoo/rl_replacements.py": "RL_REPLACEMENTS = {}\n",
    "unsloth/__init__.py": "",
    "unsloth/models/__init__.py": "",
}
# The generator as unsloth writes it: compile the class, then put it where TRL's was.
GENERATOR = '''
import importlib
import logging
logger = logging.getLogger("fake_unsloth")

def {name}(trainer_file):
    module = importlib.import_module("trl.trainer." + trainer_file)
    cls = [x for x in dir(module) if x.endswith("Trainer")][0]
    if trainer_file == "grpo_trainer":
        {grpo}
    setattr(module, cls, type("Unsloth" + cls, (getattr(module, cls),), {{}}))
'''
RAISES = "from unsloth_zoo.rl_replacements import sanitize_logprob  # this zoo lacks it"
SWALLOWS = ("try:\n            from unsloth_zoo.rl_replacements import sanitize_logprob\n"
            "        except Exception as e:\n"
            "            logger.warning('Unsloth: Could not build the patched trl.trainer.grpo_trainer: '\n"
            "                           f'{type(e).__name__}: {e}')\n            return")


def fake_tree(root: Path, name: str, grpo: str) -> None:
    for member, text in {**FAKE, "unsloth/models/rl.py": GENERATOR.format(name=name, grpo=grpo)}.items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_text(text, encoding="utf-8")


@pytest.mark.parametrize(("name", "grpo"), [("_patch_trl_rl_trainers_impl", RAISES),
                                            ("_patch_trl_rl_trainers", SWALLOWS)])
def test_a_forked_generation_per_trainer_on_packages_written_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  name: str, grpo: str) -> None:
    fake_tree(tmp_path, name, grpo)
    monkeypatch.syspath_prepend(str(tmp_path))
    got = {r["trainer"]: r for r in tr.trainers({"imported": True, "chain": []})["trainers"]}
    assert got["SFT"]["state"] == "generated" and got["SFT"]["class"] == "UnslothSFTTrainer"
    assert got["SFT"]["reason"] == f"unsloth.models.rl.{name}('sft_trainer')"
    grpo_row = got["GRPO"]
    assert grpo_row["state"] == "skew" and grpo_row["feature"] == "RL trainers"
    assert "cannot import name 'sanitize_logprob' from 'unsloth_zoo.rl_replacements'" in grpo_row["reason"]
    # the generation ran in a child: nothing it imported or patched is in this process
    assert not {"trl", "unsloth", "unsloth.models.rl", "unsloth_zoo"} & set(sys.modules)


def test_a_trl_without_the_trainer_module_is_na(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tree(tmp_path, "_patch_trl_rl_trainers_impl", "pass")
    (tmp_path / "trl/trainer/grpo_trainer.py").unlink()
    monkeypatch.syspath_prepend(str(tmp_path))
    got = {r["trainer"]: r for r in tr.trainers({"imported": True, "chain": []})["trainers"]}
    assert got["GRPO"]["state"] == "n/a" and "has no trl.trainer.grpo_trainer" in got["GRPO"]["reason"]
    assert got["SFT"]["state"] == "generated"


def section(trainer_rows: list[dict], static: str = "fixed", imported: str = "ok") -> dict:
    return {"static": {"verdict": static, "reason": "compatible", "pair": "compatible"},
            "steps": [{"name": "runtime", "status": "ok", "result": {"class": imported, "reason": "r"}},
                      {"name": "trainers", "status": "ok", "result": {"trainers": trainer_rows}}]}


def row(trainer: str, state: str, feature: str, reason: str = "why") -> dict:
    return {"trainer": trainer, "class": f"Unsloth{trainer}Trainer", "state": state, "feature": feature,
            "reason": reason, "module": "m", "seconds": 1.0}


def test_a_trainer_that_fails_on_zoo_degrades_the_pair_and_names_the_feature() -> None:
    v = classify(section([row("SFT", "generated", "SFT trainer"),
                          row("GRPO", "skew", "RL trainers", "ImportError: cannot import name 'x'")]), {})
    assert (v.zoo.value, v.guard.value) == ("fixed", "not-needed")  # the import worked: never incompatible
    assert v.runtime == "degraded: RL trainers"
    assert "RL trainers (UnslothGRPOTrainer: ImportError: cannot import name 'x')" in v.guard_reason
    assert "SFT trainer" not in v.guard_reason and "degraded" in v.zoo_reason
    # an error or n/a of the generation is no evidence about zoo
    quiet = classify(section([row("SFT", "error", "SFT trainer"), row("GRPO", "n/a", "RL trainers")]), {})
    assert quiet.runtime == "fixed" and "degraded" not in quiet.guard_reason
    # a static incompatible with an import that worked stays an inconsistency, whatever the trainers say
    odd = classify(section([row("GRPO", "skew", "RL trainers")], static="vulnerable"), {})
    assert (odd.zoo.value, odd.guard.value) == ("inconsistent", "error")


def test_the_drill_down_shows_each_trainer_and_flags_the_failed_ones() -> None:
    got = details(section([row("SFT", "generated", "SFT trainer"), row("GRPO", "skew", "RL trainers", "boom")]))
    assert ("trainer classes", "SFT generated, GRPO skew") in got.items
    table = next(t for t in got.tables if t.title.startswith("trainer classes"))
    assert [r[:3] for r in table.rows] == [("SFT", "UnslothSFTTrainer", "generated"),
                                           ("GRPO", "UnslothGRPOTrainer", "skew")]
    assert table.bad == frozenset({(1, 2)})
