"""The pair-compat static reader on small trees written here: what zoo defines, what unsloth references,
and the pair's verdict with its evidence."""

from __future__ import annotations

from textwrap import dedent

from probes.checks.pair_compat.features import feature_of
from probes.checks.pair_compat.judge import judge, resolve
from probes.checks.pair_compat.references import reference_list
from probes.checks.pair_compat.symbols import symbol_table


def tree(**files: str) -> dict[str, str]:
    """Members from keyword names: ``unsloth__models__llama`` -> ``unsloth/models/llama.py``."""
    return {k.replace("__", "/").replace("/init", "/__init__") + ".py": dedent(v) for k, v in files.items()}


ZOO = tree(
    unsloth_zoo__init="""
        __version__ = "1"
        from .utils import *
        if True:
            IN_IF = 1
        try:
            IN_TRY = 1
        except ImportError:
            IN_EXCEPT = 2
        def setup():
            global VIA_GLOBAL
            VIA_GLOBAL = 1
    """,
    unsloth_zoo__utils="""
        __all__ = ["exported", "_private_but_listed"]
        def exported(): pass
        def _private_but_listed(): pass
        def not_listed(): pass
    """,
    unsloth_zoo__loss_utils="""
        from .deep import *
        import os as _os
        def fused_linear_cross_entropy(): pass
        class Loss: pass
        a, (b, c) = 1, (2, 3)
    """,
    unsloth_zoo__deep="""
        def deep_public(): pass
        def _deep_private(): pass
    """,
    unsloth_zoo__other="""
        def _unsloth_get_batch_samples(): pass
    """,
    unsloth_zoo__lazy="""
        def __getattr__(name): return name
    """,
    unsloth_zoo__outside="""
        from transformers import *
    """,
    unsloth_zoo__dyn="""
        __all__ = [n for n in dir()]
    """,
    unsloth_zoo__usesdyn="""
        from .dyn import *
    """,
    unsloth_zoo__pkg__init="",
    unsloth_zoo__pkg__sub="X = 1",
)


def table() -> dict:
    return symbol_table(ZOO)


def state(path: str, modules: int = 1, kind: str = "attr") -> str:
    return resolve(table(), path, modules, kind)[0]


def test_module_level_bindings_in_blocks_and_through_global_are_defined() -> None:
    for name in ("__version__", "IN_IF", "IN_TRY", "IN_EXCEPT", "VIA_GLOBAL", "setup"):
        assert state(f"unsloth_zoo.{name}") == "ok", name
    for name in ("fused_linear_cross_entropy", "Loss", "a", "b", "c", "_os"):
        assert state(f"unsloth_zoo.loss_utils.{name}", 2, "from") == "ok", name


def test_star_imports_follow_all_or_public_names_transitively() -> None:
    assert state("unsloth_zoo.exported") == "ok"
    assert state("unsloth_zoo._private_but_listed") == "ok"  # __all__ lists it
    assert state("unsloth_zoo.not_listed") == "missing"  # __all__ leaves it out of the star import
    assert state("unsloth_zoo.loss_utils.deep_public", 2, "from") == "ok"
    assert state("unsloth_zoo.loss_utils._deep_private", 2, "from") == "missing"


def test_names_that_cannot_be_decided_are_unknown_never_missing() -> None:
    assert resolve(table(), "unsloth_zoo.lazy.anything", 2, "from")[0] == "unknown"
    assert "__getattr__" in resolve(table(), "unsloth_zoo.lazy.anything", 2, "from")[2]
    assert state("unsloth_zoo.outside.anything", 2, "from") == "unknown"
    assert state("unsloth_zoo.usesdyn.anything", 2, "from") == "unknown"


def test_submodules_and_module_attributes_resolve_and_missing_modules_do_not() -> None:
    assert state("unsloth_zoo.pkg.sub", 2, "from") == "ok"
    assert state("unsloth_zoo.pkg.sub", 3, "import") == "ok"
    assert state("unsloth_zoo.pkg.sub.X", 3, "from") == "ok"
    assert resolve(table(), "unsloth_zoo.nothere.X", 2, "from")[:2] == ("missing", "unsloth_zoo.nothere")
    assert state("unsloth_zoo.pkg.__dict__") == "ok"


UNSLOTH_INIT = """
    from .models import *
    try:
        from .optional import *
    except ImportError:
        pass
    try:
        import unsloth_zoo
    except:
        raise ImportError("Please install unsloth_zoo")
"""


def pair(models: str, optional: str = "", **more: str) -> dict:
    members = tree(unsloth__init=UNSLOTH_INIT, unsloth__models__init="from .llama import *",
                   unsloth__models__llama=models, unsloth__optional=optional or "X = 1",
                   unsloth__save="from unsloth_zoo.other import _unsloth_get_batch_samples", **more)
    return judge(reference_list(members), table())


def test_an_unguarded_import_time_reference_that_breaks_is_incompatible_with_its_evidence() -> None:
    got = pair("import os\nfrom unsloth_zoo.loss_utils import (\n    Loss,\n    _unsloth_get_batch_samples,\n)\n")
    assert got["verdict"] == "incompatible"
    m = got["missing"][0]
    assert (m["name"], m["breaks"], m["exception"]) == (
        "unsloth_zoo.loss_utils._unsloth_get_batch_samples", "import", "ImportError")
    assert m["where"] == [{"file": "unsloth/models/llama.py", "line": 4, "function": None, "kind": "from"}]
    assert m["closest"] == "moved to unsloth_zoo.other"


