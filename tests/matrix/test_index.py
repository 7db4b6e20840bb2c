"""The index client: uv-style credentials and their redaction, retries with backoff, page parsing. No network."""

from __future__ import annotations

import httpx
import pytest
from packaging.version import Version

from matrix.errors import IndexLookupError
from matrix.index import HTTPFetchError, IndexClient, IndexHTTP, IndexURL, index_url, parse_filename, releases_from_page

INDEX = "https://index.invalid/simple"


def client_for(handler, url: str = INDEX, sleeps: list[float] | None = None) -> IndexClient:
    c = IndexClient(url, transport=httpx.MockTransport(handler))
    c.http.sleep = (sleeps.append if sleeps is not None else (lambda s: None))
    return c


PAGE = {"name": "demo", "versions": ["1.0", "1.1"], "files": [
    {"filename": "demo-1.0-py3-none-any.whl", "url": "../../files/demo-1.0-py3-none-any.whl",
     "hashes": {"sha256": "a" * 64}, "size": 10, "yanked": False, "core-metadata": {"sha256": "b" * 64}},
    {"filename": "demo-1.0.tar.gz", "url": "https://cdn.invalid/demo-1.0.tar.gz", "hashes": {}, "yanked": False},
    {"filename": "demo-1.1.tar.gz", "url": "x/demo-1.1.tar.gz", "hashes": {}, "yanked": "broken build"},
    {"filename": "demo-1.2-cp311-cp311-manylinux_2_17_x86_64.whl", "url": "y", "hashes": {}, "yanked": False},
    {"filename": "demo_plugin-9.0-py3-none-any.whl", "url": "z", "hashes": {}, "yanked": False},
    {"filename": "demo-1.3.exe", "url": "w", "hashes": {}, "yanked": False},
]}


# --------------------------------------------------------------------------- credentials


@pytest.mark.parametrize(("raw", "url", "user", "password"), [
    ("https://index.invalid/simple/", "https://index.invalid/simple", None, None),
    ("https://user:tok@index.invalid/simple", "https://index.invalid/simple", "user", "tok"),
    ("https://us%40er:p%3Ass%2Fw@index.invalid:8443/simple", "https://index.invalid:8443/simple", "us@er", "p:ss/w"),
    ("https://__token__@index.invalid/simple", "https://index.invalid/simple", "__token__", None),
    ("http://u:@[::1]:3141/root/simple", "http://[::1]:3141/root/simple", "u", ""),
])
def test_credentials_are_split_out_of_the_url(raw: str, url: str, user: str | None, password: str | None) -> None:
    parsed = IndexURL.parse(raw)
    assert (parsed.url, parsed.username, parsed.password) == (url, user, password)


def test_credentials_only_for_the_index_realm() -> None:
    u = IndexURL.parse("https://user:tok@index.invalid/simple")
    assert u.auth_for("https://index.invalid/files/x.whl") is not None
    assert u.auth_for("https://index.invalid:444/files/x.whl") is None  # another port
    assert u.auth_for("http://index.invalid/files/x.whl") is None  # another scheme
    assert u.auth_for("https://files.invalid/x.whl") is None  # another host
    assert IndexURL.parse(INDEX).auth_for(INDEX) is None


def test_the_client_sends_basic_auth_and_prints_no_secret() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(404)

    c = client_for(handler, "https://user:s3cret@index.invalid/simple/")
    assert c.url == INDEX
    with pytest.raises(IndexLookupError) as err:
        c.versions("demo")
    assert str(err.value) == f"demo: no such project on the index {INDEX}"
    (req,) = seen
    assert req.url == "https://index.invalid/simple/demo/" and "s3cret" not in str(req.url)
    assert req.headers["Authorization"] == httpx.BasicAuth("user", "s3cret")._auth_header
    assert req.headers["Accept"] == "application/vnd.pypi.simple.v1+json"


def test_a_transport_error_message_never_carries_the_password() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot connect to {request.url}", request=request)

    with pytest.raises(IndexLookupError) as err:
        client_for(handler, "https://user:s3cret@index.invalid/simple").versions("demo")
    assert "s3cret" not in str(err.value) and "unreachable after 4 attempt(s)" in str(err.value)
    assert "https://index.invalid/simple/demo/" in str(err.value)
    # a file URL that a page lists with credentials in it is redacted in errors too
    listed = HTTPFetchError("https://u:pw@cdn.invalid/x.whl: HTTP 404", 404)
    assert str(listed) == "https://***@cdn.invalid/x.whl: HTTP 404"


