"""From a spec to tensors and one call into zoo's kernel; the answer, described compactly.

Both processes build the same inputs from the same spec (a seeded
``torch.Generator``, every draw made in a fixed order whatever the fields
say, so a shrink changes only what it names) and describe what came back
in the same small form: meta, ``float.hex`` of the loss, short sha256
digests of the loss, of each gradient and of each caller tensor that the
call changed, exception types. Imports torch; zoo lazily.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import kernel
from .spec import SENTINELS, SHAPES, ZERO_FORMS

LEAVES = ("hidden", "weight", "bias")


@dataclass
class Call:
    spec: dict[str, Any]
    hidden: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None
    labels: torch.Tensor
    mask: torch.Tensor | None
    n_items: Any
    extra: dict[str, Any] = field(default_factory=dict)
    empty: bool = False        # every effective label is ignore_index (zoo's shift and mask folding)
    zero_count: bool = False   # the count is None or a one-element zero
    count_true: int = 0

    def caller(self) -> dict[str, Any]:
        named = {"hidden": self.hidden, "weight": self.weight, "bias": self.bias,
                 "labels": self.labels, "mask": self.mask, "n_items": self.n_items}
        return {k: v for k, v in named.items() if torch.is_tensor(v)}

    def leaves(self) -> dict[str, torch.Tensor]:
        named = {"hidden": self.hidden, "weight": self.weight, "bias": self.bias}
        return {k: v for k, v in named.items() if v is not None and v.requires_grad}


def digest(t: torch.Tensor) -> str:
    """sha256 (10 hex) of a tensor's dtype, shape and bytes."""
    flat = t.detach().cpu().contiguous().reshape(-1)
    raw = bytes(flat.view(torch.uint8).tolist()) if flat.numel() else b""
    return hashlib.sha256(f"{flat.dtype}{tuple(t.shape)}".encode() + raw).hexdigest()[:10]


def effective_labels(labels: torch.Tensor, mask: torch.Tensor | None, shift: bool, ignore: int) -> torch.Tensor:
    """The labels zoo's forward divides by: shifted, with ``mask[..., 1:] == 0`` folded in (shift only)."""
    if not shift:
        return labels
    eff = torch.full_like(labels, ignore)
    eff[..., :-1] = labels[..., 1:]
    if mask is not None and mask.shape == labels.shape:
        eff[..., :-1][mask[..., 1:] == 0] = ignore
    return eff


def _mask(kind: str, rand: torch.Tensor) -> torch.Tensor | None:
    bsz, qlen = rand.shape
    if kind == "none":
        return None
    if kind == "ones":
        return torch.ones(bsz, qlen, dtype=torch.long)
    if kind == "zeros":
        return torch.zeros(bsz, qlen, dtype=torch.long)
    if kind == "random":
        return (rand < 0.5).long()
    if kind == "values":  # beyond 0/1: zoo keeps every position whose mask is not 0
        return torch.tensor([0.0, 1.0, 2.0, 0.5, -1.0])[(rand * 5).long().clamp(max=4)]
    if kind == "bool":
        return rand < 0.6
    if kind == "bool_zeros":
        return torch.zeros(bsz, qlen, dtype=torch.bool)
    if kind == "wrong_shape":
        return torch.ones(bsz, qlen - 1, dtype=torch.long)
    raise ValueError(f"unknown mask kind {kind!r}")


def _count(form: str, value: float) -> Any:
    if form == "none":
        return None
    if form == "int":
        return int(value)
    if form == "float":
        return float(value)
    if form == "t0":
        return torch.tensor(float(value))
    if form == "t1":
        return torch.tensor([float(value)])
    if form == "tlong":
        return torch.tensor(int(value))
    if form == "tmulti":
        return torch.tensor([float(value), 7.0])
    if form == "empty":
        return torch.zeros(0)
    if form == "str":
        return "3"
    raise ValueError(f"unknown count form {form!r}")


def render_count(n_items: Any) -> str:
    """The count as the caller wrote it: ``None``, ``0``, ``0.0``, ``tensor([0., 7.])``, ``'3'``."""
    if torch.is_tensor(n_items):
        return " ".join(repr(n_items).split())
    return repr(n_items)


