"""pair-compat past import on small trees written here: calls into zoo bound against zoo's signatures, constant
keys read from zoo dicts, the model-loading route, and names Python does not bind (``__all__`` alone, ``del``,
``except ... as``, ``if TYPE_CHECKING:``)."""

from __future__ import annotations

from textwrap import dedent

from probes.checks.pair_compat.calls import bind
from probes.checks.pair_compat.judge import judge, resolve, summary
from probes.checks.pair_compat.references import reference_list
from probes.checks.pair_compat.symbols import symbol_table


def tree(**files: str) -> dict[str, str]:
    """Members from keyword names: ``unsloth__models__llama`` -> ``unsloth/models/llama.py``."""
    return {k.replace("__", "/").replace("/init", "/__init__") + ".py": dedent(v) for k, v in files.items()}


ZOO = tree(
    unsloth_zoo__init="",
    unsloth_zoo__hf_utils="""
        def get_type(config, trust_remote_code=False): pass
        def flexible(*args, **kwargs): pass
        def kwonly(a, *, must, may=1): pass
        def posonly(a, /, b): pass
        @some_registry.register
        def decorated(a): pass
        class Plain: pass
        class Made:
            def __init__(self, path, *, dtype=None): pass
            def run(self, steps): pass
            @staticmethod
            def build(x): pass
        class Child(Made): pass
        class FromTorch(nn.Module): pass
    """,
    unsloth_zoo__compiler="from .hf_utils import get_type\n",
    unsloth_zoo__rl="""
        TABLE = dict()
        TABLE["a"] = 1
        LITERAL = {"x": 1, "y": 2}
        GROWN = {}
        GROWN.update(other)
    """,
    unsloth_zoo__rl_more="from .rl import TABLE\nTABLE['b'] = 2\n",
    unsloth_zoo__peft="""
        __all__ = ["listed_only", "defined"]
        def defined(): pass
    """,
    unsloth_zoo__cleanup="""
        import os
        del os
        try:
            import json
        except ImportError as error:
            pass
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from torch import Tensor
        else:
            RUNTIME = 1
    """,
)
INIT = "from .models import *\n"


def pair(models: str = "X = 1", **more: str) -> dict:
    members = tree(unsloth__init=INIT, unsloth__models__init="from .loader import *",
                   unsloth__models__loader=models, **more)
    return judge(reference_list(members), symbol_table(ZOO))


def only(got: dict) -> dict:
    assert len(got["missing"]) == 1, got["missing"]
    return got["missing"][0]


def test_a_keyword_the_signature_lacks_is_the_type_error_python_raises() -> None:
    got = pair("from unsloth_zoo.hf_utils import get_type\nget_type(model_name='m')\n")
    assert (got["verdict"], got["breaks_at"]) == ("incompatible", "import")
    m = only(got)
    assert m["detail"] == "TypeError: get_type() got an unexpected keyword argument 'model_name'"
    assert m["signature"] == "get_type(config, trust_remote_code=False)"
    assert m["where"][0]["line"] == 2


def test_binding_follows_python_positional_keyword_and_missing_rules() -> None:
    sig = ("(config, trust_remote_code=False)", "get_type", 0)

    def call(n: int, *kw: str, star: bool = False, dstar: bool = False) -> str | None:
        return bind(sig, {"positional": n, "keywords": list(kw), "star": star, "dstar": dstar, "receiver": "path"})

    assert call(1) is None and call(0, "config") is None and call(2) is None
    assert call(3) == "TypeError: get_type() takes from 1 to 2 positional arguments but 3 were given"
    assert call(0) == "TypeError: get_type() missing 1 required positional argument: 'config'"
    assert call(1, "config") == "TypeError: get_type() got multiple values for argument 'config'"
    assert call(0, star=True) is None and call(0, dstar=True) is None  # what an unpacking passes is unknown
    assert call(0, "token", dstar=True) == "TypeError: get_type() got an unexpected keyword argument 'token'"
    method = ("(self, path, *, dtype=None)", "Made.__init__", 1)
    assert bind(method, {"positional": 2, "keywords": [], "star": False, "dstar": False, "receiver": "path"}) == \
        "TypeError: Made.__init__() takes 2 positional arguments but 3 were given"
    kwonly = ("(a, *, must, may=1)", "kwonly", 0)
    assert bind(kwonly, {"positional": 1, "keywords": [], "star": False, "dstar": False, "receiver": "path"}) == \
        "TypeError: kwonly() missing 1 required keyword-only argument: 'must'"


def test_constructors_methods_and_re_exports_are_checked() -> None:
    got = pair("""
        import unsloth_zoo.hf_utils as H
        from unsloth_zoo.compiler import get_type
        from unsloth_zoo.hf_utils import Made, Child, Plain
        def load():
            get_type(1, 2, 3)
            Made("p", dtype=1)
            Child("p", "q")
            Plain(1)
            m = Made("p")
            m.run(steps=1, extra=2)
            H.Made.build(1, 2)
        LOADERS = [load]
    """)
    details = {m["detail"] for m in got["missing"]}
    assert details == {
        "TypeError: get_type() takes from 1 to 2 positional arguments but 3 were given",
        "TypeError: Made.__init__() takes 2 positional arguments but 3 were given",
        "TypeError: Plain() takes no arguments",
        "TypeError: Made.run() got an unexpected keyword argument 'extra'",
        "TypeError: Made.build() takes 1 positional argument but 2 were given",
    }
    assert got["verdict"] == "degraded" and got["breaks_at"] is None  # in a function off the loading route


