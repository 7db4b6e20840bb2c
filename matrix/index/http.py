"""HTTP to the package index and its file host: one keep-alive ``httpx`` client, retries, credentials.

Credentials are handled the way uv handles them: ``user:password@`` in the
index URL is taken out of the URL (percent-decoded), and sent as HTTP Basic
auth to every request in the same *realm* (scheme, host and port) as the
index, never to another host (``files.pythonhosted.org``, a redirect target).
The URL kept in memory, in messages and in reports has no credentials; every
message also goes through ``redact`` in case a page lists a URL with some.

Transient failures (connection errors, timeouts, HTTP 429/5xx) are retried
with exponential backoff; anything else fails at once with a message naming
the (redacted) URL. ``transport`` lets unit tests serve responses from memory
(``httpx.MockTransport``) through the same code path.
"""

from __future__ import annotations

import functools
import hashlib
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import httpx

from matrix.envs.tools import redact_text
from matrix.errors import SkewmatrixError

TIMEOUT_S = 30.0
RETRIES = 3
BACKOFF_S = 0.5
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# The scan reads up to eight files at once; keep those connections open between releases.
MAX_CONNECTIONS = 16
USER_AGENT = "skewmatrix (+https://github.com/unslothai/unsloth)"
CHUNK = 1024 * 1024


def redact(url: str) -> str:
    """Drop credentials from a URL before it reaches a log or a report (see ``matrix.envs.tools.redact_text``)."""
    return redact_text(url)


class HTTPFetchError(SkewmatrixError):
    """A request failed after its retries. ``status`` is the HTTP status, or None when nothing answered."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(redact(message))
        self.status = status


@dataclass(frozen=True)
class Realm:
    scheme: str
    host: str
    port: int | None

    @classmethod
    def of(cls, url: str) -> Realm:
        u = httpx.URL(url)
        return cls(u.scheme, u.host.lower(), u.port)


@dataclass(frozen=True)
class IndexURL:
    """An index URL split into the URL without credentials and the credentials (uv's handling)."""

    url: str
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, raw: str) -> IndexURL:
        parts = urllib.parse.urlsplit(raw.strip())
        if parts.username is None and parts.password is None:
            return cls(raw.strip().rstrip("/"))
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port else "")
        clean = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        user = urllib.parse.unquote(parts.username) if parts.username else None
        password = urllib.parse.unquote(parts.password) if parts.password is not None else None
        return cls(clean.rstrip("/"), user, password)

    @property
    def has_credentials(self) -> bool:
        return self.username is not None or self.password is not None

    def auth_for(self, url: str) -> httpx.BasicAuth | None:
        """Basic auth for ``url`` when it is in the index's realm, else None (credentials never leave it)."""
        if not self.has_credentials or Realm.of(url) != Realm.of(self.url):
            return None
        return httpx.BasicAuth(self.username or "", self.password or "")


class IndexHTTP:
    """A keep-alive client for one index and the files it lists. Thread-safe (httpx's pool is)."""

    def __init__(self, index: str | IndexURL, *, transport: httpx.BaseTransport | None = None,
                 retries: int = RETRIES, backoff_s: float = BACKOFF_S, timeout_s: float = TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.index = index if isinstance(index, IndexURL) else IndexURL.parse(index)
        self.retries = retries
        self.backoff_s = backoff_s
        self.sleep = sleep
        self._transport = transport
        self._timeout = timeout_s
        self.requests = 0

    @functools.cached_property
    def client(self) -> httpx.Client:
        # Created on first use: constructing a client must not start anything (house style: lazy).
        return httpx.Client(transport=self._transport, timeout=self._timeout, follow_redirects=True,
                            limits=httpx.Limits(max_connections=MAX_CONNECTIONS,
                                                max_keepalive_connections=MAX_CONNECTIONS),
                            headers={"User-Agent": USER_AGENT})

    def close(self) -> None:
        if "client" in self.__dict__:
            self.client.close()

    def _attempts(self, url: str, headers: dict[str, str] | None, consume: Callable[[httpx.Response], object]
                  ) -> object:
        """Run one GET with retries; ``consume`` reads the (streamed) response and returns the result."""
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            self.requests += 1
            try:
                with self.client.stream("GET", url, headers=headers, auth=self.index.auth_for(url)) as resp:
                    if resp.status_code in RETRY_STATUS:
                        last = f"HTTP {resp.status_code}"
                        continue
                    if resp.status_code >= 400:
                        raise HTTPFetchError(f"{url}: HTTP {resp.status_code}", resp.status_code)
                    return consume(resp)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise HTTPFetchError(f"{url}: unreachable after {self.retries + 1} attempt(s) ({last})")

    def get_bytes(self, url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """``(status, body)`` of a GET (after redirects and retries)."""

        def read(resp: httpx.Response) -> tuple[int, bytes]:
            return resp.status_code, resp.read()

        return self._attempts(url, headers, read)  # type: ignore[return-value]

    def download(self, url: str, sink: IO[bytes]) -> tuple[str, int]:
        """Stream ``url`` into ``sink`` (rewound on each retry); ``(sha256 hex, bytes)``."""

        def copy(resp: httpx.Response) -> tuple[str, int]:
            sink.seek(0)
            sink.truncate()
            digest = hashlib.sha256()
            n = 0
            for chunk in resp.iter_bytes(CHUNK):
                digest.update(chunk)
                sink.write(chunk)
                n += len(chunk)
            return digest.hexdigest(), n

        return self._attempts(url, None, copy)  # type: ignore[return-value]
