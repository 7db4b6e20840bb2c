"""pair-compat past import, on real wheels from the index (issue 32): calls into zoo against zoo's signatures,
constant-key reads of zoo dicts, and names that only ``__all__`` lists. Each wheel is downloaded once into the
backport wheel cache (``download_wheel``: checked against the index's sha256) and read through the check's
own pair reader (``pairs.TARGET``); no env is built. Every fact below was read by hand from the wheels:

* unsloth 2025.8.5 ``FastModel.from_pretrained`` (``unsloth/models/loader.py:747``) calls
  ``get_transformers_model_type(model_name=, token=, revision=, trust_remote_code=)`` (imported from
  ``unsloth_zoo.compiler`` through ``unsloth/models/_utils.py``); zoo 2025.9.3 defines
  ``get_transformers_model_type(model_name, token=None, revision=None, trust_remote_code=False)``, zoo 2025.9.4
  ``(config)``, zoo 2026.3.6 and 2026.10.9 ``(config, trust_remote_code=False)`` (in ``hf_utils``, re-exported
  by ``compiler``): the pair imports, then cannot load a model.
* unsloth 2025.12.7 calls ``get_transformers_model_type(config, trust_remote_code=...)`` in
  ``FastLanguageModel.from_pretrained`` (``loader.py:332``) and ``FastModel.from_pretrained`` (``:872``);
  zoo 2025.12.5 defines ``(config)`` (unsloth #3750), zoo 2025.12.6 adds ``trust_remote_code=False``.
* unsloth 2025.3.11 reads ``RL_REPLACEMENTS["grpo_compute_loss_slow"]`` at module level of
  ``unsloth/models/rl_replacements.py:236``, which ``import unsloth`` runs; zoo 2025.3.9 builds
  ``RL_REPLACEMENTS = dict()`` and stores five other keys; zoo 2025.3.11 stores that key too.
* zoo 2024.12.3's ``peft_utils.__all__`` lists ``merge_and_overwrite_lora``, which it no longer binds (it is
  ``saving_utils``'); unsloth 2024.12.4 imports it from ``peft_utils`` at module level of
  ``unsloth/models/vision.py:32`` and ``unsloth/save.py:2098``.
* zoo 2025.12.5's ``__init__`` ends with ``del os, warnings, re``; zoo 2026.10.9's vendored
  ``fla/ops/cp/comm.py`` imports ``ProcessGroup`` only under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import zipfile
from functools import cache
from typing import Any

import pytest

from matrix.sources.backport import download_wheel, wheel_cache
from probes.checks.pair_compat.judge import resolve, summary
from probes.checks.pair_compat.pairs import TARGET

pytestmark = pytest.mark.integration


@cache
def _members(package: str, version: str) -> dict[str, str]:
    with zipfile.ZipFile(download_wheel(package, version, wheel_cache())) as zf:
        return {n: zf.read(n).decode("utf-8", errors="replace") for n in zf.namelist()
                if n.startswith(package + "/") and n.endswith(".py")}


@cache
def _refs(version: str) -> Any:
    return TARGET.references(_members("unsloth", version))


@cache
def _table(version: str) -> Any:
    return TARGET.prepare(TARGET.definitions(_members("unsloth_zoo", version)))


def judged(unsloth: str, zoo: str) -> dict[str, Any]:
    return TARGET.judge(_refs(unsloth), _table(zoo))


def entry(result: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((m for m in result["missing"] if m["name"] == name), None)


GTMT = "unsloth_zoo.compiler.get_transformers_model_type"


@pytest.mark.parametrize("zoo", ["2025.9.4", "2026.3.6", "2026.10.9"])
def test_a_keyword_the_zoo_signature_dropped_breaks_model_loading(zoo: str) -> None:
    got = judged("2025.8.5", zoo)
    assert (got["verdict"], got["breaks_at"]) == ("incompatible", "model-load")
    m = entry(got, GTMT)
    assert m is not None and m["breaks"] == "model-load" and m["exception"] == "TypeError"
    assert m["detail"] == "TypeError: get_transformers_model_type() got an unexpected keyword argument 'model_name'"
    assert m["signature"].startswith("get_transformers_model_type(config")
    assert {(w["file"], w["line"], w["function"]) for w in m["where"]} == {
        ("unsloth/models/loader.py", 747, "FastModel.from_pretrained")}
    assert summary(got).startswith("incompatible (breaks at model load): `get_transformers_model_type()`")


def test_the_zoo_before_the_signature_change_takes_the_call() -> None:
    got = judged("2025.8.5", "2025.9.3")
    assert got["breaks_at"] is None and entry(got, GTMT) is None


def test_a_keyword_the_zoo_does_not_have_yet_breaks_model_loading_in_both_loaders() -> None:
    got = judged("2025.12.7", "2025.12.5")
    assert (got["verdict"], got["breaks_at"]) == ("incompatible", "model-load")
    m = entry(got, GTMT)
    assert m is not None and m["breaks"] == "model-load"
    assert m["detail"] == ("TypeError: get_transformers_model_type() got an unexpected keyword argument "
                           "'trust_remote_code'")
    assert {(w["line"], w["function"]) for w in m["where"]} == {
        (332, "FastLanguageModel.from_pretrained"), (872, "FastModel.from_pretrained")}
    fixed = judged("2025.12.7", "2025.12.6")
    assert fixed["breaks_at"] is None and entry(fixed, GTMT) is None


KEY = "unsloth_zoo.rl_replacements.RL_REPLACEMENTS['grpo_compute_loss_slow']"


def test_a_dict_key_the_zoo_lacks_breaks_the_import() -> None:
    got = judged("2025.3.11", "2025.3.9")
    assert (got["verdict"], got["breaks_at"]) == ("incompatible", "import")
    m = entry(got, KEY)
    assert m is not None and (m["breaks"], m["exception"], m["key"]) == ("import", "KeyError", "grpo_compute_loss_slow")
    assert m["detail"] == "KeyError: 'grpo_compute_loss_slow'"
    assert (m["where"][0]["file"], m["where"][0]["line"], m["where"][0]["function"]) == (
        "unsloth/models/rl_replacements.py", 236, None)
    with_key = judged("2025.3.11", "2025.3.11")
    assert entry(with_key, KEY) is None and with_key["breaks_at"] is None


def test_a_name_only_all_lists_is_missing_for_from_import() -> None:
    got = judged("2024.12.4", "2024.12.3")
    assert (got["verdict"], got["breaks_at"]) == ("incompatible", "import")
    m = entry(got, "unsloth_zoo.peft_utils.merge_and_overwrite_lora")
    assert m is not None and (m["breaks"], m["exception"]) == ("import", "ImportError")
    assert m["closest"] == "moved to unsloth_zoo.saving_utils"


def test_a_module_level_del_and_a_type_checking_import_bind_nothing() -> None:
    table = _table("2025.12.5").table
    assert resolve(table, "unsloth_zoo.os", 1, "from")[0] == "missing"  # `del os, warnings, re`
    assert resolve(table, "unsloth_zoo.device_type", 1, "from")[0] == "ok"
    vendored = _table("2026.10.9").table
    comm = "unsloth_zoo._vendored.fla.ops.cp.comm"
    assert resolve(vendored, f"{comm}.ProcessGroup", comm.count(".") + 1, "from")[0] == "missing"
    assert resolve(vendored, f"{comm}.dist", comm.count(".") + 1, "from")[0] == "ok"