def test_index_url_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    assert index_url() == "https://pypi.org/simple"
    monkeypatch.setenv("PIP_INDEX_URL", "https://pip.invalid/simple/")
    monkeypatch.setenv("UV_INDEX_URL", "https://uv.invalid/simple")
    assert index_url() == "https://uv.invalid/simple"


# --------------------------------------------------------------------------- retries


def test_transient_failures_are_retried_with_backoff() -> None:
    answers = [lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused", request=r)),
               lambda r: httpx.Response(503), lambda r: httpx.Response(200, json=PAGE)]

    def handler(request: httpx.Request) -> httpx.Response:
        return answers.pop(0)(request)

    sleeps: list[float] = []
    c = client_for(handler, sleeps=sleeps)
    assert c.versions("demo") == [Version("1.0"), Version("1.1")]
    assert sleeps == [0.5, 1.0] and c.http.requests == 3


def test_a_client_error_is_not_retried() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(403)

    with pytest.raises(IndexLookupError, match=r"demo: the index https://index.invalid/simple answered HTTP 403"):
        client_for(handler).versions("demo")
    assert len(calls) == 1


def test_retries_give_up_after_the_limit() -> None:
    sleeps: list[float] = []
    c = client_for(lambda r: httpx.Response(502), sleeps=sleeps)
    with pytest.raises(IndexLookupError, match=r"unreachable after 4 attempt\(s\) \(HTTP 502\)"):
        c.versions("demo")
    assert sleeps == [0.5, 1.0, 2.0]


def test_one_client_serves_every_request() -> None:
    """Keep-alive: pages and files share one httpx.Client (one connection pool), created on first use."""
    http = IndexHTTP(INDEX, transport=httpx.MockTransport(lambda r: httpx.Response(200, json=PAGE)))
    assert "client" not in http.__dict__  # constructing starts nothing
    c = IndexClient(http=http)
    c.versions("demo")
    first = http.client
    http.get_bytes("https://index.invalid/files/demo-1.0-py3-none-any.whl")
    assert http.client is first and http.requests == 2
    http.close()


def test_unit_tests_cannot_reach_the_network() -> None:
    with pytest.raises(AssertionError, match="network"):
        IndexClient("https://pypi.invalid/simple").versions("demo")


# --------------------------------------------------------------------------- pages


@pytest.mark.parametrize(("name", "parsed"), [
    ("unsloth_zoo-2026.10.6-py3-none-any.whl", ("unsloth-zoo", Version("2026.10.6"), "wheel")),
    ("unsloth_zoo-2026.10.6.tar.gz", ("unsloth-zoo", Version("2026.10.6"), "sdist")),
    ("Unsloth-2024.8.post2.zip", ("unsloth", Version("2024.8.post2"), "sdist")),
    ("unsloth-2026.1-1-py3-none-any.whl", ("unsloth", Version("2026.1"), "wheel")),  # a build tag
    ("unsloth_zoo-2026.10.6.tgz", None), ("unsloth_zoo-notaversion.tar.gz", None), ("README", None),
])
def test_parse_filename(name: str, parsed: tuple | None) -> None:
    assert parse_filename(name) == parsed


def test_releases_from_page() -> None:
    releases = releases_from_page(PAGE, f"{INDEX}/demo/", "demo")
    assert [str(r.version) for r in releases] == ["1.0", "1.1", "1.2"]  # 1.3 (.exe) and demo_plugin are not ours
    r10, r11, r12 = releases
    assert [f.url for f in r10.files] == ["https://index.invalid/files/demo-1.0-py3-none-any.whl",
                                          "https://cdn.invalid/demo-1.0.tar.gz"]
    assert r10.pick() is not None and r10.pick().pure and r10.pick().metadata_sha256 == "b" * 64
    assert r11.yanked and r11.yanked_reason() == "broken build" and r11.pick().kind == "sdist"
    assert r12.pick() is not None and r12.pick().kind == "wheel" and not r12.pick().pure


def test_versions_without_pep700_come_from_file_names() -> None:
    page = {k: v for k, v in PAGE.items() if k != "versions"}
    c = client_for(lambda r: httpx.Response(200, json=page))
    assert c.versions("demo") == [Version("1.0"), Version("1.1"), Version("1.2")]
