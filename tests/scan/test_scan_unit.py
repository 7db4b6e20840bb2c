"""Unit tests of the wide scan: small wheels and sdists built here, served by an in-memory host, no network."""

from __future__ import annotations

import io
import json
import stat
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from matrix import cli, scan
from matrix.errors import IndexLookupError
from matrix.index import IndexClient
from tests.scan.fakes import FILES, INDEX, FakeHost, clients, page, sdist, wheel

ROOT = Path(__file__).resolve().parents[2]

VULNERABLE = textwrap.dedent("""
    import torch
    class UnslothFusedLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None,
                    n_items=None, scaling=None, shift_labels=True, target_gb=None, torch_compile=True,
                    overwrite=False, extra_kwargs=None):
            total = loss_function(hidden_states, lm_head_weight, labels)
            divisor = n_items if n_items is not None else (labels != -100).sum()
            return total / divisor
""")
# Fixed means both divisors are floored: the label count and the caller's n_items (a trainer sends 0).
FIXED_CLAMP = VULNERABLE.replace("        return total / divisor", "        return total / divisor.clamp(min=1)")
FIXED_BRANCH = VULNERABLE.replace("        return total / divisor\n", textwrap.indent(textwrap.dedent("""
    if divisor == 0:
        return total * 0.0
    return total / divisor
"""), " " * 8))
# The guard lives in another module of the wheel: only a detector that reads across modules calls it fixed.
HELPER_MODULE = "def nonzero(x):\n    return x.clamp_min(1)\n"
FIXED_ELSEWHERE = "from unsloth_zoo.fused_losses.guards import nonzero\n" + VULNERABLE.replace(
    "        return total / divisor", "        return total / nonzero(divisor)")
GUARD_SRC = (ROOT / "matrix/backports/unsloth-guard/files/fused_ce_guard.py").read_text(encoding="utf-8")
FUSED = scan.scanned("fused-ce-masked-nan")  # the scan's default check: the first registered with a scan target
CE_MEMBER = FUSED.target.file
GUARD_MEMBER = FUSED.target.guard.member


def zoo_wheel(version: str, ce: str | None, extra: dict[str, str] | None = None) -> tuple[str, bytes]:
    files = {"unsloth_zoo/__init__.py": "", **(extra or {})}
    if ce is not None:
        files[CE_MEMBER] = ce
    return f"unsloth_zoo-{version}-py3-none-any.whl", wheel("unsloth_zoo", version, files)


def unsloth_wheel(version: str, zoo_req: str, extra: dict[str, str] | None = None) -> tuple[str, bytes]:
    files = {"unsloth/__init__.py": "import unsloth_zoo\n", "unsloth/models/llama.py": "x = 1\n", **(extra or {})}
    meta = f"Requires-Dist: {zoo_req}\nRequires-Dist: torch>=2.4\nProvides-Extra: colab\n"
    return f"unsloth-{version}-py3-none-any.whl", wheel("unsloth", version, files, meta)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    zoo = dict([
        zoo_wheel("2026.1.0", None),
        zoo_wheel("2026.2.0", VULNERABLE),
        zoo_wheel("2026.3.0", FIXED_ELSEWHERE, {"unsloth_zoo/fused_losses/guards.py": HELPER_MODULE,
                                                "unsloth_zoo/fused_losses/__init__.py": "",
                                                "unsloth_zoo/unrelated.py": "import os\n"}),
        zoo_wheel("2026.3.1", VULNERABLE),  # a regression
        zoo_wheel("2026.4.0", FIXED_CLAMP),
        zoo_wheel("2026.5.0", FIXED_CLAMP),  # yanked below
    ])
    zoo["unsloth_zoo-2026.6.0.tar.gz"] = sdist("unsloth_zoo", "2026.6.0", {CE_MEMBER: FIXED_BRANCH})
    uns = dict([
        unsloth_wheel("2026.2.0", "unsloth_zoo>=2026.2.0"),
        unsloth_wheel("2026.4.0", "unsloth_zoo>=2026.4.0"),
        unsloth_wheel("2026.4.1", "unsloth_zoo>=2026.2.0", {
            GUARD_MEMBER: GUARD_SRC,
            "unsloth/__init__.py": "from .fused_ce_guard import install_at_import\n",
            "unsloth-2026.4.1.dist-info/SKEWMATRIX_BACKPORT.json": json.dumps({"backport": "unsloth-guard"})}),
        unsloth_wheel("2026.4.2", "unsloth_zoo>=2026.2.0", {"unsloth/patch.py": textwrap.dedent("""
            from unsloth_zoo.fused_losses.cross_entropy_loss import UnslothFusedLoss
            def _fwd(ctx, *a): ...
            UnslothFusedLoss.forward = staticmethod(_fwd)
        """)}),
        unsloth_wheel("2026.4.3", "unsloth-zoo ; extra == 'colab'"),
    ])
    host = FakeHost({"unsloth-zoo": page("unsloth-zoo", zoo, yanked={"unsloth_zoo-2026.5.0-py3-none-any.whl"}),
                     "unsloth": page("unsloth", uns)}, {**zoo, **uns})
    return {"cache": tmp_path / "cache", "host": host, "tmp": tmp_path}