def materialize(spec: dict[str, Any], device: str = "cpu") -> Call:
    bsz, qlen, hd, vocab = SHAPES[spec["shape"]]
    gen = torch.Generator().manual_seed(int(spec["seed"]))
    hidden = torch.randn(bsz, qlen, hd, generator=gen)
    weight = torch.randn(vocab, hd, generator=gen) * 0.5
    bias = torch.randn(vocab, generator=gen) * 0.1
    labels = torch.randint(0, vocab, (bsz, qlen), generator=gen)
    keep = torch.rand(bsz, qlen, generator=gen) < 0.4
    rand = torch.rand(bsz, qlen, generator=gen)
    ig = spec["ignore_index"]
    fill = ig if isinstance(ig, int) else -100
    pattern = spec["labels"]
    if pattern == "all_masked":
        labels.fill_(fill)
    elif pattern in ("sparse", "stray"):
        labels[~keep] = fill if pattern == "sparse" else -100
        labels[0, -1] = 1 if pattern == "sparse" else -100  # one label survives the shift
    elif pattern == "first_only":
        labels[:, 1:] = fill
    elif pattern == "last_only":
        labels[:, :-1] = fill
    elif pattern == "mixed_rows":
        labels[0] = fill
    elif pattern in SENTINELS:  # every label is ignore_index or a common sentinel that is not it
        sentinel = SENTINELS[pattern] if SENTINELS[pattern] is not None else vocab - 1
        labels[~keep] = fill
        labels[keep] = sentinel
        labels[0, -1] = sentinel  # survives the shift
    mask = _mask(spec["mask"], rand)
    eff = effective_labels(labels, mask, spec["shift"], fill)
    count_true = int((eff != fill).sum())
    dtype = getattr(torch, spec["dtype"])
    hidden, weight, bias = hidden.to(dtype), weight.to(dtype), bias.to(dtype)
    flat = hidden.view(-1, hd)
    if spec["nonfinite"] in ("nan_labelled", "nan_masked"):
        rows = (eff.reshape(-1) != fill) if spec["nonfinite"] == "nan_labelled" else (eff.reshape(-1) == fill)
        hits = rows.nonzero()
        flat[int(hits[0]) if len(hits) else 0, 0] = float("nan")
    elif spec["nonfinite"] == "inf_weight":
        weight[0, 0] = float("inf")
    value = {"true": count_true, "zero": 0, "three": 3, "nan": float("nan")}[spec["count"]]
    n_items = _count(spec["n_items"], value)
    zero_count = spec["n_items"] == "none" or (spec["n_items"] in ZERO_FORMS and value == 0)
    hidden, weight = hidden.to(device), weight.to(device)
    hidden.requires_grad_(spec["hidden_grad"])
    weight.requires_grad_(spec["weight_grad"])
    b = None if spec["bias"] == "none" else bias.to(device).requires_grad_(spec["bias"] == "trainable")
    labels = labels.to(device)
    mask = mask.to(device) if mask is not None else None
    n_items = n_items.to(device) if torch.is_tensor(n_items) else n_items
    extra: dict[str, Any] = {}
    if ig != -100:
        extra["ignore_index"] = ig
    for name, kw in (("smoothing", "label_smoothing"), ("softcap", "logit_softcapping"),
                     ("logit_mul", "logit_scale_multiply"), ("logit_div", "logit_scale_divide")):
        if spec[name] is not None:
            extra[kw] = spec[name]
    if spec["chunks"].startswith("n_chunks"):
        extra["n_chunks"] = int(spec["chunks"][-1])
    return Call(spec, hidden, weight, b, labels, mask, n_items, extra, count_true == 0 and mask_ok(spec),
                zero_count, count_true)


def mask_ok(spec: dict[str, Any]) -> bool:
    return spec["mask"] != "wrong_shape"


def target_gb(spec: dict[str, Any]) -> float | None:
    """One chunk, or a budget that forces several (never below zoo's 1e-9 floor), or zoo's default (cuda)."""
    if spec["chunks"] == "default":
        return None
    if spec["chunks"] != "several":
        return kernel.TARGET_GB
    bsz, qlen, _, vocab = SHAPES[spec["shape"]]
    return bsz * qlen * vocab * 16 / 2**30 / 3


def invoke(call: Call, torch_compile: bool, public: Any) -> Any:
    """One call through the spec's route; ``public`` is ``unsloth_fused_ce_loss`` bound by value."""
    s = call.spec
    if s["route"] == "public":
        return public(None, call.hidden, call.weight, call.bias, call.labels, mask=call.mask, n_items=call.n_items,
                      scaling=s["scaling"], target_gb=target_gb(s), torch_compile=torch_compile,
                      overwrite=s["overwrite"], shift_labels=s["shift"], **call.extra)
    m = kernel.ce_module()
    mapping = dict(loss_function=m.compute_fused_ce_loss, hidden_states=call.hidden, lm_head_weight=call.weight,
                   lm_head_bias=call.bias, labels=call.labels, mask=call.mask, n_items=call.n_items,
                   scaling=s["scaling"], shift_labels=s["shift"], target_gb=target_gb(s),
                   torch_compile=torch_compile, overwrite=s["overwrite"], extra_kwargs=call.extra)
    if s["compute_gradients"] is not None:
        mapping["compute_gradients"] = s["compute_gradients"]
    return m.apply_autograd_function(getattr(m, kernel.FUNCTION_NAME), mapping)


def fixed(call: Call) -> Call:
    """The same call with the count zoo's fix divides by on a fully masked batch.

    zoo 2026.10.9 turns a zero divisor into 1 (``torch.where(divisor == 0, 1, divisor)``) after making it
    a 0-d float32 tensor on the head's device; every other step of its forward is as before. So on this
    cell's zoo, the same inputs with ``n_items`` a 0-d float32 one are exactly what a fixed zoo computes
    for a fully masked batch whose count is None or a zero: loss 0, and gradients that are zero unless a
    masked row carries a NaN/inf (it reaches them through the softmax, as it does on the fixed zoo).
    """
    n_items = torch.ones((), dtype=torch.float32, device=call.weight.device)
    return Call(call.spec, call.hidden, call.weight, call.bias, call.labels, call.mask, n_items, call.extra)


