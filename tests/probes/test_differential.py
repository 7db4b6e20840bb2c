"""The differential suite's pure parts, without torch or zoo: the generator and its shrink lattice, the
property predicates on hand-written answers, shrinking with a fake kernel, the side-effect rules, the step
wiring and result schema, and the guard diffs in tests/mutants/ (each applies to the shipped guard).

Running the suite on real kernels needs a cell env: ``tests/integration/test_differential_guards.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from probes.checks.fused_ce_masked_nan import differential as D
from probes.checks.fused_ce_masked_nan.differential import properties
from probes.checks.fused_ce_masked_nan.differential import spec as S
from probes.checks.fused_ce_masked_nan.differential.oracle import in_region


def gen(n: int = 48, seed: int = D.DEFAULT_SEED, cg: bool = False) -> list[dict[str, Any]]:
    return S.generate(seed, n, has_compute_gradients=cg)


# ---------------------------------------------------------------- the generator and the lattice


def test_generation_is_seeded_and_deterministic() -> None:
    assert gen() == gen()
    assert gen(seed=1) != gen()
    assert len(gen(7)) == 8 and len(gen(48)) == 52  # one sentinel example after every twelfth from the second


def drawn(examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The examples of the main generator (the sentinel examples left out)."""
    return [e for e in examples if e["labels"] not in S.SENTINELS]


def test_every_value_of_every_field_is_generated_somewhere() -> None:
    examples = gen(300, cg=True)
    for field, choices in S.CHOICES.items():
        seen = {json.dumps(e[field]) for e in examples}
        assert {json.dumps(c) for c in choices} <= seen, (field, seen)
    assert {e["shape"] for e in examples} == set(range(len(S.SHAPES)))


def test_roles_guarantee_empty_non_finite_and_rejected_inputs() -> None:
    for i, e in enumerate(drawn(gen(60))):
        if i % 6 in (0, 3):
            assert e["labels"] in ("all_masked", "first_only")
            assert e["n_items"] in ("none", *S.ZERO_FORMS)
        elif i % 6 == 4:
            assert e["nonfinite"] != "none"
        elif i % 6 == 5:
            assert any(e[f] == v for f, v in S.RARE), e


def test_normalize_spells_each_input_once() -> None:
    norm = {"has_compute_gradients": False, "cuda": False}
    for e in gen(100):
        assert S.normalize(e, **norm) == e
    assert S.normalize({"n_items": "none", "count": "zero"}, **norm)["count"] == "true"
    assert S.normalize({"n_items": "int", "count": "nan"}, **norm)["count"] == "three"
    assert S.normalize({"compute_gradients": False}, **norm)["compute_gradients"] is None
    assert S.normalize({"labels": "mixed_rows", "shape": 0}, **norm)["labels"] == "all_masked"
    assert S.normalize({"chunks": "default"}, **norm)["chunks"] == "one"
    assert S.normalize({"chunks": "default"}, has_compute_gradients=False, cuda=True)["chunks"] == "default"


def test_the_lattice_is_small_deduplicated_and_never_the_example() -> None:
    for e in gen(48):
        lat = S.lattice(e, has_compute_gradients=False)
        keys = [S.key(v) for v in lat]
        assert S.key(e) not in keys and len(set(keys)) == len(keys)
        big = [v for v in lat if (v["shape"], v["seed"]) != (0, 0)]
        assert len(big) <= 1 and all(S.non_default(v) == [] for v in big)
        groups = S.non_default(e)
        for g in groups:  # keep one: only that group differs from the defaults
            assert any(S.non_default(v) == [g] and v["shape"] == 0 for v in lat) or S.normalize(
                {**S.DEFAULTS, "labels": e["labels"], **{f: e[f] for f in g}},
                has_compute_gradients=False, cuda=False) == e


def test_size_orders_simpler_inputs_first() -> None:
    base = dict(S.DEFAULTS)
    assert S.size(base) < S.size({**base, "seed": 5}) < S.size({**base, "shape": 1})
    assert S.size({**base, "shape": 3}) < S.size({**base, "ignore_index": 0})
    assert S.size({**base, "labels": "all_masked"}) < S.size({**base, "labels": "mixed_rows"})


