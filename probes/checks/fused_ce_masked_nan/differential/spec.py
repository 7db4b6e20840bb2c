"""Example specs: a seeded generator over the kernel's signature, and the shrink lattice.

A spec is a flat dict of JSON values (``DEFAULTS`` names every field). It is
pure data: ``inputs.materialize`` turns it into tensors and a call the same
way in both processes. Stdlib only (hypothesis is not in the cell env).

Fields, each with its default first in ``CHOICES``: ``shape`` (index into
``SHAPES``, smallest first), ``seed`` (tensor values), ``dtype``,
``labels`` (the label pattern, data rather than a keyword: kept by
``keep-one`` shrinks), ``ignore_index``, ``mask``, ``n_items`` + ``count``
(the count's form and value, shrunk together), ``scaling``, ``shift``,
``chunks``, ``overwrite``, ``smoothing``, ``softcap``, ``logit_mul``,
``logit_div``, ``bias``, ``hidden_grad``, ``weight_grad``, ``grad_mode``,
``route``, ``nonfinite``, ``compute_gradients`` (only where zoo's forward
takes it).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

# (bsz, qlen, hidden, vocab), smallest first: the shrink target is index 0.
SHAPES: tuple[tuple[int, int, int, int], ...] = ((1, 2, 4, 8), (2, 3, 4, 8), (2, 5, 8, 16), (3, 4, 12, 40))

CHOICES: dict[str, tuple[Any, ...]] = {
    "dtype": ("float32", "bfloat16"),
    "labels": ("dense", "all_masked", "sparse", "first_only", "last_only", "mixed_rows", "stray",
               "sentinel_-100", "sentinel_-1", "sentinel_0", "sentinel_pad"),
    "ignore_index": (-100, 0, -1, 3, "x"),
    "mask": ("none", "ones", "zeros", "random", "values", "bool", "bool_zeros", "wrong_shape"),
    "n_items": ("none", "int", "float", "t0", "t1", "tlong", "tmulti", "empty", "str"),
    "count": ("true", "zero", "three", "nan"),
    "scaling": (None, 1.0, 4.0, 0.5, 0.0),
    "shift": (True, False),
    "chunks": ("one", "several", "n_chunks2", "n_chunks3"),
    "overwrite": (False, True),
    "smoothing": (None, 0.1),
    "softcap": (None, 5.0),
    "logit_mul": (None, 0.5),
    "logit_div": (None, 2.0),
    "bias": ("none", "trainable", "frozen"),
    "hidden_grad": (True, False),
    "weight_grad": (True, False),
    "grad_mode": ("enabled", "no_grad"),
    "route": ("function", "public"),
    "nonfinite": ("none", "nan_labelled", "inf_weight", "nan_masked"),
    "compute_gradients": (None, False),
}
DEFAULTS: dict[str, Any] = {"shape": 0, "seed": 0, **{k: v[0] for k, v in CHOICES.items()}}
# Inputs zoo rejects: drawn rarely, so most examples exercise the arithmetic.
RARE = {("ignore_index", "x"), ("mask", "wrong_shape"), ("n_items", "empty"), ("n_items", "str"),
        ("labels", "stray"), ("scaling", 0.0)}
# One-element zero forms (with count "zero", or "true" on an empty batch): the region's counts.
ZERO_FORMS = ("int", "float", "t0", "t1", "tlong")
# A simpler count form, one step at a time.
SIMPLER_FORM = {"tmulti": "t1", "t1": "t0", "tlong": "t0", "t0": "float", "float": "int"}
# Label patterns where every label is ignore_index or a common sentinel value that is not it: -100 (the
# transformers collators' pad label), -1, 0 and a pad id (the last token id, None here). -100 and -1 are no
# class, so zoo raises on them; 0 and the pad id are real classes zoo learns. A guard that takes a sentinel
# for "ignored" whatever ignore_index says calls these batches empty.
SENTINELS: dict[str, int | None] = {"sentinel_-100": -100, "sentinel_-1": -1, "sentinel_0": 0, "sentinel_pad": None}
LABEL_RANK = {"dense": 0, "all_masked": 0, "sparse": 1, "first_only": 1, "last_only": 1, "mixed_rows": 2,
              "stray": 2, **dict.fromkeys(SENTINELS, 1)}
# Fields a shrink resets or keeps as one (the count's form and value move together).
GROUPS: tuple[tuple[str, ...], ...] = tuple(
    (k,) if k != "n_items" else ("n_items", "count") for k in CHOICES if k not in ("labels", "count"))
P_NON_DEFAULT = 0.3
# The patterns drawn freely (the sentinels have a role of their own).
FREE_LABELS = tuple(lab for lab in CHOICES["labels"] if lab not in SENTINELS)


def normalize(spec: dict[str, Any], *, has_compute_gradients: bool, cuda: bool) -> dict[str, Any]:
    """Make a spec valid and canonical (one spelling per input)."""
    s = {**DEFAULTS, **spec}
    if s["n_items"] in ("none", "empty", "str"):
        s["count"] = "true"
    elif s["n_items"] in ("int", "tlong") and s["count"] == "nan":
        s["count"] = "three"
    if s["labels"] == "mixed_rows" and SHAPES[s["shape"]][0] == 1:
        s["labels"] = "all_masked"  # one row, fully ignored
    if s["labels"] == "stray" and s["ignore_index"] == -100:
        s["labels"] = "sparse"
    if s["labels"] in SENTINELS and SENTINELS[s["labels"]] == (s["ignore_index"] if isinstance(
            s["ignore_index"], int) else -100):
        s["labels"] = "all_masked"  # the sentinel is the ignore index: every label is masked
    if not has_compute_gradients or s["route"] != "function":
        s["compute_gradients"] = None
    if s["chunks"] == "default" and not cuda:
        s["chunks"] = "one"
    return {k: s[k] for k in DEFAULTS}


def out_of_range(spec: dict[str, Any]) -> bool:
    """Labels that are no class and not ignore_index (-100 or -1 under another ignore index): zoo's CPU
    kernel raises on them, a CUDA one trips a device-side assert that ruins the process's every later call.
    Both processes run such an input on the CPU whatever the cell's device."""
    return spec["labels"] in ("stray", "sentinel_-100", "sentinel_-1")


