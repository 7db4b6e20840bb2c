"""The differential, property-based suite: the guarded kernel against zoo's own kernel in the same cell.

Contract (docs/design.md#the-differential-contract). After ``import unsloth`` the kernel must be
indistinguishable from zoo's own on every input, except where zoo's answer
is non-finite *only because every label is masked*: the effective labels
(after the causal shift and after folding ``mask`` in, the way zoo's
forward does) are all ``ignore_index`` and the count is None or zero in any
one-element form (``0``, ``0.0``, ``tensor(0)``, ``tensor([0.])``). When
every label is masked no input value reaches the loss, so a non-finite
answer there comes from the zero divisor alone, even when the inputs carry
a NaN. A multi-element count is not a zero form: zoo reads its first
element, and whatever zoo does with it is the oracle. In that region the
guarded call must give one of two references. The defined zero: a loss of
exactly 0 with the dtype, shape, device and ``requires_grad`` zoo gives a
non-empty batch of the same dtypes, zero gradients for every input that
requires grad, and a backward that works (unless zoo's own backward raises
there: then it must raise alike). Or what a zoo carrying the fix answers,
bit for bit: zoo 2026.10.9 turns a zero divisor into 1, so the raw process
runs this cell's kernel on the same inputs with a 0-d float32 count of 1
(``inputs.fixed``). The two differ only where a NaN/inf in a masked row
reaches the gradients through the softmax (the fixed zoo's loss is 0, its
gradients are not finite); ``d5``'s reason says which one each guarded
answer matched.
Everywhere else: where zoo raises (forward or backward), the same
exception type; where zoo's loss is finite, the same loss bits, the same
gradient bits, the same meta; where it is non-finite for another reason (a
NaN/inf in the inputs, a NaN count, a zero count with labels left), the
guarded loss stays non-finite. Only the contract fails a guard: where zoo
raises on a fully masked batch with a zero count for a reason outside it,
the defined empty answer passes ``d4`` too, and its reason names the input
and why (``properties.ARTEFACTS``). Two such reasons: ``host``, zoo asked an
accelerator the host lacks; ``count-shape``, the count is a tensor of zeros
that is not 0-d (``tensor([0.])``, or an empty one), which zoo rejects on
every batch, empty or not, before and after its fix, and no trainer sends.
Exceptions on the labels or the mask (a label out of range, a mask of
another shape) are the contract.

Faults below the guard (``faults.py``, ``d10``). Where zoo raises for a
reason no generated input reaches on this host (an out-of-memory, a failed
compile), the guarded call must raise the same type too. Both processes make
zoo's kernel raise by injecting a fault into what its forward calls at call
time (``torch.func.grad_and_value`` first), on batches with labels left and
on fully masked ones with a zero count. With labels left any answer fails;
fully masked, the defined empty answer passes only when zoo's kernel never
ran (the guard answered before calling it): one that reached zoo and
answered swallowed zoo's exception. A case where the injection does not make
zoo's own kernel raise in the raw process is ``n/a`` with the reason.

Oracle in another process. A guard with no install/uninstall hook (a
third-party guard that only patches at import) cannot be taken out, so
zoo's answers come from the raw process, which never imports unsloth
(``oracle.py``). It generates the examples from a seed, runs each through
zoo and records compact answers (``float.hex`` of the loss, a short sha256
of each gradient and of each caller tensor that changed, meta, exception
types). The unsloth process (``judge.py``) rebuilds the same inputs from the
same specs (seeded ``torch.Generator``, so bit-identical), runs them through
whatever ``import unsloth`` left in place, and compares. Nothing needs a hook,
so no property turns n/a for want of one.

Generator and shrinking (``spec.py``). The cell env is kept minimal:
hypothesis is not installed there, so this is a small seeded generator of
its own (``random.Random``). An example is a flat JSON spec over the whole
signature and calling context: shape, dtype, label pattern (among them
every label ignore_index or a common sentinel that is not it: -100, -1, 0,
a pad id; ``spec.SENTINELS``), ``ignore_index`` (-100, 0, -1, 3 and an
unusable string), ``mask`` (None, 0/1, values 2 /
0.5 / -1, bool, all-zero, a wrong shape), the count (None, int, float, 0-d,
one-element, long, multi-element, empty and string forms; true / 0 / 3 /
NaN values), ``scaling`` (incl. 0), ``shift_labels``, chunking (one chunk,
a ``target_gb`` that forces several, ``n_chunks``), ``overwrite``,
``label_smoothing``, the ``logit_*`` keywords, bias (none / trainable /
frozen), ``requires_grad`` of hidden states and lm_head, grad mode
(``torch.no_grad``), ``compute_gradients`` where the forward has it, NaN/inf
in the inputs, and the route (the autograd Function through
``apply_autograd_function``, and the public entry
``unsloth_zoo.loss_utils.unsloth_fused_ce_loss`` bound by value). Because
the oracle lives in another process, shrinking works on a precomputed
lattice: for every example the raw process also answers a fixed set of
simplifications (smallest shape with seed 0, each keyword back to its
default one at a time, only one keyword kept, a simpler count form, a
simpler label pattern), and the unsloth process reports the smallest
failing input it has zoo's answer for, in one line.

Side effects (``state.py``). Snapshots in both processes: ``os.environ``,
and the module globals of zoo's ``cross_entropy_loss`` and ``loss_utils``
plus the kernel class's attributes other than ``forward`` (names ->
descriptions that compare across processes: reprs of simple values,
code identity of functions, compile flags included). Rules:

* env: a key judged is one whose value differs between the raw process and
  the unsloth process right after ``import unsloth`` (first unsloth step)
  AND that zoo's kernel modules read (``os.environ.get("K")`` and the like,
  found by AST) or that the source of the guard's module names (the module
  of the replaced forward, or the protocol module); ``import unsloth`` sets
  a dozen unrelated keys on an unguarded build, which this rule leaves out.
  The keys the phases set differently on purpose (``UNSLOTH_IS_PRESENT``,
  ``UNSLOTH_ALLOW_CPU``) never count. Any key a guarded call changes counts,
  unless zoo's own call changed it in the raw process.
* globals: any difference between the raw snapshot and the first unsloth
  snapshot counts (measured: an unguarded ``import unsloth`` changes none of
  them on zoo 2026.9.3 and 2026.10.9), except in the CPU-backend mode, where
  zoo is imported under other variables than in the raw process (recorded,
  not judged); and any change across a guarded call that zoo's calls did
  not make in the raw process.
* caller tensors and the ``extra_kwargs`` dict: per example, what the
  guarded call changed must be a subset of what zoo's changed; outside the
  empty region the changed tensors must end bit-identical to zoo's.

Both sides run zoo's chunk loop eagerly (``torch_compile=False``) whatever
the cell's compile setting (recorded as ``cell_compile``): hundreds of calls
over many argument combinations would each recompile; the compiled path is
the behaviour suite's extra probe.

Example count: ``DEFAULT_EXAMPLES`` per cell, raised with the hand-off's
``--examples`` (the harness's setting ``SKEWMATRIX_DIFF_EXAMPLES``), plus one
sentinel example after every twelfth from the second (52 by default); the
seed is ``DEFAULT_SEED`` unless ``--seed`` (``SKEWMATRIX_DIFF_SEED``) says
otherwise. Both are recorded in the result. The
default was measured on a 2-core host, with zoo 2026.9.3 and torch 2.12.1. In
the raw process, the examples, their lattices and the fixed zoo's answers in
the empty region come to about 860 answers and 3-4 s of CPU on a loaded host
(2-3 s before the fixed zoo's answers and the sentinels). The unsloth process
uses about 0.2-0.3 s of CPU when nothing fails and about 1 s when a guard
fails (shrinking). The raw process hands on its compact answers (about 150
KB before the fixed zoo's answers were added).
"""

