"""The package index: a client for its JSON simple API, its pages as releases, and range reads of its files.

* ``client``: ``IndexClient`` (project pages, versions, files), ``index_url``, ``nearest_versions``;
* ``http``: one keep-alive ``httpx`` client with retries and uv-style index credentials, ``redact``;
* ``pages``: project pages as ``Release`` / ``DistFile`` values (``packaging`` file-name parsing);
* ``remote_zip``: ``RangeFile``, a seekable file over HTTP range requests for the stdlib ``zipfile``.
"""

from matrix.index.client import ACCEPT, DEFAULT_INDEX, IndexClient, IndexFile, index_url, nearest_versions
from matrix.index.http import TIMEOUT_S, HTTPFetchError, IndexHTTP, IndexURL, redact
from matrix.index.pages import DistFile, Release, parse_filename, releases_from_page
from matrix.index.remote_zip import RangeFile, RangeNotSupportedError

__all__ = ["ACCEPT", "DEFAULT_INDEX", "TIMEOUT_S", "DistFile", "HTTPFetchError", "IndexClient", "IndexFile",
           "IndexHTTP", "IndexURL", "RangeFile", "RangeNotSupportedError", "Release", "index_url",
           "nearest_versions", "parse_filename", "redact", "releases_from_page"]