def _state(call: Call) -> dict[str, str]:
    out = {k: f"{digest(v)}|{int(v.requires_grad)}" for k, v in call.caller().items()}
    out["extra_kwargs"] = hashlib.sha256(repr(sorted(call.extra.items())).encode()).hexdigest()[:10]
    return out


def _loss(loss: Any) -> dict[str, Any]:
    """``m`` meta, ``l`` float.hex of the loss (its bits, with the dtype in ``m``), ``d`` a digest when the
    loss is not one element, ``f`` finite, ``z`` all zero (0/1)."""
    if not torch.is_tensor(loss):
        try:
            value = float(loss)
        except (TypeError, ValueError):
            value = float("nan")
        return {"m": f"{type(loss).__name__}|-|-|-|0", "l": value.hex(),
                "d": hashlib.sha256(repr(loss).encode()).hexdigest()[:10], "f": int(math.isfinite(value)),
                "z": int(value == 0.0)}
    det = loss.detach()
    out: dict[str, Any] = {
        "m": f"Tensor|{str(det.dtype).removeprefix('torch.')}|{tuple(det.shape)}|{det.device.type}|"
             f"{int(loss.requires_grad)}",
        "f": int(bool(torch.isfinite(det.float()).all())), "z": int(bool(det.numel() > 0 and (det == 0).all()))}
    if det.numel() == 1:
        out["l"] = float(det.reshape(-1)[0].float()).hex()
    else:
        out["l"] = f"numel={det.numel()}"
        out["d"] = digest(det)
    return out


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:100]}"


# Words of an error that comes from asking an accelerator something (zoo sizes its chunks from the free
# memory when target_gb is None): on a host without one, that is the host's doing, not zoo's answer.
DEVICE_WORDS = ("cuda", "nvidia", "driver", "mem_get_info", "no gpu", "accelerator")


def artefact(call: Call, error: str) -> str | None:
    """Why zoo's exception on a fully masked batch with a zero count is not part of the contract, or None.

    ``host``: zoo asked an accelerator the host does not have. ``count-shape``: the count is a tensor of
    zeros that is not 0-d (``tensor([0.])``, or no element at all). zoo raises for such a count on every
    batch, empty or not, before and after its fix, so its exception is a rejection of the count's shape
    rather than an answer about the batch. No trainer sends it: transformers hands the kernel a 0-d tensor
    or None. A guard may raise as zoo does there, or give the defined empty answer.
    """
    if not call.empty:
        return None
    n = call.n_items
    if call.zero_count and call.hidden.device.type == "cpu" and any(w in error.lower() for w in DEVICE_WORDS):
        return "host"
    if torch.is_tensor(n) and n.dim() > 0 and n.numel() <= 1 and bool((n == 0).all()):
        return "count-shape"
    return None


def run(call: Call, torch_compile: bool, public: Any) -> dict[str, Any]:
    """Forward (in the spec's grad mode) and backward once; the compact answer.

    Keys: ``e`` forward exception, ``b`` backward exception (``"Type: message"``), the loss (``_loss``),
    ``g`` leaf -> ``digest|finite|zero`` (None: no gradient), ``c`` caller tensor -> ``digest|requires_grad|zero``
    after the call for those it changed, ``env`` the os.environ keys it changed, ``ez`` 1 when every
    effective label is masked and the count is zero (the region's two input conditions), ``ca`` why zoo's
    exception there is not part of the contract (``artefact``).
    """
    before = _state(call)
    env_before = dict(os.environ)
    ans: dict[str, Any] = {"ez": 1} if call.empty and call.zero_count else {}
    grad_ctx = torch.no_grad() if call.spec["grad_mode"] == "no_grad" else contextlib.nullcontext()
    try:
        with grad_ctx:
            loss = invoke(call, torch_compile, public)
    except Exception as exc:
        ans["e"] = _error(exc)
        why = artefact(call, ans["e"])
        if why:
            ans["ca"] = why
    else:
        ans.update(_loss(loss))
        if torch.is_tensor(loss) and loss.requires_grad:
            try:
                loss.backward()
            except Exception as exc:
                ans["b"] = _error(exc)
        grads: dict[str, str | None] = {}
        for name, leaf in call.leaves().items():
            g = leaf.grad
            grads[name] = None if g is None else (
                f"{digest(g)}|{int(bool(torch.isfinite(g.float()).all()))}|{int(bool((g == 0).all()))}")
        ans["g"] = grads
    after = _state(call)
    tensors = call.caller()
    changed_tensors = {k: after[k] + (f"|{int(bool((tensors[k] == 0).all()))}" if k in tensors else "")
                       for k in after if before.get(k) != after[k]}
    if changed_tensors:
        ans["c"] = changed_tensors
    env_after = os.environ
    changed = sorted(k for k in set(env_before) | set(env_after) if env_before.get(k) != env_after.get(k))
    if changed:
        ans["env"] = changed
    return ans
