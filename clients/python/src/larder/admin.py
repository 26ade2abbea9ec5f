"""Talk to a running larder proxy's admin API: push pre-rendered responses into its cache, and purge them.

`push_response` builds an HTTP response entry (spec/FORMAT.md §4) with `encode_response`, derives the key the proxy
looks the page up under (spec/FORMAT.md §5.3: method GET, scheme `http`, the URL's host and port, the path and the
sorted query without tracking parameters, larder's namespace) and PUTs the bytes to `/entries/{key}`. From then on
the proxy answers `GET url` from the cache without asking the app, until the entry expires or is purged:

    >>> import larder
    >>> larder.push_response(
    ...     "http://127.0.0.1:8081",
    ...     "http://127.0.0.1:8080/about",  # as clients request it through larder
    ...     200,
    ...     [("content-type", "text/html; charset=utf-8")],
    ...     "<h1>About</h1>",
    ...     ttl=600,
    ...     tags=["page:about"],
    ... )  # doctest: +SKIP
    'GET:http://127.0.0.1:8080/about'
    >>> larder.purge("http://127.0.0.1:8081", tag="page:about")  # doctest: +SKIP
    1

The admin API wants a bearer token (`larder serve --admin-token`): pass `token=`, or set `LARDER_ADMIN_TOKEN` in the
environment, which every function here reads when no token is passed.

`push_entry` PUTs entry bytes made any other way. Only the standard library is used (urllib.request), without any
HTTP proxy from the environment: the admin API is reached directly. Every failure to talk to it (unreachable, timed
out, an HTTP error status) raises `AdminError` (`PushError` for pushes, `PurgeError` for purges) carrying the HTTP
status and the server's own error message; arguments the format or HTTP cannot carry raise ValueError or TypeError
before anything is sent.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from .entry import encode_response, now_ms
from .keys import DEFAULT_DROP, http_key
from .pages import purge_store
from .response import CONTENT_ENCODINGS, HttpResponse
from .stores import SCHEMES as STORE_SCHEMES
from .stores import Store, open_store

HeaderPart = bytes | str
#: Response headers: a mapping, or (name, value) pairs in order (duplicates kept, as for two Set-Cookie lines).
Headers = Mapping[str, HeaderPart] | Mapping[bytes, HeaderPart] | Iterable[tuple[HeaderPart, HeaderPart]]

#: Fields a server derives when it sends a body, so they are never stored (spec/FORMAT.md §4).
HOP_BY_HOP: Final = frozenset(
    {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade", b"proxy-connection"}
)

#: The environment variable `larder serve` reads its admin token from, and the token sent when none is passed.
TOKEN_ENV: Final = "LARDER_ADMIN_TOKEN"
#: Most bytes of an error response read for its message, and of any answer.
_MAX_ERROR_BODY: Final = 64 << 10
_MAX_ANSWER: Final = 1 << 20
_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE_BYTES: Final = re.compile(rb"[\x00\r\n]")


class AdminError(Exception):
    """A request to larder's admin API failed.

    `status` is the HTTP status the admin API answered (None when there was no answer: unreachable, refused, timed
    out), `message` the server's error message (its JSON `error` field) or the network error, `url` what was asked.
    """

    status: int | None
    message: str
    url: str

    def __init__(self, message: str, *, status: int | None = None, url: str = "") -> None:
        where = f"{url}: " if url else ""
        code = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"{where}{code}{message}")
        self.status = status
        self.message = message
        self.url = url


class PushError(AdminError):
    """Storing an entry through the admin API failed (e.g. 400 `invalid entry: <kind>: ...`, 401, unreachable)."""


class PurgeError(AdminError):
    """A purge through the admin API failed."""


def proxy_key(url: str, *, namespace: str = "", drop: Sequence[str] = DEFAULT_DROP) -> str:
    """The key larder's proxy stores and finds `GET url` under.

    `url` is the URL as clients request it through larder (`http://host[:port]/path?query`); the proxy keys every
    request with the scheme `http` and the authority of its Host header, so an `https://` URL (larder behind a TLS
    terminator) gives the same key as its `http://` form, with the default port 443 left out. `namespace` and `drop`
    must match larder's `--namespace` and `drop_query_params` settings.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"not an http:// or https:// URL: {url!r}")
    end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            end = min(end, found)
    authority = rest[:end].rpartition("@")[2]
    if not authority:
        raise ValueError(f"the URL has no host: {url!r}")
    if scheme == "https" and authority.endswith(":443"):
        authority = authority[: -len(":443")]
    return http_key("GET", "http", authority, rest[end:], namespace=namespace, drop=drop)