def test_describe_is_one_line_with_the_shape_the_count_and_every_non_default_keyword() -> None:
    line = S.describe({**S.DEFAULTS, "ignore_index": 0, "mask": "values", "n_items": "tmulti"},
                      "tensor([3., 7.])")
    assert "\n" not in line
    assert line.startswith("bsz=1 qlen=2 hidden=4 vocab=8 dtype=float32 route=function labels=dense")
    assert "n_items=tensor([3., 7.])" in line and "ignore_index=0" in line and "mask=values" in line
    assert "scaling" not in line and line.endswith("seed=0")


def test_compact_specs_round_trip_and_keys_differ() -> None:
    examples = gen(48)
    assert [S.expand(S.compact(e)) for e in examples] == examples
    assert len({S.key(e) for e in examples}) == len(examples)
    assert S.compact(S.DEFAULTS) == {}


def test_the_example_count_and_seed_come_from_the_handoff_never_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from probes import handoff

    monkeypatch.setenv("SKEWMATRIX_DIFF_EXAMPLES", "500")  # read by the harness only
    monkeypatch.setattr(handoff, "_GIVEN", [handoff.Handoff()])
    assert (D.example_count(), D.seed()) == (D.DEFAULT_EXAMPLES, D.DEFAULT_SEED)
    handoff.use(handoff.parse(["--examples", "500", "--seed", "7"]))
    assert (D.example_count(), D.seed()) == (500, 7)
    handoff.use(handoff.parse(["--examples", "0"]))
    assert D.example_count() == 1


# ---------------------------------------------------------------- the properties on hand-written answers

META = "Tensor|float32|()|cpu|1"
OK = {"m": META, "l": (2.5).hex(), "f": 1, "z": 0, "g": {"hidden": "aaaa|1|0", "weight": "bbbb|1|0"}}
EMPTY_NAN = {"ez": 1, "m": META, "l": "nan", "f": 0, "z": 0, "g": {"hidden": "cccc|0|0"}, "twin": "t"}
ZERO = {"m": META, "l": (0.0).hex(), "f": 1, "z": 1, "g": {"hidden": "dddd|1|1"}}
NAN = {"m": META, "l": "nan", "f": 0, "z": 0, "g": {"hidden": "eeee|0|0"}}
RAISES = {"e": "IndexError: index 0 is out of bounds"}


def verdict(pid: str, zoo: dict[str, Any], guarded: dict[str, Any], twin: dict[str, Any] | None = None) -> Any:
    return properties.PER_EXAMPLE[pid](zoo, guarded, twin or {"m": META, "l": "0x1p+0", "f": 1})


def test_the_region_is_every_label_masked_a_zero_count_and_a_non_finite_zoo_answer() -> None:
    assert in_region(EMPTY_NAN)
    assert not in_region({**EMPTY_NAN, "f": 1, "l": "0x0.0p+0"})  # a fixed zoo answers it: same-answer judges
    assert not in_region(NAN) and not in_region({**RAISES, "ez": 1})


def test_same_answer_compares_loss_bits_where_zoo_is_finite() -> None:
    assert verdict("d1-same-answer", OK, dict(OK)) == (True, None)
    applies, why = verdict("d1-same-answer", OK, ZERO)
    assert applies and "zoo loss 2.5 (bits 0x1.4000000000000p+1)" in why and "guarded 0 (bits 0x0.0p+0)" in why
    assert verdict("d1-same-answer", NAN, ZERO) == (False, None)
    assert "raised IndexError" in verdict("d1-same-answer", OK, RAISES)[1]


def test_same_gradients_outside_the_region_only() -> None:
    assert verdict("d2-same-gradients", OK, dict(OK))[1] is None
    why = verdict("d2-same-gradients", OK, {**OK, "g": {"hidden": "ffff|1|0", "weight": "bbbb|1|0"}})[1]
    assert why.startswith("grad of hidden")
    assert verdict("d2-same-gradients", EMPTY_NAN, ZERO) == (False, None)
    assert "none" in verdict("d2-same-gradients", OK, {**OK, "g": {"hidden": "aaaa|1|0", "weight": None}})[1]