def run(world: dict[str, Any], **kw: Any) -> dict[str, Any]:
    index, fetcher = clients(world["host"], world["cache"], world.get("url", INDEX), world.get("full_max"))
    world["index"], world["lines"] = index, []
    return scan.run(scan.ScanOptions(**kw), cache=world["cache"], index=index, fetcher=fetcher,
                    log=world["lines"].append)


# --------------------------------------------------------------------------- zoo


def test_zoo_verdicts_timeline_and_yanked(world: dict[str, Any]) -> None:
    doc = run(world)
    verdicts = {z["version"]: (z["verdict"], z["yanked"], z["confirmed_by"]) for z in doc["zoo"]}
    assert verdicts == {
        "2026.1.0": ("absent", False, "static-only"), "2026.2.0": ("vulnerable", False, "static-only"),
        "2026.3.0": ("fixed", False, "static-only"), "2026.3.1": ("vulnerable", False, "static-only"),
        "2026.4.0": ("fixed", False, "static-only"), "2026.5.0": ("fixed", True, "static-only"),
        "2026.6.0": ("fixed", False, "static-only"),
    }
    assert doc["timeline"] == {
        "first_fixed": "2026.3.0", "fixed_since": "2026.4.0", "fixed_since_confirmed_by": "static-only",
        "last_vulnerable": "2026.3.1", "last_vulnerable_confirmed_by": "static-only",
        "unknown_after_fixed_since": [], "regressions": [{"version": "2026.3.1", "after_fixed": "2026.3.0"}]}
    sd = next(z for z in doc["zoo"] if z["version"] == "2026.6.0")
    assert sd["file"]["kind"] == "sdist" and sd["file"]["integrity"] == "sha256"


def test_the_guard_in_another_module_is_read_and_kept(world: dict[str, Any]) -> None:
    doc = run(world, skip_unsloth=True)
    z3 = next(z for z in doc["zoo"] if z["version"] == "2026.3.0")
    assert z3["verdict"] == "fixed", z3["reason"]
    cached = next(p for p in (world["cache"] / "extract").rglob("*.json")
                  if json.loads(p.read_text())["filename"].startswith("unsloth_zoo-2026.3.0"))
    members = set(json.loads(cached.read_text())["members"])
    # the helper module is kept (imported by the CE module); a module nothing imports is not
    assert "unsloth_zoo/fused_losses/guards.py" in members and "unsloth_zoo/unrelated.py" not in members


