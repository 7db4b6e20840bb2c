"""Unit tests of the wide static scan: small wheels and sdists built here, a fake index, no network."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from matrix import scan
from matrix.errors import IndexLookupError
from probes.checks.fused_ce_masked_nan.static import analyze_source

ROOT = Path(__file__).resolve().parents[2]
INDEX = "https://index.invalid/simple"

VULNERABLE = textwrap.dedent("""
    import torch
    class UnslothFusedLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, loss_function, hidden_states, lm_head_weight, lm_head_bias, labels, mask=None,
                    n_items=None, scaling=None, shift_labels=True, target_gb=None, torch_compile=True,
                    overwrite=False, extra_kwargs=None):
            divisor = n_items if n_items is not None else (labels != -100).sum()
            return total / divisor
""")
FIXED_CLAMP = VULNERABLE.replace("(labels != -100).sum()", "(labels != -100).sum().clamp(min=1)")
FIXED_HELPER = textwrap.dedent("""
    def _nonzero_count(x):
        return x.clamp_min(1)
""") + VULNERABLE.replace("(labels != -100).sum()", "_nonzero_count((labels != -100).sum())")
FIXED_BRANCH = VULNERABLE.replace("        return total / divisor\n", textwrap.indent(textwrap.dedent("""
    if divisor == 0:
        return total * 0.0
    return total / divisor
