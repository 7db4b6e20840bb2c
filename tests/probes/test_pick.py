"""``checks.pick``: the one place ``--check ID`` becomes a check with a capability."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes import checks

ROOT = Path(__file__).resolve().parents[2]


def test_no_id_is_the_first_check_that_declares_it() -> None:
    for kind in checks.CAPABILITIES:
        declared = checks.with_capability(kind)
        if declared:
            assert checks.pick(kind) == declared[0]


def test_an_id_is_its_folder_and_a_folder_name_is_not_an_id() -> None:
    name = checks.with_capability("scan")[0]
    assert checks.pick("scan", checks.info(name).id) == name
    if checks.info(name).id != name:
        with pytest.raises(checks.PickError, match="no registered check has this id"):
            checks.pick("scan", name)


def test_a_check_without_the_capability_says_so_and_lists_the_valid_ids() -> None:
    lacking = next(n for n in checks.REGISTRY if checks.capability(n, "mutation") is None)
    valid = [checks.info(n).id for n in checks.with_capability("mutation")]
    with pytest.raises(checks.PickError) as err:
        checks.pick("mutation", checks.info(lacking).id)
    assert checks.lacks(lacking, "mutation") in str(err.value) and f"valid: {', '.join(valid)}" in str(err.value)


def test_a_typo_gets_a_close_match() -> None:
    good = checks.info(checks.with_capability("scan")[0]).id
    with pytest.raises(checks.PickError, match=f"did you mean {good!r}"):
        checks.pick("scan", good[:-1])


def test_sole_refuses_a_choice_among_several(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "with_capability", lambda kind: list(checks.REGISTRY[:2]))
    with pytest.raises(checks.PickError, match="--check is required"):
        checks.pick("mutation", sole=True)
    assert checks.pick("mutation") == checks.REGISTRY[0]


def test_no_command_picks_a_check_by_hand() -> None:
    """The scan, mutation, GPU and history commands go through ``pick``: no module of the harness looks a check
    up by its id (``folder_of``) or chooses among the checks with a capability on its own."""
    texts = {p: p.read_text(encoding="utf-8") for p in (ROOT / "matrix").rglob("*.py") if "backports" not in p.parts}
    assert [p.name for p, t in texts.items() if "folder_of(" in t] == []
    assert sum("checks.pick(" in t for t in texts.values()) == 4