from __future__ import annotations

from probes import handoff

SCHEMA = 1
DEFAULT_EXAMPLES = 48
DEFAULT_SEED = 20261009
SHARED_KEY = "differential"
BASELINE_KEY = "differential_baseline"

PROPERTIES: dict[str, str] = {
    "d1-same-answer": "where zoo's loss is finite, the guarded loss has the same bits",
    "d2-same-gradients": "outside the empty region, the same gradient bits for every input that requires grad",
    "d3-same-meta": "the loss has zoo's type, dtype, shape, device and requires_grad",
    "d4-same-exception": "where zoo raises (forward or backward), the guarded call raises the same type",
    "d5-defined-empty-answer": "every label masked and a zero count: loss 0, zero gradients, backward works",
    "d6-non-finite-stays": "where zoo's loss is non-finite for another reason, the guarded loss stays non-finite",
    "d7-no-side-effects-env": "os.environ: no kernel-relevant or guard-named key changed by import or calls",
    "d8-no-side-effects-globals": "zoo's module globals and kernel class attributes unchanged by import or calls",
    "d9-caller-tensors-unchanged": "a call changes the caller's tensors and kwargs only as zoo's own call does",
    "d10-faults-propagate": "zoo's kernel made to raise below the guard (an OOM, a TypeError): the guarded call "
                            "raises the same, and answers only an empty batch it never handed to zoo",
}
PROPERTY_IDS = tuple(PROPERTIES)


def example_count() -> int:
    """The number of generated examples: the hand-off's ``--examples`` (the harness's setting), else the default."""
    given = handoff.given().examples
    return DEFAULT_EXAMPLES if given is None else max(1, given)


def seed() -> int:
    """The examples' seed: the hand-off's ``--seed``, else the default."""
    given = handoff.given().seed
    return DEFAULT_SEED if given is None else given