"""), " " * 8))
FIXED_MAX = VULNERABLE.replace("(labels != -100).sum()", "max((labels != -100).sum(), 1)")
FIXED_WHERE = VULNERABLE.replace("(labels != -100).sum()",
                                 "torch.where((labels != -100).sum() == 0, 1, (labels != -100).sum())")
NO_CLASS = "def unrelated():\n    return 1\n"
PY2 = "class UnslothFusedLoss:\n    def forward(self):\n        print 'old'\n"


# --------------------------------------------------------------------------- the static detector on snippets


@pytest.mark.parametrize(("source", "verdict"), [
    (VULNERABLE, "vulnerable"), (FIXED_CLAMP, "fixed"), (FIXED_HELPER, "fixed"), (FIXED_BRANCH, "fixed"),
    (FIXED_MAX, "fixed"), (FIXED_WHERE, "fixed"), (NO_CLASS, "absent"), (PY2, "unknown"),
    ("class UnslothFusedLoss:\n    pass\n", "absent"),
    ("class UnslothFusedLoss:\n    def forward(ctx, x):\n        return x / 2\n", "unknown"),
])
def test_static_detector_snippets(source: str, verdict: str) -> None:
    assert analyze_source(source).verdict == verdict


# --------------------------------------------------------------------------- fakes


def wheel(name: str, version: str, files: dict[str, str], metadata: str = "") -> bytes:
    buf = io.BytesIO()
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}")
        records = [f"{p},{scan._record_digest(t.encode())},{len(t)}" for p, t in files.items()]
        zf.writestr(f"{dist}/RECORD", "\n".join([*records, f"{dist}/RECORD,,"]) + "\n")
    return buf.getvalue()


def sdist(name: str, version: str, files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path, text in {**files, "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{path}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class FakeResponse(io.BytesIO):
    def __init__(self, data: bytes, status: int) -> None:
        super().__init__(data)
        self.status = status


class FakeFetcher(scan.Fetcher):
    """Serves files from memory, honouring Range like a real file host."""

    def __init__(self, cache: Path, blobs: dict[str, bytes], full_max: int = scan.FULL_DOWNLOAD_MAX) -> None:
        super().__init__(cache, full_max)
        self.blobs = blobs
        self.opened: list[tuple[str, str | None]] = []

    def _open(self, url: str, headers: dict[str, str] | None = None) -> Any:
        rng = (headers or {}).get("Range")
        self.opened.append((url, rng))
        if url not in self.blobs:
            raise scan.FetchError(f"{url}: HTTP 404")
        data = self.blobs[url]
        if rng:
            start, end = (int(x) for x in rng.removeprefix("bytes=").split("-"))
            return FakeResponse(data[start:end + 1], 206)
        return FakeResponse(data, 200)


class FakeIndex(scan.ScanIndex):
    """Project pages from memory; ``fail`` makes the 'network' raise like IndexClient does."""

    def __init__(self, cache: Path, pages: dict[str, dict[str, Any]]) -> None:
        super().__init__(INDEX, cache=cache)
        self.pages = pages
        self.fail = False

    def _page(self, project: str) -> dict[str, Any]:
        if self.fail:
            raise IndexLookupError(f"{project}: the index {INDEX} is unreachable (test)")
        return self.pages[project]


def page(project: str, files: dict[str, bytes], yanked: set[str] = frozenset(), bad_sha: set[str] = frozenset(),
         versions: list[str] | None = None) -> dict[str, Any]:
    out = []
    for fname, data in files.items():
        sha = hashlib.sha256(data + (b"x" if fname in bad_sha else b"")).hexdigest()
        out.append({"filename": fname, "url": f"../../files/{fname}", "hashes": {"sha256": sha}, "size": len(data),
                    "yanked": "broken" if fname in yanked else False})
    return {"name": project, "files": out, "versions": versions or []}


def zoo_wheel(version: str, ce: str | None) -> tuple[str, bytes]:
    files = {"unsloth_zoo/__init__.py": ""}
    if ce is not None:
        files[scan.CE_MEMBER] = ce
    return f"unsloth_zoo-{version}-py3-none-any.whl", wheel("unsloth_zoo", version, files)


def unsloth_wheel(version: str, zoo_req: str, extra: dict[str, str] | None = None) -> tuple[str, bytes]:
    files = {"unsloth/__init__.py": "import unsloth_zoo\n", "unsloth/models/llama.py": "x = 1\n", **(extra or {})}
    meta = f"Requires-Dist: {zoo_req}\nRequires-Dist: torch>=2.4\nProvides-Extra: colab\n"
    return f"unsloth-{version}-py3-none-any.whl", wheel("unsloth", version, files, meta)


GUARD_SRC = (ROOT / "matrix/backports/unsloth-guard/files/fused_ce_guard.py").read_text(encoding="utf-8")


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Any]:
    zoo = dict([
        zoo_wheel("2026.1.0", None),
        zoo_wheel("2026.2.0", VULNERABLE),
        zoo_wheel("2026.3.0", FIXED_HELPER),
        zoo_wheel("2026.3.1", VULNERABLE),  # a regression
        zoo_wheel("2026.4.0", FIXED_CLAMP),
        zoo_wheel("2026.5.0", FIXED_CLAMP),  # yanked below
    ])
    zoo["unsloth_zoo-2026.6.0.tar.gz"] = sdist("unsloth_zoo", "2026.6.0", {scan.CE_MEMBER: FIXED_BRANCH})
    uns = dict([
        unsloth_wheel("2026.2.0", "unsloth_zoo>=2026.2.0"),
        unsloth_wheel("2026.4.0", "unsloth_zoo>=2026.4.0"),
        unsloth_wheel("2026.4.1", "unsloth_zoo>=2026.2.0", {
            scan.GUARD_MEMBER: GUARD_SRC,
            "unsloth/__init__.py": "from .fused_ce_guard import install_at_import\n",
            "unsloth-2026.4.1.dist-info/SKEWMATRIX_BACKPORT.json": json.dumps({"backport": "unsloth-guard"})}),
        unsloth_wheel("2026.4.2", "unsloth_zoo>=2026.2.0", {"unsloth/patch.py": textwrap.dedent("""
            from unsloth_zoo.fused_losses.cross_entropy_loss import UnslothFusedLoss
            def _fwd(ctx, *a): ...
            UnslothFusedLoss.forward = staticmethod(_fwd)
        """)}),
        unsloth_wheel("2026.4.3", "unsloth-zoo ; extra == 'colab'"),
    ])
    blobs = {f"https://index.invalid/files/{k}": v for k, v in {**zoo, **uns}.items()}
    cache = tmp_path / "cache"
    index = FakeIndex(cache, {"unsloth-zoo": page("unsloth-zoo", zoo, yanked={"unsloth_zoo-2026.5.0-py3-none-any.whl"}),
                              "unsloth": page("unsloth", uns)})
    return {"cache": cache, "index": index, "blobs": blobs, "tmp": tmp_path}


def run(world: dict[str, Any], **kw: Any) -> dict[str, Any]:
    opts = scan.ScanOptions(**kw)
    fetcher = FakeFetcher(world["cache"], world["blobs"], full_max=world.get("full_max", scan.FULL_DOWNLOAD_MAX))
    world["fetcher"] = fetcher
    return scan.run(opts, cache=world["cache"], index=world["index"], fetcher=fetcher)


# --------------------------------------------------------------------------- zoo


def test_zoo_verdicts_timeline_and_yanked(world: dict[str, Any]) -> None:
    doc = run(world)
    verdicts = {z["version"]: (z["verdict"], z["yanked"]) for z in doc["zoo"]}
    assert verdicts == {
        "2026.1.0": ("absent", False), "2026.2.0": ("vulnerable", False), "2026.3.0": ("fixed", False),
        "2026.3.1": ("vulnerable", False), "2026.4.0": ("fixed", False), "2026.5.0": ("fixed", True),
        "2026.6.0": ("fixed", False),
    }
    assert doc["timeline"] == {"first_fixed": "2026.3.0", "fixed_since": "2026.4.0", "last_vulnerable": "2026.3.1",
                               "regressions": [{"version": "2026.3.1", "after_fixed": "2026.3.0"}]}
    sd = next(z for z in doc["zoo"] if z["version"] == "2026.6.0")
    assert sd["file"]["kind"] == "sdist" and sd["file"]["integrity"] == "sha256"
    md = scan.render_markdown(doc)
    assert "**First fixed release: 2026.3.0**" in md
    assert "**Regression: 2026.3.1 is vulnerable again after 2026.3.0 was fixed.**" in md
    assert "| 2026.5.0 (yanked) | fixed |" in md


def test_schema_validates_the_document(world: dict[str, Any]) -> None:
    doc = run(world)
    schema = json.loads((ROOT / "reports/scan.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert schema["$id"] == "urn:skewmatrix:scan:1"


def test_zoo_spec_selects_the_table(world: dict[str, Any]) -> None:
    doc = run(world, zoo=">=2026.3,<2026.4", skip_unsloth=True)
    assert [z["version"] for z in doc["zoo"]] == ["2026.3.0", "2026.3.1"]


def test_warm_run_uses_the_cache_only(world: dict[str, Any]) -> None:
    run(world)
    doc = run(world)
    assert world["fetcher"].opened == []
    assert doc["stats"]["downloaded_bytes"] == 0 and doc["stats"]["cache_hits"] == 12


def test_range_reads_of_large_wheels(world: dict[str, Any]) -> None:
    world["full_max"] = 100  # every wheel is "large": read by range
    doc = run(world, skip_unsloth=False)
    assert all(r for _, r in world["fetcher"].opened if not _.endswith(".tar.gz"))
    wheels = [z for z in doc["zoo"] if z["file"]["kind"] == "wheel"]
    assert {z["file"]["integrity"] for z in wheels} == {"crc32+record"}
    assert next(z for z in doc["zoo"] if z["version"] == "2026.3.1")["verdict"] == "vulnerable"


def test_sha256_mismatch_is_an_unknown_verdict(world: dict[str, Any]) -> None:
    zoo = {n.split("/")[-1]: b for n, b in world["blobs"].items() if "unsloth_zoo" in n}
    world["index"].pages["unsloth-zoo"] = page("unsloth-zoo", zoo, bad_sha={"unsloth_zoo-2026.2.0-py3-none-any.whl"})
    doc = run(world, skip_unsloth=True)
    z = next(z for z in doc["zoo"] if z["version"] == "2026.2.0")
    assert z["verdict"] == "unknown" and "does not match the index" in z["reason"]


def test_release_without_files_is_listed_unknown(world: dict[str, Any]) -> None:
    world["index"].pages["unsloth-zoo"]["versions"] = ["2026.9.9"]
    doc = run(world, skip_unsloth=True)
    z = next(z for z in doc["zoo"] if z["version"] == "2026.9.9")
    assert z["verdict"] == "unknown" and "no wheel or sdist" in z["reason"]


def test_index_error_falls_back_to_the_cached_page(world: dict[str, Any]) -> None:
    run(world)
    world["index"] = FakeIndex(world["cache"], world["index"].pages)
    world["index"].fail = True
    doc = run(world)
    assert doc["index"]["origin"] == {"unsloth-zoo": "cache", "unsloth": "cache"}
    assert any("unreachable" in w for w in doc["warnings"])
    assert len(doc["zoo"]) == 7 and len(doc["unsloth"]) == 5


def test_index_error_with_nothing_cached_is_a_clean_error(world: dict[str, Any]) -> None:
    world["index"].fail = True
    with pytest.raises(scan.ScanError, match=r"unsloth-zoo: the index .* unreachable .*nothing cached"):
        run(world)


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
    assert FIXED_BRANCH.count("if divisor == 0") == 1


def test_yanked_zoo_is_not_a_floor_unless_asked(world: dict[str, Any]) -> None:
    uns = dict([unsloth_wheel("2026.5.0", "unsloth_zoo>=2026.5.0")])
    world["blobs"].update({f"https://index.invalid/files/{k}": v for k, v in uns.items()})
    world["index"].pages["unsloth"] = page("unsloth", uns)
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
    assert scan.guard_in_source(source, "m.py")[0] == state


def test_our_guard_unwired_is_unknown() -> None:
    ex = scan.Extract("u.whl", None, "sha256", {scan.GUARD_MEMBER: GUARD_SRC, scan.INIT_MEMBER: ""}, 2)
    g = scan.guard_state(ex)
    assert g["state"] == "unknown" and "never imports it" in g["evidence"][-1]


# --------------------------------------------------------------------------- compare with cells, CLI


def cell(cell_id: str, version: str, zoo_state: str, source: str = "pypi", digest: str | None = None) -> dict:
    return {"cell_id": cell_id, "builds": {"zoo": {"source": source, "version": version, "digest": digest}},
            "classification": {"zoo": zoo_state}}


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
           "probes": {"static": {"verdict": "vulnerable", "reason": "r"},
                      "steps": [{"name": "runtime", "status": "ok", "result": {"verdict": "vulnerable"}}]}}
    doc = {"zoo": [{"version": "2026.2.0", "verdict": "vulnerable", "reason": "r", "file": None}]}
    assert scan.compare_with_cells(doc, [raw])[0]["status"] == "consistent"


def test_main_bad_spec_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert scan.main(["--zoo", ">=>1", "--out", str(tmp_path), "--cache", str(tmp_path)]) == 2
    assert "--zoo '>=>1': not a valid version specifier set" in capsys.readouterr().err


def test_main_index_unreachable_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", INDEX)
    monkeypatch.setattr(scan.IndexClient, "_page", lambda self, p: (_ for _ in ()).throw(
        IndexLookupError(f"{p}: the index {INDEX} is unreachable (test)")))
    assert scan.main(["--out", str(tmp_path), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "unsloth-zoo: the index https://index.invalid/simple is unreachable" in err


def test_write_files(world: dict[str, Any], tmp_path: Path) -> None:
    doc = run(world)
    paths = scan.write(doc, tmp_path / "out")
    assert [p.name for p in paths] == ["scan.json", "scan.md"]
    assert json.loads(paths[0].read_text())["schema"] == "skewmatrix.scan/1"
    assert "first fixed: 2026.3.0" in scan.summary(doc)