def push_response(
    admin_url: str,
    url: str,
    status: int,
    headers: Headers = (),
    body: bytes | bytearray | memoryview | str = b"",
    ttl: float | None = 3600,
    tags: Sequence[str] = (),
    *,
    stale: float = 0,
    content_encoding: str = "identity",
    namespace: str = "",
    drop: Sequence[str] = DEFAULT_DROP,
    token: str | None = None,
    timeout: float = 5.0,
) -> str:
    """Stores an HTTP response in a running larder, to be served for `GET url`; returns the key it was stored under.

    - `admin_url`: larder's admin API, e.g. `http://127.0.0.1:8081` (a bare `host:port` means http).
    - `url`: the page's URL as clients request it through larder, e.g. `http://127.0.0.1:8080/page?id=3`
      (see `proxy_key`); HEAD requests for it are answered from the same entry.
    - `status`: 100-999. `headers`: a mapping or (name, value) pairs, str or bytes, in order, duplicates kept.
      Names are stored lowercased. Content-Length and hop-by-hop fields (Connection and what it names, Keep-Alive,
      Transfer-Encoding, TE, Trailer, Upgrade, Proxy-Connection) are left out: larder derives them when it serves.
      A Content-Encoding field equal to `content_encoding` is left out too; one naming another coding larder knows
      (gzip, br, zstd) is a ValueError; any other coding is kept and served as is.
    - `body`: bytes, or a str stored as UTF-8, in the coding `content_encoding` says: `identity`, `gzip`, `br` or
      `zstd`. larder sends an encoded body as is to clients that accept its coding and decodes it for the others.
    - `ttl`: seconds the response is fresh (a positive int or float), or None for no expiry (until purged or
      evicted). `stale`: seconds past expiry the entry is kept and may be served stale, as the response's
      Cache-Control or larder's stale settings allow. `tags`: names to purge it by.
    - `namespace`, `drop`: larder's `--namespace` and dropped query parameters, which the key depends on.
    - `token`: the admin API's bearer token (default: the environment's `LARDER_ADMIN_TOKEN`, if set).
      `timeout`: seconds to wait for each network step.

    Raises ValueError or TypeError for arguments that cannot be stored (before sending anything), and `PushError`
    when the admin API cannot be reached or refuses the entry (its `status` and `message` say why).
    """
    response = HttpResponse(status, _store_headers(headers, content_encoding), body, content_encoding)
    key = proxy_key(url, namespace=namespace, drop=drop)
    entry = encode_response(
        response,
        # As larder stores the responses it caches itself: a hit then serves the body without decompressing it.
        compressor="none",
        created_at=now_ms(),
        ttl_ms=_ttl_ms(ttl),
        stale_ms=_seconds_to_ms(stale, "stale"),
        tags=tags,
    )
    push_entry(admin_url, key, entry, token=token, timeout=timeout)
    return key


