"""The scan of a second check through the same path: ``--check cpu-ce-masked-nan``.

Which zoo releases carry ``unsloth_zoo/cpu/ops.py`` and what the check's own
static detector says of its kernel; no guard exists for that kernel, so the
unsloth side says ``n/a`` and a vulnerable floor is ``exposed``. Sources are
written here to the shapes the detector's docstring names (a NaN divisor in
the ``num_items_in_batch is None`` branch; a floored one).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from matrix import scan
from tests.scan.fakes import FakeHost, clients, page, wheel
from tests.scan.test_scan_unit import ROOT, VULNERABLE

CPU = "cpu-ce-masked-nan"
OPS = "unsloth_zoo/cpu/ops.py"
CPU_VULNERABLE = textwrap.dedent("""
    import torch
    def chunked_linear_cross_entropy(hidden, weight, labels, num_items_in_batch=None, chunk_rows=1024):
        total = torch.zeros(())
        if num_items_in_batch is None:
            n = (labels != -100).sum()
            divisor = n if n > 0 else float("nan")
        else:
            divisor = num_items_in_batch
        return total / divisor
""")
CPU_FIXED = CPU_VULNERABLE.replace('n = (labels != -100).sum()\n        divisor = n if n > 0 else float("nan")',
                                   "divisor = (labels != -100).sum().clamp(min=1)")


def zoo_wheel(version: str, ops: str | None) -> tuple[str, bytes]:
    files = {"unsloth_zoo/__init__.py": "", "unsloth_zoo/fused_losses/cross_entropy_loss.py": VULNERABLE}
    if ops is not None:
        files |= {"unsloth_zoo/cpu/__init__.py": "from .ops import *\n", OPS: ops}
    return f"unsloth_zoo-{version}-py3-none-any.whl", wheel("unsloth_zoo", version, files)


@pytest.fixture
def host() -> FakeHost:
    zoo = dict([zoo_wheel("2026.9.0", None), zoo_wheel("2026.10.0", CPU_VULNERABLE),
                zoo_wheel("2026.11.0", CPU_FIXED)])
    uns = {"unsloth-2026.10.0-py3-none-any.whl": wheel("unsloth", "2026.10.0", {
        "unsloth/__init__.py": "import unsloth_zoo\n"}, "Requires-Dist: unsloth_zoo>=2026.10.0\n")}
    return FakeHost({"unsloth-zoo": page("unsloth-zoo", zoo), "unsloth": page("unsloth", uns)}, {**zoo, **uns})


def run(host: FakeHost, cache: Path, **kw: Any) -> dict[str, Any]:
    index, fetcher = clients(host, cache)
    return scan.run(scan.ScanOptions(**kw), cache=cache, index=index, fetcher=fetcher, log=lambda _: None)


def test_the_cpu_kernel_is_scanned_through_the_same_path(host: FakeHost, tmp_path: Path) -> None:
    doc = run(host, tmp_path, check=CPU)
    assert doc["check"] == CPU and doc["target"]["file"] == OPS
    verdicts = {z["version"]: z["verdict"] for z in doc["zoo"]}
    assert verdicts == {"2026.9.0": "absent", "2026.10.0": "vulnerable", "2026.11.0": "fixed"}
    assert next(z for z in doc["zoo"] if z["version"] == "2026.9.0")["reason"].startswith(f"no {OPS} in ")
    assert doc["timeline"]["fixed_since"] == "2026.11.0"
    (u,) = doc["unsloth"]
    assert u["guard"]["state"] == "n/a" and "names no guard" in u["guard"]["evidence"][0]
    assert (u["floor"]["version"], u["floor"]["verdict"], u["exposure"]) == ("2026.10.0", "vulnerable", "exposed")
    schema = __import__("json").loads((ROOT / "reports" / "scan.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)
    assert f"Kernel read in each zoo release: `{OPS}`" in scan.write(doc, tmp_path / "out")[1].read_text()


def test_two_checks_share_a_cache_without_sharing_extracts(host: FakeHost, tmp_path: Path) -> None:
    fused = run(host, tmp_path, skip_unsloth=True)  # the default check first: its extracts hold no cpu/ops.py
    assert fused["check"] != CPU
    cpu = run(host, tmp_path, check=CPU, skip_unsloth=True)
    assert {z["version"]: z["verdict"] for z in cpu["zoo"]}["2026.10.0"] == "vulnerable"


def test_confirm_is_na_for_a_target_without_a_runtime_detector(host: FakeHost, tmp_path: Path) -> None:
    with pytest.raises(scan.ScanError, match=f"--confirm: n/a for check {CPU}: its scan target names no runtime"):
        run(host, tmp_path, check=CPU, confirm=True)


def test_an_unknown_check_lists_the_valid_ones(host: FakeHost, tmp_path: Path) -> None:
    with pytest.raises(scan.ScanError, match=r"--check 'cpu-ce-masked': no registered check has this id; valid: "
                                             r".*cpu-ce-masked-nan.*did you mean 'cpu-ce-masked-nan'"):
        run(host, tmp_path, check="cpu-ce-masked")