def test_undecidable_calls_are_never_a_break() -> None:
    got = pair("""
        from unsloth_zoo.hf_utils import flexible, decorated, FromTorch, get_type, posonly
        flexible(1, 2, anything=3)
        decorated(1, 2, 3)
        FromTorch(1, 2, 3)
        args = ()
        get_type(*args)
        def shadowed(get_type):
            get_type(nothing=1)
        def local():
            from unsloth_zoo.hf_utils import get_type
            get_type = wrap(get_type)
            get_type(nothing=1)
    """)
    assert got["verdict"] == "compatible", got["missing"]


def test_a_function_unsloth_replaces_is_its_own() -> None:
    got = pair("import unsloth_zoo.hf_utils\nunsloth_zoo.hf_utils.get_type = mine\n"
               "unsloth_zoo.hf_utils.get_type(model_name=1)\n")
    assert got["verdict"] == "compatible"


def test_a_missing_key_of_a_literal_dict_is_a_key_error_and_stores_anywhere_add_keys() -> None:
    got = pair("from unsloth_zoo.rl import TABLE, LITERAL, GROWN\n"
               "TABLE['a'], TABLE['b'], LITERAL['x'], GROWN['anything']\nTABLE['c']\n")
    m = only(got)
    assert (m["name"], m["exception"], m["key"], m["breaks"]) == (
        "unsloth_zoo.rl.TABLE['c']", "KeyError", "c", "import")
    assert m["detail"] == "KeyError: 'c'" and got["breaks_at"] == "import"
    assert summary(got) == "incompatible: `TABLE['c']` (model loading): KeyError: 'c'"  # loader.py's feature


def test_keys_unsloth_stores_or_reads_with_get_are_not_breaks_and_a_tested_key_is_guarded() -> None:
    got = pair("from unsloth_zoo.rl import TABLE\nTABLE['mine'] = 1\nTABLE['mine']\nTABLE.get('gone')\n"
               "if 'maybe' in TABLE:\n    TABLE['maybe']\n")
    assert (got["verdict"], only(got)["key"], only(got)["breaks"]) == ("degraded", "maybe", "guarded")


LOADER = """
    from unsloth_zoo.hf_utils import get_type
    from .helpers import prepare
    class FastModel:
        @staticmethod
        def from_pretrained(name):
            model = prepare(name)
            return FastModel.finish(model)
        @staticmethod
        def finish(model):
            try:
                get_type(model, strict=True)
            except Exception:
                pass
            return model
    def save(model):
        get_type(model, verbose=True)
    SAVERS = {"default": save}
"""


def test_a_break_on_the_model_loading_route_is_incompatible_at_model_load() -> None:
    got = pair(LOADER, unsloth__models__helpers="from unsloth_zoo.hf_utils import get_type\n"
                                                "def prepare(name):\n    return get_type(name, revision='r')\n")
    assert (got["verdict"], got["breaks_at"]) == ("incompatible", "model-load")
    by = {m["detail"].rsplit("'", 2)[-2]: m for m in got["missing"]}
    assert by["revision"]["breaks"] == "model-load"  # from_pretrained -> prepare, in another module
    assert by["revision"]["where"][0]["function"] == "prepare"
    assert summary(got).startswith("incompatible (breaks at model load): `get_type()` (model family helpers): "
                                   "TypeError: get_type() got an unexpected keyword argument 'revision'")


def test_off_the_route_or_caught_a_call_break_only_degrades() -> None:
    got = pair(LOADER, unsloth__models__helpers="def prepare(name):\n    return name\n")
    assert (got["verdict"], got["breaks_at"]) == ("degraded", None)
    assert {(m["where"][0]["function"], m["breaks"]) for m in got["missing"]} == {
        ("save", "call"), ("FastModel.finish", "guarded")}  # `strict=True` is caught by `except Exception`
    # save() breaks a feature because something names it: a function nothing names is dead code
    dead = pair(LOADER.replace("def save(model)", "def _never_named(model)").replace('{"default": save}', "{}"),
                unsloth__models__helpers="def prepare(name):\n    return name\n")
    assert [m["where"][0]["function"] for m in dead["missing"]] == ["FastModel.finish"]


def test_only_bound_names_resolve() -> None:
    table = symbol_table(ZOO)
    assert resolve(table, "unsloth_zoo.peft.listed_only", 2, "from")[0] == "missing"  # only in __all__
    assert resolve(table, "unsloth_zoo.peft.defined", 2, "from")[0] == "ok"
    for name in ("os", "error", "Tensor"):  # del, except ... as, if TYPE_CHECKING
        assert resolve(table, f"unsloth_zoo.cleanup.{name}", 2, "from")[0] == "missing", name
    for name in ("json", "RUNTIME", "TYPE_CHECKING"):
        assert resolve(table, f"unsloth_zoo.cleanup.{name}", 2, "from")[0] == "ok", name
    star = symbol_table({**ZOO, "unsloth_zoo/__init__.py": "from .peft import *\n"})
    assert resolve(star, "unsloth_zoo.listed_only", 1, "from")[0] == "missing"
    assert resolve(star, "unsloth_zoo.defined", 1, "from")[0] == "ok"