def push_entry(
    admin_url: str,
    key: str,
    entry: bytes | bytearray | memoryview,
    *,
    token: str | None = None,
    timeout: float = 5.0,
) -> None:
    """PUTs entry bytes (spec/FORMAT.md) under `key`, exactly as given (the admin API checks them).

    Raises `PushError`: status 400 with message `invalid entry: <kind>: <detail>` for bytes that are not a valid
    entry, 401 without the right token, None when the admin API cannot be reached.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"the key must be a non-empty str, not {key!r}")
    target = _admin_base(admin_url) + "/entries/" + urllib.parse.quote(key, safe="")
    headers = {"Content-Type": "application/octet-stream"}
    status, reply = _request("PUT", target, bytes(entry), headers, token, timeout, PushError)
    if not isinstance(reply, dict) or reply.get("stored") is not True:
        raise PushError(f"unexpected answer {reply!r}", status=status, url=target)
    _warn_if_told(reply)


def purge(
    admin_url: str | Store,
    *,
    url: str | None = None,
    url_prefix: str | None = None,
    prefix: str | None = None,
    tag: str | None = None,
    tags: Sequence[str] | None = None,
    token: str | None = None,
    timeout: float = 5.0,
    namespace: str = "",
    drop: Sequence[str] = DEFAULT_DROP,
) -> int | None:
    """Removes entries from a running larder; give exactly one criterion. Returns how many store entries went, or
    None when the store records purges instead of counting them (memcached, spec/STORES.md §4.4: larder answers
    `{"purged": null, "recorded": true}`), so that "nothing matched" (0) is never said when it is not known.

    `admin_url` is larder's admin API, or the URL of the shared store larder serves from (`larder serve --store`:
    `memcached://…`, `redis://…`, any scheme of spec/STORES.md) or an open `Store`: the purge is then made in the
    store itself, for every front reading it, without asking any of them (`url` is then keyed with `namespace` and
    `drop`, which must match larder's `--namespace` and `--drop-query-params`; `url_prefix` needs the admin API).

    - `url`: every stored response for `GET url` (every `Vary` variant and coding), keyed by larder itself with its
      own namespace.
    - `url_prefix`: every URL that starts with it, e.g. `http://shop.example/products/` (a scheme, host and path
      prefix; no query).
    - `prefix`: every store key that starts with it (keys look like `[namespace:]GET:http://host/path`).
    - `tag`, or several `tags`: every entry carrying it (`Surrogate-Key`, `Cache-Tag`, or pushed tags).

    When larder says a purge may have missed what was meant (a key prefix that looks like a path), that warning is
    issued as an `AdminWarning`. Raises ValueError unless exactly one criterion is given, and `PurgeError` when the
    admin API cannot be reached or refuses.
    """
    if isinstance(admin_url, Store) or _is_store_url(admin_url):
        if url_prefix is not None:
            raise ValueError("url_prefix needs larder's admin API; in a store, purge by prefix= (a key prefix)")
        store = admin_url if isinstance(admin_url, Store) else open_store(admin_url)
        try:
            return purge_store(
                store,
                tag=tag,
                tags=tags,
                url=url,
                prefix=prefix,
                url_key=lambda page: proxy_key(page, namespace=namespace, drop=drop),
            )
        finally:
            if store is not admin_url:
                store.close()
    criteria = (("url", url), ("url_prefix", url_prefix), ("prefix", prefix), ("tag", tag))
    given: dict[str, object] = {name: value for name, value in criteria if value is not None}
    if tags is not None:
        given["tags"] = _tag_list(tags)
    if len(given) != 1:
        raise ValueError("give exactly one of url, url_prefix, prefix, tag, tags")
    for name, value in given.items():
        if name != "tags" and not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    target = _admin_base(admin_url) + "/purge"
    headers = {"Content-Type": "application/json"}
    body = json.dumps(given).encode("utf-8")
    status, reply = _request("POST", target, body, headers, token, timeout, PurgeError)
    if not isinstance(reply, dict) or "purged" not in reply:
        raise PurgeError(f"unexpected answer {reply!r}", status=status, url=target)
    purged = reply["purged"]
    if purged is None and reply.get("recorded") is True:
        _warn_if_told(reply)
        return None
    if isinstance(purged, bool) or not isinstance(purged, int):
        raise PurgeError(f"unexpected answer {reply!r}", status=status, url=target)
    _warn_if_told(reply)
    return purged


class AdminWarning(UserWarning):
    """larder did what was asked, but says it may not be what was meant (a purge that matched nothing for a
    reason it can name, an entry stored under a key the proxy never looks up)."""


def _warn_if_told(reply: object) -> None:
    if isinstance(reply, dict) and isinstance(reply.get("warning"), str):
        warnings.warn(reply["warning"], AdminWarning, stacklevel=3)


def _tag_list(tags: Sequence[str]) -> list[str]:
    if isinstance(tags, (str, bytes)):
        raise TypeError("tags must be a sequence of str, not a single string")
    listed = list(tags)
    if not listed:
        raise ValueError("tags is empty")
    for tag in listed:
        if not isinstance(tag, str):
            raise TypeError(f"tags must be str, not {type(tag).__name__}")
    return listed


def _store_headers(headers: Headers, content_encoding: str) -> list[tuple[bytes, bytes]]:
    """The header pairs to store: names lowercased, fields larder derives when serving left out."""
    if isinstance(headers, (str, bytes)):
        raise TypeError("headers must be a mapping or (name, value) pairs, not a single string")
    items = headers.items() if isinstance(headers, Mapping) else headers
    pairs: list[tuple[bytes, bytes]] = []
    for pair in items:
        name, value = pair
        name_bytes = _as_bytes(name, "header name").lower()
        value_bytes = _as_bytes(value, "header value").strip(b" \t")
        if not _TOKEN.fullmatch(name_bytes):
            raise ValueError(f"not a valid header name: {name!r}")
        if _BAD_VALUE_BYTES.search(value_bytes):
            raise ValueError(f"header {name!r} has a CR, LF or NUL in its value")
        pairs.append((name_bytes, value_bytes))
    named_by_connection = {
        option.strip().lower()
        for name, value in pairs
        if name == b"connection"
        for option in value.split(b",")
        if option.strip()
    }
    kept = []
    for name, value in pairs:
        if name == b"content-length" or name in HOP_BY_HOP or name in named_by_connection:
            continue
        if name == b"content-encoding":
            coding = value.decode("latin-1").lower()
            if coding == content_encoding:
                continue
            # A coding larder knows belongs in content_encoding; an unknown one is kept and served as is, which
            # only makes sense for a body that larder is told is not encoded otherwise.
            if coding in CONTENT_ENCODINGS or content_encoding != "identity":
                raise ValueError(
                    f"the header says Content-Encoding: {coding} but content_encoding is {content_encoding!r}:"
                    " give the body's coding as content_encoding= (and leave the header out)"
                )
        kept.append((name, value))
    return kept


def _ttl_ms(ttl: float | None) -> int | None:
    if ttl is None:
        return None  # no expiry: encode_response writes expires_at 0
    ms = _seconds_to_ms(ttl, "ttl")
    if ttl <= 0:
        raise ValueError(f"ttl must be positive seconds, or None for no expiry, not {ttl!r}")
    return max(ms, 1)  # 0 ms would mean "never expires"


def _seconds_to_ms(seconds: float, what: str) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be seconds as an int or float, not {type(seconds).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what} must be finite, non-negative seconds, not {seconds!r}")
    return round(seconds * 1000)


def _as_bytes(value: object, what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _is_store_url(target: object) -> bool:
    return isinstance(target, str) and target.partition("://")[0].lower() in STORE_SCHEMES and "://" in target


def _admin_base(admin_url: str) -> str:
    if not isinstance(admin_url, str) or not admin_url:
        raise ValueError(f"admin_url must be a URL such as http://127.0.0.1:8081, not {admin_url!r}")
    base = admin_url if "://" in admin_url else "http://" + admin_url
    parts = urllib.parse.urlsplit(base)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"admin_url must be a URL such as http://127.0.0.1:8081, not {admin_url!r}")
    return base.rstrip("/")


# Direct connections only: an HTTP proxy from the environment has no business between a client and its admin API.
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _request(
    method: str,
    url: str,
    data: bytes,
    headers: dict[str, str],
    token: str | None,
    timeout: float,
    error: type[AdminError],
) -> tuple[int, object]:
    """Sends one request; returns the status and the decoded JSON answer (None if empty), or raises `error`. Without
    a `token`, the environment's `LARDER_ADMIN_TOKEN` is used when set."""
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    if token is not None:
        headers = {**headers, "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status = int(response.status)
            raw = response.read(_MAX_ANSWER + 1)
            if len(raw) > _MAX_ANSWER:
                raise error(f"the answer is longer than {_MAX_ANSWER} bytes", status=status, url=url)
    except urllib.error.HTTPError as e:
        raise error(_error_message(e), status=e.code, url=url) from None
    except urllib.error.URLError as e:
        raise error(f"cannot reach the admin API: {e.reason}", url=url) from e
    except (OSError, http.client.HTTPException) as e:  # a timeout or a broken connection while reading
        raise error(f"cannot reach the admin API: {e or type(e).__name__}", url=url) from e
    if not raw.strip():
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        raise error(f"the answer is not JSON: {raw[:200]!r}", status=status, url=url) from None


def _error_message(e: urllib.error.HTTPError) -> str:
    """The `error` field of a JSON error body, else the body's text, else the status's reason phrase."""
    try:
        with e:
            text = e.read(_MAX_ERROR_BODY).decode("utf-8", errors="replace").strip()
    except (OSError, http.client.HTTPException):
        text = ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return str(parsed["error"])
    return text or str(e.reason or http.client.responses.get(e.code, "error"))
