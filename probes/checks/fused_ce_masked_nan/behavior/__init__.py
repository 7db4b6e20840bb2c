"""The behaviour suite of the ``fused-ce-masked-nan`` check (../README.md#its-suite).

Fourteen tests (the upstream proposal's thirteen and our 14), always
reported as fourteen entries (pass / fail / n/a with a reason), plus extra
probes outside them. Test 1 measures zoo's raw kernel in a process that
never imported unsloth (the "before" phase); tests 2-14 share one process
after ``import unsloth`` (the "after" phase). A guard is driven only
through its protocol module (``install``, ``uninstall``,
``is_installed``, ``zoo_needs_guard``); a guard without one is judged
black-box where possible. Runs inside a cell env: stdlib, torch and the
packages under test only.

Entry point: ``python -m probes.checks.fused_ce_masked_nan.behavior --out FILE.json --device cpu
--compile off --phase all``.
"""

from __future__ import annotations

SCHEMA = 1
PROTOCOL = ("install", "uninstall", "is_installed", "zoo_needs_guard")

TITLES: dict[str, str] = {
    "01-before": "all-masked, n_items None, raw kernel (process without unsloth)",
    "02-after": "all-masked after import unsloth: loss 0.0, gradients finite and 0",
    "03-dense": "dense labels, no n_items: bit-identical to unguarded, close to reference",
    "04-dense-n-items": "dense labels, with n_items: bit-identical to unguarded, close to reference",
    "05-sparse": "sparse labels, no n_items: bit-identical to unguarded, close to reference",
    "06-sparse-n-items": "sparse labels, with n_items: bit-identical to unguarded, close to reference",
    "07-mask": "mask argument: emptiness from the mask alone",
    "08-bias": "trainable lm_head bias: zero when all-masked, matches when not",
    "09-no-shift": "shift_labels=False (caller pre-shifted labels)",
    "10-shift-empties": "labels non-empty before the shift, empty after it",
    "11-idempotent": "install twice: one wrapper, same behaviour, signature and mapping cache",
    "12-uninstall": "uninstall restores the original object; on a vulnerable zoo the NaN returns",
    "13-fixed-zoo": "on a zoo carrying the fix, the guard leaves the forward untouched",
    "14-n-items-zero": "all-masked, n_items = 0 (what the trainer passes): loss 0.0, gradients zero",
}
TEST_IDS = tuple(TITLES)