def test_same_meta_takes_the_non_empty_twin_as_the_reference_in_the_region() -> None:
    bf16 = {**ZERO, "m": "Tensor|bfloat16|()|cpu|1"}
    why = verdict("d3-same-meta", EMPTY_NAN, bf16)[1]
    assert "non-empty batch with float32" in why and "guarded bfloat16" in why
    assert "shape (1,)" in verdict("d3-same-meta", OK, {**OK, "m": "Tensor|float32|(1,)|cpu|1"})[1]
    assert "a Python float" in verdict("d3-same-meta", OK, {**OK, "m": "float|-|-|-|0"})[1]


def test_same_exception_in_both_directions_and_for_backward() -> None:
    assert verdict("d4-same-exception", RAISES, {"e": "IndexError: other words"})[1] is None
    assert "zoo raises IndexError" in verdict("d4-same-exception", RAISES, ZERO)[1]
    assert "guarded raises" in verdict("d4-same-exception", OK, RAISES)[1]
    why = verdict("d4-same-exception", {**OK, "b": "RuntimeError: scaling=0"}, OK)[1]
    assert "zoo's backward raises RuntimeError" in why and "the guarded backward works" in why


def test_defined_empty_answer() -> None:
    assert verdict("d5-defined-empty-answer", EMPTY_NAN, ZERO) == (True, None)
    assert "expected 0" in verdict("d5-defined-empty-answer", EMPTY_NAN, dict(NAN))[1]
    assert "grad of hidden" in verdict("d5-defined-empty-answer", EMPTY_NAN, {**ZERO, "g": {"hidden": "x|1|0"}})[1]
    assert "no gradient for hidden" in verdict("d5-defined-empty-answer", EMPTY_NAN, {**ZERO, "g": {}})[1]
    assert "backward raised" in verdict("d5-defined-empty-answer", EMPTY_NAN, {**ZERO, "b": "RuntimeError: x"})[1]
    over = {**EMPTY_NAN, "c": {"hidden": "abc|1|0"}}  # zoo wrote its (NaN) gradient into hidden_states
    assert "overwrite" in verdict("d5-defined-empty-answer", over, ZERO)[1]
    assert verdict("d5-defined-empty-answer", over, {**ZERO, "c": {"hidden": "000|1|1"}})[1] is None
    assert verdict("d5-defined-empty-answer", OK, ZERO) == (False, None)


def test_non_finite_stays_outside_the_region() -> None:
    assert "non-finite from the inputs" in verdict("d6-non-finite-stays", NAN, ZERO)[1]
    assert verdict("d6-non-finite-stays", NAN, dict(NAN)) == (True, None)
    assert verdict("d6-non-finite-stays", EMPTY_NAN, ZERO) == (False, None)


def test_per_call_side_effects() -> None:
    assert "os.environ K" in verdict("d7-no-side-effects-env", OK, {**OK, "env": ["K"]})[1]
    assert verdict("d7-no-side-effects-env", {**OK, "env": ["K"]}, {**OK, "env": ["K"]})[1] is None
    assert "changed" in verdict("d8-no-side-effects-globals", OK, {**OK, "globals_changed": ["m:X"]})[1]
    assert "caller's labels" in verdict("d9-caller-tensors-unchanged", OK, {**OK, "c": {"labels": "1|0|0"}})[1]
    zoo_pops = {**OK, "c": {"extra_kwargs": "aa"}}
    assert "end differently" in verdict("d9-caller-tensors-unchanged", zoo_pops, OK)[1]
    region = {**EMPTY_NAN, "c": {"extra_kwargs": "aa"}}  # the guard need not pop n_chunks where it answers
    assert verdict("d9-caller-tensors-unchanged", region, ZERO)[1] is None


# ---------------------------------------------------------------- sentinels, the fixed zoo's reference, artefacts


def test_sentinel_labels_come_with_another_ignore_index_and_a_zero_count() -> None:
    examples = gen(48)
    roles = [e for i, e in enumerate(examples) if i % 13 == 2]  # after the 2nd, 14th, 26th, 38th
    assert [e["labels"] for e in roles] == list(S.SENTINELS)  # each sentinel in turn
    for e in roles:
        assert S.SENTINELS[e["labels"]] != e["ignore_index"] and e["nonfinite"] == "none"
        assert e["count"] == "zero" or e["n_items"] == "none"  # None is spelled with count "true"
        assert e["n_items"] in ("none", "int", "t0") and not any(e[f] == v for f, v in S.RARE)
    assert drawn(examples) == [e for i, e in enumerate(examples) if i % 13 != 2]
    assert [S.out_of_range(e) for e in roles] == [True, True, False, False]  # -100 and -1: no class