def _pick(rng: random.Random, field: str) -> Any:
    options = CHOICES[field]
    if rng.random() >= P_NON_DEFAULT:
        return options[0]
    common = [o for o in options[1:] if (field, o) not in RARE]
    rare = [o for o in options[1:] if (field, o) in RARE]
    if rare and (not common or rng.random() < 0.15):
        return rng.choice(rare)
    return rng.choice(common)


def generate(seed: int, count: int, *, has_compute_gradients: bool, cuda: bool = False) -> list[dict[str, Any]]:
    """``count`` specs from ``seed``, and after every twelfth from the second one more (``sentinel``). Roles by
    index guarantee coverage of every property's inputs: every third example has every label masked and a
    zero count, every sixth from the fourth carries a NaN/inf input, every sixth from the sixth an input zoo
    rejects; the other fields are drawn freely. The sentinel examples come from a second generator, so
    the ``count`` others are the same with or without them."""
    rng = random.Random(seed)
    side = random.Random(f"{seed}-sentinels")
    out = []
    for i in range(count):
        s: dict[str, Any] = {f: _pick(rng, f) for f in CHOICES if f not in ("labels", "count", "n_items")}
        s["labels"] = rng.choice([lab for lab in FREE_LABELS if lab != "stray"])
        s["n_items"], s["count"] = _pick(rng, "n_items"), rng.choice(CHOICES["count"])
        s["shape"] = rng.randrange(len(SHAPES))
        s["seed"] = rng.randrange(1, 2**16)
        if cuda and rng.random() < 0.1:
            s["chunks"] = "default"
        role = i % 6
        if role in (0, 3):  # the empty region: every label masked, a zero count
            s["labels"] = rng.choice(("all_masked", "all_masked", "first_only"))
            s["mask"] = rng.choice(("none", "none", "zeros", "bool_zeros", "values"))
            s["n_items"] = rng.choice(("none", "none", *ZERO_FORMS))
            s["count"] = "zero" if rng.random() < 0.5 else "true"
            s["scaling"] = s["scaling"] if s["scaling"] != 0.0 else None
        elif role == 4:  # a non-finite input
            s["nonfinite"] = rng.choice(CHOICES["nonfinite"][1:])
            if s["labels"] in ("all_masked", "first_only"):
                s["labels"] = "sparse"
        elif role == 5:  # an input zoo rejects
            field, value = rng.choice(sorted(RARE, key=str))
            s[field] = value
            if field == "labels":
                s["ignore_index"] = rng.choice((0, -1, 3))
        out.append(normalize(s, has_compute_gradients=has_compute_gradients, cuda=cuda))
        if i % 12 == 1:
            out.append(normalize(sentinel(side, list(SENTINELS)[(i // 12) % len(SENTINELS)]),
                                 has_compute_gradients=has_compute_gradients, cuda=cuda))
    return out


def sentinel(rng: random.Random, labels: str) -> dict[str, Any]:
    """Every label ``ignore_index`` or the sentinel of ``labels``, another ignore_index in force, a zero
    count (None, 0 or tensor(0.)); the other fields drawn freely, but nothing else for zoo to reject."""
    s: dict[str, Any] = {f: _pick(rng, f) for f in CHOICES if f not in ("labels", "count", "n_items")}
    s.update({f: DEFAULTS[f] for f, v in RARE if s.get(f) == v})
    s["labels"] = labels
    s["ignore_index"] = rng.choice([v for v in (-100, 0, -1, 3) if v != SENTINELS[labels]])
    s["n_items"], s["count"] = rng.choice(("none", "none", "int", "t0")), "zero"
    s["shape"], s["seed"] = rng.randrange(len(SHAPES)), rng.randrange(1, 2**16)
    s["nonfinite"] = "none"
    return s


def key(spec: dict[str, Any]) -> str:
    """A short, stable name for a spec (the raw process's answers are keyed by it)."""
    text = json.dumps([spec.get(k, DEFAULTS[k]) for k in DEFAULTS], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def compact(spec: dict[str, Any]) -> dict[str, Any]:
    """Only the fields that are not the default (what the raw process hands on)."""
    return {k: v for k, v in spec.items() if k in DEFAULTS and v != DEFAULTS[k]}


def expand(fields: dict[str, Any]) -> dict[str, Any]:
    return {**DEFAULTS, **{k: v for k, v in fields.items() if k in DEFAULTS}}


def non_default(spec: dict[str, Any]) -> list[tuple[str, ...]]:
    """The field groups whose value is not the default (shape and seed apart)."""
    return [g for g in GROUPS if any(spec[f] != DEFAULTS[f] for f in g)]


def size(spec: dict[str, Any]) -> tuple[int, ...]:
    """Smaller is simpler: fewer non-default keywords, a smaller shape, a plainer label pattern, seed 0."""
    form_rank = list(CHOICES["n_items"]).index(spec["n_items"])
    return (len(non_default(spec)), spec["shape"], LABEL_RANK.get(spec["labels"], 3), form_rank,
            int(spec["seed"] != 0))


def lattice(spec: dict[str, Any], *, has_compute_gradients: bool, cuda: bool = False) -> list[dict[str, Any]]:
    """The fixed simplifications of ``spec`` the raw process answers too (deduplicated, never ``spec``).

    All at the smallest shape with seed 0 (so whatever fails among them is small), except one: every
    keyword back to its default at the example's own shape and seed (for a failure that needs the shape).
    At the small shape: the example itself; each keyword group back to its default (drop one); only
    that group kept (keep one); none kept; a simpler count form; the plainer label patterns.
    """
    def norm(s: dict[str, Any]) -> dict[str, Any]:
        return normalize(s, has_compute_gradients=has_compute_gradients, cuda=cuda)

    small = {"shape": 0, "seed": 0}
    bare = {**DEFAULTS, **small, "labels": spec["labels"]}
    out = [norm({**spec, **small}), norm({**DEFAULTS, "shape": spec["shape"], "seed": spec["seed"],
                                          "labels": spec["labels"]}), norm(bare)]
    for g in non_default(spec):
        out.append(norm({**spec, **small, **{f: DEFAULTS[f] for f in g}}))  # drop one keyword
        out.append(norm({**bare, **{f: spec[f] for f in g}}))  # keep only this one
    if spec["n_items"] in SIMPLER_FORM:
        out.append(norm({**spec, **small, "n_items": SIMPLER_FORM[spec["n_items"]]}))
    if LABEL_RANK.get(spec["labels"], 3) > 0:
        for labels in ("dense", "all_masked"):
            out += [norm({**spec, **small, "labels": labels}), norm({**bare, "labels": labels})]
    seen = {key(spec)}
    unique = []
    for s in out:
        k = key(s)
        if k not in seen:
            seen.add(k)
            unique.append(s)
    return unique


def twin(spec: dict[str, Any]) -> dict[str, Any]:
    """A non-empty batch of the same dtypes and calling context (its meta is what an empty answer must have)."""
    return {**spec, "labels": "dense", "mask": "none", "n_items": "none", "count": "true", "nonfinite": "none",
            "ignore_index": spec["ignore_index"] if isinstance(spec["ignore_index"], int) else -100}


def describe(spec: dict[str, Any], n_items_text: str | None = None) -> str:
    """One line naming the input: shape, dtype, route, labels, the count, then every other non-default field."""
    bsz, qlen, hidden, vocab = SHAPES[spec["shape"]]
    parts = [f"bsz={bsz} qlen={qlen} hidden={hidden} vocab={vocab}", f"dtype={spec['dtype']}",
             f"route={spec['route']}", f"labels={spec['labels']}",
             f"n_items={n_items_text if n_items_text is not None else spec['n_items'] + '/' + spec['count']}"]
    for field, default in DEFAULTS.items():
        if field not in ("shape", "seed", "dtype", "route", "labels", "n_items", "count") and spec[field] != default:
            parts.append(f"{field}={spec[field]}")
    parts.append(f"seed={spec['seed']}")
    return " ".join(parts)