def test_schema_validates_the_document(world: dict[str, Any]) -> None:
    doc = run(world)
    schema = json.loads((ROOT / "reports/scan.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert schema["$id"] == "urn:skewmatrix:scan:2" and doc["schema"] == "skewmatrix.scan/2"


def test_zoo_spec_selects_the_table(world: dict[str, Any]) -> None:
    doc = run(world, zoo=">=2026.3,<2026.4", skip_unsloth=True)
    assert [z["version"] for z in doc["zoo"]] == ["2026.3.0", "2026.3.1"]


def test_progress_lines_while_reading(world: dict[str, Any]) -> None:
    run(world)
    n = 7 + 5
    reads = [line for line in world["lines"] if line.startswith("[") and "→" in line]
    assert len(reads) == n
    assert {line.split("]")[0] + "]" for line in reads} == {f"[{k}/{n}]" for k in range(1, n + 1)}
    assert any(line.startswith("[") and "unsloth_zoo 2026.3.1 → vulnerable (" in line for line in reads)
    assert any("unsloth 2026.4.1 → guard present, zoo >=2026.2.0 (" in line for line in reads)
    assert world["lines"][-1].startswith(f"[{n}/{n}] read {n} release(s): {n} read now, 0 from the cache")


def test_warm_run_uses_the_cache_only(world: dict[str, Any]) -> None:
    run(world)
    before = len(world["host"].requests)
    doc = run(world)
    # only the two index pages are asked for again; every file comes from the cache
    assert [r.url.path for r in world["host"].requests[before:]] == ["/simple/unsloth-zoo/", "/simple/unsloth/"]
    assert doc["stats"]["downloaded_bytes"] == 0 and doc["stats"]["cache_hits"] == 12
    assert world["lines"][-1].endswith("0 read now, 12 from the cache, in " + world["lines"][-1].split(" in ")[-1])
    assert not [line for line in world["lines"] if "→" in line]  # cached releases print no line


def test_range_reads_of_large_wheels(world: dict[str, Any]) -> None:
    world["full_max"] = 100  # every wheel is "large": read by range
    doc = run(world)
    wheel_reqs = [(f, r) for f, r in world["host"].file_requests() if f.endswith(".whl")]
    assert wheel_reqs and all(r is not None and r.startswith("bytes=") for _, r in wheel_reqs)
    wheels = [z for z in doc["zoo"] if z["file"]["kind"] == "wheel"]
    assert {z["file"]["integrity"] for z in wheels} == {"crc32+record"}
    assert next(z for z in doc["zoo"] if z["version"] == "2026.3.1")["verdict"] == "vulnerable"
    assert next(u for u in doc["unsloth"] if u["version"] == "2026.4.1")["guard"]["state"] == "present"


def test_a_server_ignoring_range_gets_a_whole_download(world: dict[str, Any]) -> None:
    world["full_max"] = 100
    world["host"].ignore_range = True
    doc = run(world, skip_unsloth=True)
    assert {z["file"]["integrity"] for z in doc["zoo"] if z["file"]["kind"] == "wheel"} == {"sha256"}


def test_a_member_not_matching_record_is_unknown(world: dict[str, Any]) -> None:
    """A range read cannot check the file's sha256: each member is checked against the wheel's RECORD."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(CE_MEMBER, VULNERABLE)
        zf.writestr("unsloth_zoo-2026.2.0.dist-info/RECORD",
                    f"{CE_MEMBER},{scan.record_digest(FIXED_CLAMP.encode())},1\n")
    name = "unsloth_zoo-2026.2.0-py3-none-any.whl"
    world["host"].blobs[name] = buf.getvalue()
    zoo = {n: b for n, b in world["host"].blobs.items() if n.startswith("unsloth_zoo")}
    world["host"].pages["unsloth-zoo"] = page("unsloth-zoo", zoo)
    world["full_max"] = 100
    doc = run(world, skip_unsloth=True)
    row = next(z for z in doc["zoo"] if z["version"] == "2026.2.0")
    assert row["verdict"] == "unknown" and "does not match the wheel's RECORD" in row["reason"]


def test_sha256_mismatch_is_an_unknown_verdict(world: dict[str, Any]) -> None:
    zoo = {n: b for n, b in world["host"].blobs.items() if n.startswith("unsloth_zoo")}
    world["host"].pages["unsloth-zoo"] = page("unsloth-zoo", zoo, bad_sha={"unsloth_zoo-2026.2.0-py3-none-any.whl"})
    doc = run(world, skip_unsloth=True)
    z = next(z for z in doc["zoo"] if z["version"] == "2026.2.0")
    assert z["verdict"] == "unknown" and "does not match the index" in z["reason"]


def test_release_without_files_is_listed_unknown(world: dict[str, Any]) -> None:
    world["host"].pages["unsloth-zoo"]["versions"] = ["2026.9.9"]
    doc = run(world, skip_unsloth=True)
    z = next(z for z in doc["zoo"] if z["version"] == "2026.9.9")
    assert z["verdict"] == "unknown" and "no wheel or sdist" in z["reason"]


def test_a_file_name_of_another_project_is_ignored(world: dict[str, Any]) -> None:
    _name, data = zoo_wheel("2026.7.0", FIXED_CLAMP)
    world["host"].blobs["unsloth_zoo_extra-2026.8.0-py3-none-any.whl"] = data
    world["host"].pages["unsloth-zoo"]["files"].append(
        {"filename": "unsloth_zoo_extra-2026.8.0-py3-none-any.whl", "url": "x", "hashes": {}, "yanked": False})
    doc = run(world, skip_unsloth=True)
    assert "2026.8.0" not in {z["version"] for z in doc["zoo"]}


def test_index_error_falls_back_to_the_cached_page(world: dict[str, Any]) -> None:
    run(world)
    world["host"].fail = True
    doc = run(world)
    assert doc["index"]["origin"] == {"unsloth-zoo": "cache", "unsloth": "cache"}
    assert any("unreachable" in w for w in doc["warnings"])
    assert len(doc["zoo"]) == 7 and len(doc["unsloth"]) == 5


def test_index_error_with_nothing_cached_is_a_clean_error(world: dict[str, Any]) -> None:
    world["host"].fail = True
    with pytest.raises(scan.ScanError, match=r"unsloth-zoo: the index .* unreachable .*nothing cached"):
        run(world)


# --------------------------------------------------------------------------- credentials


def test_credentials_in_the_index_url_are_used_and_never_printed(world: dict[str, Any]) -> None:
    world["url"] = "https://user:s3cr%40t@index.invalid/simple"
    doc = run(world)
    assert doc["index"]["url"] == INDEX
    auth = {r.headers.get("Authorization") for r in world["host"].requests}
    assert auth == {httpx.BasicAuth("user", "s3cr@t")._auth_header}  # every request: same realm
    text = json.dumps(doc) + "\n".join(world["lines"]) + scan.summary(doc)
    assert "s3cr" not in text and "user:" not in text


def test_credentials_stay_in_their_realm(world: dict[str, Any]) -> None:
    """Files on another host (a CDN) get no Authorization header, like uv."""
    world["url"] = "https://user:tok@index.invalid/simple"
    for p in world["host"].pages.values():
        for f in p["files"]:
            f["url"] = "https://cdn.invalid/files/" + f["filename"]
    run(world, skip_unsloth=True)
    by_host = {(r.url.host, r.headers.get("Authorization") is not None) for r in world["host"].requests}
    assert by_host == {("index.invalid", True), ("cdn.invalid", False)}


def test_an_unreachable_index_with_credentials_is_redacted(world: dict[str, Any]) -> None:
    world["url"] = "https://user:tok3n@index.invalid/simple"
    world["host"].fail = True
    with pytest.raises(scan.ScanError) as err:
        run(world)
    assert "tok3n" not in str(err.value) and "index.invalid/simple" in str(err.value)


# --------------------------------------------------------------------------- unsloth


def test_unsloth_floor_exposure_and_guard(world: dict[str, Any]) -> None:
    doc = run(world)
    got = {u["version"]: (u["zoo_requirement"]["plain"], (u["floor"] or {}).get("version"), u["exposure"],
                          u["guard"]["state"]) for u in doc["unsloth"]}
    assert got == {
        "2026.2.0": (">=2026.2.0", "2026.2.0", "exposed", "absent"),
        "2026.4.0": (">=2026.4.0", "2026.4.0", "safe", "absent"),
        "2026.4.1": (">=2026.2.0", "2026.2.0", "guarded", "present"),
        "2026.4.2": (">=2026.2.0", "2026.2.0", "guarded", "present"),
        "2026.4.3": (None, None, "not-required", "absent"),
    }
    u = next(u for u in doc["unsloth"] if u["version"] == "2026.4.3")
    assert u["zoo_requirement"]["extras"] == {"colab": ""}
    assert u["extra_floors"]["colab"]["version"] == "2026.1.0" and u["extra_exposure"] == {"colab": "safe"}
    guarded = next(u for u in doc["unsloth"] if u["version"] == "2026.4.1")
    assert guarded["guard"]["kind"] == "skewmatrix-backport"
    assert next(u for u in doc["unsloth"] if u["version"] == "2026.2.0")["floor"]["admits_vulnerable"] == [
        "2026.2.0", "2026.3.1"]


def test_yanked_zoo_is_not_a_floor_unless_asked(world: dict[str, Any]) -> None:
    uns = dict([unsloth_wheel("2026.5.0", "unsloth_zoo>=2026.5.0")])
    world["host"].blobs.update(uns)
    world["host"].pages["unsloth"] = page("unsloth", uns)
    doc = run(world)
    assert doc["unsloth"][0]["floor"]["version"] == "2026.6.0"
    doc = run(world, include_yanked=True)
    assert doc["unsloth"][0]["floor"]["version"] == "2026.5.0"


@pytest.mark.parametrize(("source", "state"), [
    ("UnslothFusedLoss.forward = staticmethod(f)\n", "present"),
    ("import m\nm.UnslothFusedLoss.forward = f\n", "present"),
    ("setattr(UnslothFusedLoss, 'forward', f)\n", "present"),
    ("cls = getattr(mod, 'UnslothFusedLoss')\ncls.forward = f\n", "present"),
    ("K = mod.UnslothFusedLoss\nsetattr(K, 'forward', f)\n", "present"),
    ("exec('UnslothFusedLoss.forward = patched')\n", "present"),
    ("x = UnslothFusedLoss\ny.forward = f\n", "unknown"),
    ("isinstance(x, UnslothFusedLoss)\nsetattr(obj, name, value)\n", "unknown"),
    ("# UnslothFusedLoss.forward is fine\nmodel.forward = f\n", "absent"),
    ("isinstance(x, UnslothFusedLoss)\n", "absent"),
    ("UnslothFusedLoss.forward == f\n", "absent"),
    ("UnslothFusedLoss.forward = (\n", "unknown"),
])
def test_guard_heuristic(source: str, state: str) -> None:
    assert scan.guard_in_source(source, "m.py", FUSED.target.guard)[0] == state


def test_our_guard_unwired_is_unknown() -> None:
    ex = scan.Extract("u.whl", None, "sha256", {GUARD_MEMBER: GUARD_SRC, scan.INIT_MEMBER: ""}, 2)
    g = scan.guard_state(ex, FUSED)
    assert g["state"] == "unknown" and "never imports it" in g["evidence"][-1]


# --------------------------------------------------------------------------- compare with cells, CLI, files


def cell(cell_id: str, version: str, zoo_state: str, source: str = "pypi", digest: str | None = None) -> dict:
    return {"cell_id": cell_id, "builds": {"zoo": {"source": source, "version": version, "digest": digest}},
            "verdicts": {"fused-ce-masked-nan": {"zoo": zoo_state}}}


def test_compare_with_cells(world: dict[str, Any]) -> None:
    doc = run(world, skip_unsloth=True)
    rows = scan.compare_with_cells(doc, [
        cell("a__z2", "2026.2.0", "vulnerable"), cell("a__z3", "2026.3.0", "vulnerable"),
        cell("a__z4", "2026.4.0", "unknown"), cell("a__bp", "2026.2.0", "fixed", source="backport"),
        cell("a__zx", "2026.4.0", "fixed", digest="0" * 64), cell("a__z9", "2030.1", "fixed"),
    ])
    assert [(r["cell_id"], r["status"]) for r in rows] == [
        ("a__z2", "consistent"), ("a__z3", "inconsistent"), ("a__z4", "not-comparable"),
        ("a__zx", "different-build")]


def test_compare_computes_the_dynamic_state_of_a_raw_cell() -> None:
    raw = {"cell_id": "c", "builds": {"zoo": {"source": "pypi", "version": "2026.2.0", "digest": None}},
           "checks": {"fused-ce-masked-nan": {
               "static": {"verdict": "vulnerable", "reason": "r"},
               "steps": [{"name": "runtime", "status": "ok", "result": {"verdict": "vulnerable"}}]}}}
    doc = {"zoo": [{"version": "2026.2.0", "verdict": "vulnerable", "reason": "r", "file": None}]}
    assert scan.compare_with_cells(doc, [raw])[0]["status"] == "consistent"


def test_main_bad_spec_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["scan", "--zoo", ">=>1", "--out", str(tmp_path), "--cache", str(tmp_path)]) == 2
    assert "--zoo '>=>1': not a valid version specifier set" in capsys.readouterr().err


def test_main_index_unreachable_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", "https://u:pw123@index.invalid/simple")
    monkeypatch.setattr(IndexClient, "_page", lambda self, p: (_ for _ in ()).throw(
        IndexLookupError(f"{p}: the index {self.url} is unreachable (test)")))
    assert cli.main(["scan", "--out", str(tmp_path), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "unsloth-zoo: the index https://index.invalid/simple is unreachable" in err and "pw123" not in err


def test_write_files_0644(world: dict[str, Any], tmp_path: Path) -> None:
    doc = run(world)
    paths = scan.write(doc, tmp_path / "out")
    assert [p.name for p in paths] == ["scan.json", "scan.md"]
    assert [stat.S_IMODE(p.stat().st_mode) for p in paths] == [0o644, 0o644]
    assert json.loads(paths[0].read_text())["schema"] == "skewmatrix.scan/2"
    assert "fixed since: 2026.4.0 (static-only); first fixed: 2026.3.0" in scan.summary(doc)
    cached = list((world["cache"]).rglob("*.json"))
    assert cached and {stat.S_IMODE(p.stat().st_mode) for p in cached} == {0o644}


def test_no_file_url_in_pages_is_joined_with_credentials(world: dict[str, Any]) -> None:
    world["url"] = "https://user:tok@index.invalid/simple"
    index, _ = clients(world["host"], world["cache"], world["url"])
    releases, _ = index.releases("unsloth-zoo")
    assert all(f.url.startswith(FILES) for r in releases for f in r.files)