def test_a_sentinel_equal_to_the_ignore_index_is_an_all_masked_batch() -> None:
    norm = {"has_compute_gradients": False, "cuda": False}
    assert S.normalize({"labels": "sentinel_-100"}, **norm)["labels"] == "all_masked"
    assert S.normalize({"labels": "sentinel_0", "ignore_index": 0}, **norm)["labels"] == "all_masked"
    assert S.normalize({"labels": "sentinel_-100", "ignore_index": 3}, **norm)["labels"] == "sentinel_-100"
    assert S.normalize({"labels": "sentinel_pad", "ignore_index": -100}, **norm)["labels"] == "sentinel_pad"


FIXED_NAN = {"m": META, "l": (0.0).hex(), "f": 1, "z": 1, "g": {"hidden": "9999|0|0"}}  # NaN reached the grads
REGION = {**EMPTY_NAN, "fx": FIXED_NAN}


def test_the_empty_region_accepts_the_fixed_zoos_answer_as_well_as_the_defined_zero() -> None:
    assert verdict("d5-defined-empty-answer", REGION, dict(FIXED_NAN)) == (True, None)
    assert verdict("d5-defined-empty-answer", REGION, ZERO) == (True, None)
    assert properties.empty_reference(REGION, dict(FIXED_NAN), None) == "fixed-zoo"
    assert properties.empty_reference(REGION, ZERO, None) == "defined-zero"
    assert properties.empty_reference({**EMPTY_NAN, "fx": ZERO}, ZERO, None) == "both"
    # without the fixed zoo's answer (an oracle of old), the NaN gradient is judged against the zero alone
    assert "grad of hidden non-finite" in verdict("d5-defined-empty-answer", EMPTY_NAN, dict(FIXED_NAN))[1]
    # neither: a NaN loss, or another gradient than the fixed zoo's
    why = verdict("d5-defined-empty-answer", REGION, dict(NAN))[1]
    assert "(expected 0)" in why and "nor is it the fixed zoo's answer (loss nan" in why
    other = {**FIXED_NAN, "g": {"hidden": "7777|0|0"}}
    assert "nor is it the fixed zoo's answer (grad of hidden non-finite 7777" in verdict(
        "d5-defined-empty-answer", REGION, other)[1]
    assert properties.empty_reference(REGION, other, None) is None
    # the fixed zoo's meta is a reference too (it is zoo's own float32 0-d loss)
    assert verdict("d3-same-meta", REGION, dict(FIXED_NAN))[1] is None


def test_zoos_exception_outside_the_contract_excuses_the_defined_empty_answer_only() -> None:
    shape = {**RAISES, "ez": 1, "ca": "count-shape"}
    assert verdict("d4-same-exception", shape, ZERO) == (True, None)
    assert verdict("d4-same-exception", {**shape, "ca": "host"}, ZERO) == (True, None)
    assert verdict("d4-same-exception", shape, {"e": "IndexError: alike"}) == (True, None)
    # another answer than the defined zero is still judged: zoo raised, the guard gave NaN or a loss
    assert "zoo raises IndexError" in verdict("d4-same-exception", shape, dict(NAN))[1]
    assert "zoo raises IndexError" in verdict("d4-same-exception", shape, {**ZERO, "g": {"hidden": "x|1|0"}})[1]
    # a contract exception (labels out of range, a mask of the wrong shape) is never excused
    assert "zoo raises IndexError" in verdict("d4-same-exception", {**RAISES, "ez": 1}, ZERO)[1]
    # overwrite=True: the defined answer leaves the zero gradient in hidden_states, zoo raised before writing
    zeroed = {**ZERO, "c": {"hidden": "000|1|1"}}
    assert verdict("d9-caller-tensors-unchanged", shape, zeroed)[1] is None
    assert "caller's hidden" in verdict("d9-caller-tensors-unchanged", {**RAISES, "ez": 1}, zeroed)[1]