def test_a_break_inside_a_function_is_degraded_and_names_its_feature() -> None:
    got = pair("def load():\n    from unsloth_zoo.loss_utils import gone\n")
    assert got["verdict"] == "degraded"
    assert got["missing"][0]["breaks"] == "call"
    assert got["missing"][0]["features"] == ["Llama-family models"]
    assert got["missing"][0]["where"][0]["function"] == "load"


def test_a_try_that_swallows_the_error_guards_and_one_that_reraises_does_not() -> None:
    swallowed = pair("try:\n    from unsloth_zoo.loss_utils import gone\nexcept ImportError:\n    gone = None\n")
    assert (swallowed["verdict"], swallowed["missing"][0]["breaks"]) == ("degraded", "guarded")
    reraised = pair("try:\n    from unsloth_zoo.loss_utils import gone\nexcept ImportError:\n    raise\n")
    assert reraised["verdict"] == "incompatible"
    wrong_type = pair("try:\n    from unsloth_zoo.loss_utils import gone\nexcept KeyError:\n    pass\n")
    assert wrong_type["verdict"] == "incompatible"


def test_a_module_imported_only_under_a_swallowing_try_or_never_is_not_import_time() -> None:
    got = pair("X = 1", optional="from unsloth_zoo.loss_utils import gone")
    assert got["verdict"] == "degraded"
    # unsloth/save.py is never imported by `import unsloth` in this tree: its break is a feature's
    got = pair("X = 1")
    assert got["verdict"] == "compatible"
    got = pair("X = 1", unsloth__save2="from unsloth_zoo.loss_utils import gone_too")
    assert got["verdict"] == "degraded" and got["missing"][0]["features"] == ["unsloth.save2"]


def test_attribute_uses_on_imported_zoo_modules_are_references_and_writes_are_not() -> None:
    got = pair("import unsloth_zoo.loss_utils as L\nimport unsloth_zoo\n"
               "L.Loss\nunsloth_zoo.loss_utils.fused_linear_cross_entropy\nL.patched_here = 1\n"
               "def f():\n    return L.missing_attr.deeper\n")
    assert got["verdict"] == "degraded"
    assert [m["name"] for m in got["missing"]] == ["unsloth_zoo.loss_utils.missing_attr"]
    assert got["missing"][0]["exception"] == "AttributeError"
    top = pair("import unsloth_zoo\nunsloth_zoo.loss_utils.not_there\n")
    assert top["verdict"] == "incompatible"


def test_a_module_level_branch_break_is_degraded_and_says_which_branch() -> None:
    got = pair("import sys\nif sys.platform == 'darwin':\n    from unsloth_zoo.mlx import trainer\n")
    assert got["verdict"] == "degraded"
    assert got["missing"][0]["breaks"] == "import-branch"
    assert "sys.platform == 'darwin'" in got["missing"][0]["features"][0]
    default = pair("import sys\nif sys.platform == 'darwin':\n    X = 1\n"
                   "else:\n    from unsloth_zoo.mlx import trainer\n")
    assert default["verdict"] == "incompatible"  # the else arm is the default (GPU) path


def test_unknown_at_import_time_makes_the_pair_unknown_not_incompatible() -> None:
    assert pair("from unsloth_zoo.lazy import whatever")["verdict"] == "unknown"
    assert pair("def f():\n    from unsloth_zoo.lazy import whatever\n")["verdict"] == "compatible"


def test_features_come_from_the_table() -> None:
    assert feature_of("unsloth/save.py", "save_to_gguf") == "save/GGUF"
    assert feature_of("unsloth/models/rl_replacements.py") == "RL trainers"
    assert feature_of("unsloth/models/qwen3.py") == "model family qwen3"


def test_an_old_source_with_an_invalid_escape_is_read_even_when_warnings_are_errors() -> None:
    # pytest runs with filterwarnings = error; "\d" in a plain string is a SyntaxWarning on Python 3.12+ and a
    # DeprecationWarning before: neither may turn a parsable release into "cannot parse"
    import warnings

    old = tree(unsloth_zoo__init='PATTERN = "\\d+"\ndef defined(): pass\n',
               unsloth__init='from unsloth_zoo import defined\nRE = "\\s"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = symbol_table(old, "unsloth_zoo")
        refs = reference_list(old, "unsloth")
    assert table["modules"]["unsloth_zoo"] == {"names": ["PATTERN", "defined"], "unknown": [], "package": True,
                                               "callables": {"defined": "()"}, "origins": {}, "dicts": {}}
    assert refs["unparsed"] == [] and [r["path"] for r in refs["refs"]] == ["unsloth_zoo.defined"], refs


def test_a_resolver_finds_the_nearest_spelling_once_per_name_for_every_release_it_judges(monkeypatch) -> None:
    """The history judges many unsloth releases against one zoo table: the fuzzy search for where a missing
    name went runs once per name, and every judged pair still carries its answer."""
    from probes.checks.pair_compat import judge as judge_mod
    from tests.history_inputs import refs, table

    calls: list[str] = []
    real = judge_mod.closest

    def counted(tab: dict, missing: str, is_module: bool = False) -> str:
        calls.append(missing)
        return real(tab, missing, is_module)

    monkeypatch.setattr(judge_mod, "closest", counted)
    res = judge_mod.Resolver(table("fused_loss"))
    got = [judge(refs("unsloth_zoo.loss.fused_los"), res) for _ in range(3)]
    assert calls == ["unsloth_zoo.loss.fused_los"]
    assert [g["missing"][0]["closest"] for g in got] == ["closest in unsloth_zoo.loss: fused_loss"] * 3
