"""``--confirm`` wiring: which releases are built, how runtime and static verdicts merge, the exit code.

The runtime check itself runs on real builds in ``test_confirm_integration.py``; here a runner that
returns set verdicts stands in for it, so that every merge case (agree, disagree, decide an unknown,
fail to build) is exercised without building anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from matrix import cli, scan
from matrix.scan import confirm
from matrix.scan.confirm import RuntimeVerdict
from tests.scan.fakes import FakeHost, clients, page, wheel
from tests.scan.test_scan_unit import FIXED_CLAMP, VULNERABLE

UNREADABLE = "class UnslothFusedLoss:\n    def forward(self):\n        print 'old'\n"  # Python 2: unknown


def row(version: str, verdict: str) -> dict[str, Any]:
    return {"version": version, "verdict": verdict, "yanked": False, "reason": "static (test)",
            "confirmed_by": "static-only", "file": None}


def test_pick_boundaries_and_newest_unknowns_capped() -> None:
    rows = [row("1", "vulnerable"), row("2", "unknown"), row("3", "vulnerable"), row("4", "fixed"),
            row("5", "unknown"), row("6", "fixed"), row("7", "unknown"), row("8", "unknown")]
    assert confirm.pick(rows, include_yanked=False, max_unknown=2) == [
        ("3", "boundary"), ("4", "boundary"), ("7", "static verdict unknown"), ("8", "static verdict unknown")]
    assert [v for v, _ in confirm.pick(rows, include_yanked=False, max_unknown=0)] == ["3", "4"]


@pytest.mark.parametrize(("static", "runtime", "verdict", "by"), [
    ("vulnerable", "vulnerable", "vulnerable", "runtime"),
    ("fixed", "fixed", "fixed", "runtime"),
    ("fixed", "vulnerable", "inconsistent", "runtime"),
    ("absent", "fixed", "inconsistent", "runtime"),
    ("unknown", "fixed", "fixed", "runtime"),
    ("fixed", "error", "fixed", "static-only"),
])
def test_merge(static: str, runtime: str, verdict: str, by: str) -> None:
    got = confirm.merge(row("1", static), RuntimeVerdict("1", runtime, f"runtime said {runtime}", 1.0))
    assert (got["verdict"], got["confirmed_by"], got["static_verdict"], got["runtime"]["verdict"]) == (
        verdict, by, static, runtime)
    if verdict == "inconsistent":
        assert got["reason"].startswith(f"INCONSISTENT: static says {static}")


@pytest.fixture
def host() -> FakeHost:
    zoo = {}
    for v, src in (("2026.1.0", VULNERABLE), ("2026.2.0", VULNERABLE), ("2026.3.0", FIXED_CLAMP),
                   ("2026.4.0", UNREADABLE)):
        files = {"unsloth_zoo/__init__.py": "", "unsloth_zoo/fused_losses/cross_entropy_loss.py": src}
        zoo[f"unsloth_zoo-{v}-py3-none-any.whl"] = wheel("unsloth_zoo", v, files)
    return FakeHost({"unsloth-zoo": page("unsloth-zoo", zoo)}, zoo)


def runner_saying(verdicts: dict[str, str], seen: list[str]) -> Any:
    def run(version: str, workdir: Path, **_: Any) -> RuntimeVerdict:
        seen.append(version)
        return RuntimeVerdict(version, verdicts[version], f"runtime {verdicts[version]} (test)", 2.0, "2.12.1")
    return run


def test_confirmed_scan_records_confirmed_by(host: FakeHost, tmp_path: Path) -> None:
    index, fetcher = clients(host, tmp_path)
    seen: list[str] = []
    lines: list[str] = []
    doc = scan.run(scan.ScanOptions(skip_unsloth=True, confirm=True), cache=tmp_path, index=index, fetcher=fetcher,
                   log=lines.append, runner=runner_saying({"2026.2.0": "vulnerable", "2026.3.0": "fixed",
                                                          "2026.4.0": "fixed"}, seen))
    assert seen == ["2026.2.0", "2026.3.0", "2026.4.0"]  # both boundary sides, then the unknown one
    by = {z["version"]: (z["verdict"], z["confirmed_by"]) for z in doc["zoo"]}
    assert by == {"2026.1.0": ("vulnerable", "static-only"), "2026.2.0": ("vulnerable", "runtime"),
                  "2026.3.0": ("fixed", "runtime"), "2026.4.0": ("fixed", "runtime")}
    assert doc["timeline"]["fixed_since"] == "2026.3.0"
    assert doc["timeline"]["fixed_since_confirmed_by"] == "runtime"
    assert doc["timeline"]["last_vulnerable_confirmed_by"] == "runtime"
    assert doc["stats"]["confirmed"] == 3 and doc["options"]["confirm"] is True
    assert any(line.startswith("confirm [2/3] unsloth_zoo 2026.3.0 (boundary): static fixed, runtime fixed -> fixed")
               for line in lines)
    assert "fixed since: 2026.3.0 (runtime)" in scan.summary(doc)


def test_disagreement_is_inconsistent_and_exits_1(host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # main() builds its own client from the configured index: route httpx's transport to the in-memory host.
    monkeypatch.setenv("UV_DEFAULT_INDEX", "https://index.invalid/simple")
    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", lambda self, request: host.handler(request))
    seen: list[str] = []
    monkeypatch.setattr(confirm, "run_runtime", runner_saying(
        {"2026.2.0": "vulnerable", "2026.3.0": "vulnerable", "2026.4.0": "fixed"}, seen))
    out = tmp_path / "out"
    code = cli.main(["scan", "--no-unsloth", "--confirm", "--confirm-max", "0", "--out", str(out),
                      "--cache", str(tmp_path / "cache")])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert seen == ["2026.2.0", "2026.3.0"]  # --confirm-max 0: the unknown release is not built
    doc = json.loads((out / "scan.json").read_text())
    z3 = next(z for z in doc["zoo"] if z["version"] == "2026.3.0")
    assert z3["verdict"] == "inconsistent" and z3["static_verdict"] == "fixed"
    assert doc["timeline"]["fixed_since"] is None  # nothing after the inconsistent release is fixed
    assert "INCONSISTENT (static and runtime disagree): 2026.3.0" in captured.out
    assert "INCONSISTENT" in captured.err
    assert "> **INCONSISTENT: the static and runtime detectors disagree on 1 release(s): 2026.3.0." in (
        out / "scan.md").read_text()


def test_confirm_max_must_not_be_negative(host: FakeHost, tmp_path: Path) -> None:
    index, fetcher = clients(host, tmp_path)
    with pytest.raises(scan.ScanError, match="--confirm-max -1"):
        scan.run(scan.ScanOptions(confirm=True, confirm_max=-1), cache=tmp_path, index=index, fetcher=fetcher)
