"""Page caching for larder's front: an app writes the pages it renders into the shared store, under exactly the
key `larder serve --store URL` looks them up under, so the front answers later requests without the app.

This is the model of Shopify's cacheable and of the proxy in source document 003: the app knows best what a page is
and how long it holds; a fast server in front serves it. larder's version needs nothing but the shared store:

- **Which responses**: the ones larder's own rules would store (larder.http_rules, the proxy's RFC 9111 rules:
  `CDN-Cache-Control`, `Surrogate-Control`, `Cache-Control`, `Expires`; never `private`, `no-store`, `Set-Cookie`,
  `Vary: *`). A view opts in explicitly with `front_headers(ttl, tags=…)` (or larder.django's `cache_in_front`):
  a `Surrogate-Control: max-age=…` that larder honours and never passes on to browsers.
- **Under which key**: FORMAT.md §5.3 from the request as the app received it through larder (method GET, the
  request's scheme, its Host, its path and query as sent, larder's namespace and dropped query parameters); a
  response with `Vary` goes under a variant key behind a marker (§5.4), as the proxy writes them. The site is the
  configured `site`, else the Host, and `X-Forwarded-*`/`Forwarded` count only from `trusted_proxies` (spec/HTTP.md
  §2, larder.page_site): a request that reaches the app directly with a hostile Host or forwarded field stores
  nothing (reason `host`).
- **What**: the entry the proxy would have made of the response (stored.rs `prepare`): end-to-end headers without
  Content-Length and the fields meant for larder (`Surrogate-*`, `Cache-Tag`), the body's coding, `Age` and `Date`,
  freshness and stale window from the rules, tags from `Surrogate-Key` (space-separated) and `Cache-Tag`
  (comma-separated), stored uncompressed as the proxy stores its own.
- **Purge**: `PageCache.purge(tag=…, url=…, prefix=…)` or `larder.purge(store_url, tag=…)`; the front stops
  serving a purged page at once (from an L1 copy, after at most its `--l1-ttl`).

The WSGI and ASGI middlewares are in larder.wsgi and larder.asgi; the Django one is larder.django's
`PageCacheMiddleware`. A failed store write is logged (logger `larder.pages`) and counted, never raised: the app's
response goes out whatever the store does.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack

from .entry import Entry, decode, encode, encode_response, now_ms
from .errors import InvalidEntry
from .header import hard_expiry
from .http_date import format_http_date
from .http_rules import KNOWN_CODINGS, HeaderLines, NotStored, Rules, StorePlan, storage
from .keys import DEFAULT_DROP, http_key, url_key, url_keys, variant_key
from .page_site import SiteRule
from .response import HttpResponse
from .stores import Store, StoreError, open_store

log = logging.getLogger("larder.pages")

#: `larder serve`'s `--max-body`: larger bodies are not stored.
DEFAULT_MAX_BODY: Final = 8 << 20
#: Always hop-by-hop (RFC 9110 §7.6.1), whatever `Connection` says: never stored.
HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authentication-info",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
#: Fields that steer larder and are not passed on (respond.rs CONSUMED), nor stored.
CONSUMED: Final = frozenset({"surrogate-control", "surrogate-key", "cache-tag"})


@dataclass(frozen=True)
class PageRequest:
    """A request as the app received it. `authority` is its Host field ("" when it has none); `scheme` the scheme of
    the connection the app received (not one a forwarding field claims); `target` is the path and query as sent (not
    decoded); `headers` are its (name, value) lines in order, names in any case, values as WSGI, ASGI and Django give
    them: the latin-1 code points of the bytes received (a value that is not latin-1 is taken as text). `peer` is
    the address the request came from (REMOTE_ADDR), `target_authority` the authority of an absolute-form target."""

    method: str
    scheme: str
    authority: str
    target: str
    headers: tuple[tuple[str, str], ...] = ()
    peer: str | None = None
    target_authority: str | None = None


def front_headers(
    ttl: int,
    *,
    tags: Iterable[str] = (),
    stale_while_revalidate: int | None = None,
    stale_if_error: int | None = None,
) -> list[tuple[str, str]]:
    """Headers that opt a response in to larder's front for `ttl` seconds, tagged `tags`, whatever its
    `Cache-Control` tells browsers: `Surrogate-Control` (honoured by larder, never passed on) and `Surrogate-Key`.

    A `CDN-Cache-Control` in the response still wins over them (RFC 9213), and a response that sets a cookie is
    still not stored. Flask: `return body, 200, larder.pages.front_headers(60, tags=["post:7"])`.
    """
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
        raise ValueError(f"ttl must be positive whole seconds, not {ttl!r}")
    directives = [f"max-age={ttl}"]
    for name, value in (("stale-while-revalidate", stale_while_revalidate), ("stale-if-error", stale_if_error)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be whole seconds, not {value!r}")
            directives.append(f"{name}={value}")
    headers = [("Surrogate-Control", ", ".join(directives))]
    tag_list = _tag_list(tags)
    if tag_list:
        headers.append(("Surrogate-Key", " ".join(tag_list)))
    return headers


@dataclass
class PageStats:
    """What a PageCache did: pages stored, responses not stored by reason, failed writes."""

    stored: int = 0
    not_stored: Counter[str] = field(default_factory=Counter)
    errors: int = 0


class PageCache:
    """Writes rendered responses into a shared store for `larder serve --store` to serve.

    - `store`: the store URL the front uses (same `prefix`), or an open `Store`.
    - `namespace`, `drop`: the front's `--namespace` and `--drop-query-params`, which its keys depend on.
    - `scheme`: the scheme to key with; None (default) takes a trusted proxy's `X-Forwarded-Proto` (see
      `trusted_proxies`), else the scheme of the connection the app received.
    - `site`: the authority the app serves (`shop.example`, `shop.example:8443`): every page is keyed on it, and a
      request whose Host names another is not stored (reason `host`). None: the request's Host, if it is a plain
      `host[:port]` (spec/HTTP.md §2).
    - `trusted_proxies`: addresses or networks (`10.0.0.0/8`) whose `X-Forwarded-Host`, `X-Forwarded-Proto` and
      `Forwarded` are believed, as `larder serve --trusted-proxies`; from anyone else they are ignored.
    - `rules`: the front's caching settings (`http_rules.Rules`: `--stale-if-error`, `--cache-set-cookie`, …).
    - `max_body`: the front's `--max-body`; larger bodies are not stored.
    """

    def __init__(
        self,
        store: str | Store,
        *,
        namespace: str = "",
        drop: Sequence[str] = DEFAULT_DROP,
        scheme: str | None = None,
        rules: Rules | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        site: str | None = None,
        trusted_proxies: Sequence[str] = (),
    ) -> None:
        if isinstance(drop, str):
            raise TypeError("drop must be a sequence of patterns, not a single string")
        if scheme is not None and scheme not in ("http", "https"):
            raise ValueError(f"scheme must be http, https or None, not {scheme!r}")
        self.site_rule = SiteRule.of(site, trusted_proxies)
        self.store: Store = open_store(store) if isinstance(store, str) else store
        self.namespace = namespace
        self.drop = tuple(drop)
        self.scheme = scheme
        self.rules = rules or Rules()
        self.max_body = max_body
        self.stats = PageStats()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------------- keys

    def site_of(self, request: PageRequest) -> tuple[str, str] | None:
        """The scheme and authority `request` is for (spec/HTTP.md §2), or None when it names no site a page may be
        stored for."""
        return self.site_rule.resolve(
            peer=request.peer,
            host=request.authority or None,
            scheme=request.scheme,
            target_authority=request.target_authority,
            headers=request.headers,
            scheme_option=self.scheme,
        )

    def key(self, request: PageRequest) -> str | None:
        """The key the front looks `request` up under (FORMAT.md §5.3); for a varying page, its marker's. None when
        the request names no site a page may be stored for (spec/HTTP.md §2)."""
        site = self.site_of(request)
        if site is None:
            return None
        scheme, authority = site
        return http_key("GET", scheme, authority, request.target, namespace=self.namespace, drop=self.drop)

    def url_key(self, url: str) -> str:
        """The key of `GET url`, the URL as clients request it through the front (keyed with `scheme` when set)."""
        if self.scheme is not None and "://" in url:
            url = self.scheme + "://" + url.partition("://")[2]
        return url_key("GET", url, namespace=self.namespace, drop=self.drop)

    # ---------------------------------------------------------------------------------------------- writing

    def plan(
        self, request: PageRequest, status: int, headers: HeaderLines, request_time_ms: int | None = None
    ) -> StorePlan | NotStored:
        """Whether the front's rules store this response (headers as (name, value) lines, any case); never when the
        request names no site a page may be stored for (`host`, spec/HTTP.md §2)."""
        if self.site_of(request) is None:
            return NotStored("host")
        now = now_ms()
        lines = [(name.lower(), value) for name, value in headers]
        return storage(self.rules, request.method, request.headers, status, lines, request_time_ms or now, now)

    def save(
        self,
        request: PageRequest,
        status: int,
        headers: HeaderLines,
        body: bytes,
        *,
        request_time_ms: int | None = None,
        plan: StorePlan | NotStored | None = None,
    ) -> str | None:
        """Stores the response if the front's rules allow it; returns the key it went under (a variant's for a
        varying page), or None when it was not stored (`stats` says why) or the store failed (logged)."""
        if plan is None:
            plan = self.plan(request, status, headers, request_time_ms)
        if not isinstance(plan, NotStored) and self.site_of(request) is None:
            plan = NotStored("host")
        if isinstance(plan, NotStored):
            self._count(not_stored=plan.reason)
            return None
        if len(body) > self.max_body:
            self._count(not_stored="too-large")
            return None
        try:
            key = self._write(request, status, headers, body, plan)
        except (StoreError, InvalidEntry, ValueError, TypeError) as e:
            log.warning("page %s %s not stored: %s", request.authority, request.target, e)
            self._count(error=True)
            return None
        self._count(stored=True)
        return key

    def _write(self, request: PageRequest, status: int, headers: HeaderLines, body: bytes, plan: StorePlan) -> str:
        response_time = now_ms()
        response, tags = _prepare(status, headers, body, plan, response_time)
        meta = _Meta(response_time, max(response_time + plan.fresh_ms, 1), plan.keep_stale_ms)
        entry = encode_response(
            response,
            compressor="none",
            created_at=meta.created_at,
            expires_at=meta.expires_at,
            stale_ms=meta.stale_ms,
            tags=tags,
        )
        base = self.key(request)
        if base is None:
            raise ValueError("the request names no site a page may be stored for")
        if not plan.vary:
            self.store.set(base, entry)
            return base
        existing = self._marker(base)
        if existing is not None and tuple(existing.vary) == plan.vary:
            generation, marker_meta = existing.generation, _later(existing.meta, meta)
        else:
            generation, marker_meta = secrets.token_hex(8), meta
        marker: dict[str, Any] = {"vary": list(plan.vary)}
        if generation is not None:
            marker["generation"] = generation
        marker_bytes = encode(
            marker,
            compressor="none",
            created_at=marker_meta.created_at,
            expires_at=marker_meta.expires_at,
            stale_ms=marker_meta.stale_ms,
        )
        key = variant_key(base, marker, _received(request))
        self.store.set(key, entry)
        self.store.set(base, marker_bytes)
        return key

    def _marker(self, base: str) -> _Marker | None:
        value = self.store.get(base)
        if value is None:
            return None
        try:
            entry = decode(value)
        except InvalidEntry:
            return None
        return _Marker.of(entry)

    # ---------------------------------------------------------------------------------------------- reading

    def find(self, request: PageRequest) -> tuple[str, Entry] | None:
        """The stored response the front would find for `request` (fresh or stale), and its key; None if none.

        The front's own lookup (stored.rs `lookup`): the base key holds the response, or a `Vary` marker that
        leads to the variant the request's headers select.
        """
        base = self.key(request)
        if base is None:
            return None
        value = self.store.get(base)
        entry = _decode(value)
        if entry is None:
            return None
        if entry.kind == "response":
            return base, entry
        marker = _Marker.of(entry)
        if marker is None:
            return None
        key = variant_key(base, marker.map(), _received(request))
        variant = _decode(self.store.get(key))
        return (key, variant) if variant is not None and variant.kind == "response" else None

    # ---------------------------------------------------------------------------------------------- purging

    def purge(
        self,
        *,
        tag: str | None = None,
        tags: Sequence[str] | None = None,
        url: str | None = None,
        prefix: str | None = None,
    ) -> int | None:
        """Removes pages from the shared store, for every front reading it; give exactly one criterion. Returns
        how many store entries went, or None for a tag or prefix purge on memcached, which records purges and
        cannot count them (spec/STORES.md §4.4).

        - `tag`, or several `tags`: every entry tagged so (`Surrogate-Key`, `Cache-Tag`).
        - `url`: the page for `GET url` (as clients request it through the front): its response or `Vary` marker
          (which makes every variant unreachable) and its alternate codings.
        - `prefix`: every key starting with it (keys look like `[namespace:]GET:http://host/path`).
        """
        return purge_store(self.store, tag=tag, tags=tags, url=url, prefix=prefix, url_key=self.url_key)

    def _count(self, *, stored: bool = False, not_stored: str | None = None, error: bool = False) -> None:
        with self._lock:
            if stored:
                self.stats.stored += 1
            if not_stored is not None:
                self.stats.not_stored[not_stored] += 1
            if error:
                self.stats.errors += 1


def purge_store(
    store: Store,
    *,
    tag: str | None = None,
    tags: Sequence[str] | None = None,
    url: str | None = None,
    prefix: str | None = None,
    url_key: Any = None,
) -> int | None:
    """Purges pages from `store` (see PageCache.purge); `url_key` maps a URL to its key. How many entries went, or
    None where the store records purges instead of counting them (memcached, spec/STORES.md §4.4)."""
    given = [value for value in (tag, tags, url, prefix) if value is not None]
    if len(given) != 1 or given[0] == "":
        raise ValueError("give exactly one of tag, tags, url, prefix (non-empty)")
    if tag is not None or tags is not None:
        names = [tag] if tag is not None else _tag_list(tags or ())
        counts = [store.purge_tag(name) for name in names]
        return None if None in counts else sum(c for c in counts if c is not None)
    if url is not None:
        return store.delete_many(url_keys(url_key(url)))
    assert prefix is not None
    return store.purge_prefix(prefix)


# --- what is stored ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Meta:
    created_at: int
    expires_at: int
    stale_ms: int

    def hard(self) -> int:
        found = hard_expiry(self.expires_at, self.stale_ms)
        return found if found is not None else 1 << 64


@dataclass(frozen=True)
class _Marker:
    vary: tuple[str, ...]
    generation: str | None
    meta: _Meta

    @classmethod
    def of(cls, entry: Entry) -> _Marker | None:
        value = entry.value
        if entry.kind != "value" or not isinstance(value, dict):
            return None
        vary, generation = value.get("vary"), value.get("generation")
        if not isinstance(vary, list) or not all(isinstance(n, str) for n in vary):
            return None
        if generation is not None and not isinstance(generation, str):
            return None
        return cls(tuple(vary), generation, _Meta(entry.created_at, entry.expires_at, entry.stale_ms))

    def map(self) -> dict[str, Any]:
        """The marker as the map it is stored as (spec/FORMAT.md §5.4)."""
        found: dict[str, Any] = {"vary": list(self.vary)}
        if self.generation is not None:
            found["generation"] = self.generation
        return found


def _later(marker: _Meta, variant: _Meta) -> _Meta:
    """A marker must outlive every variant it leads to: it keeps the later of the two hard expiries."""
    return variant if variant.hard() > marker.hard() else marker


def _decode(value: bytes | None) -> Entry | None:
    if value is None:
        return None
    try:
        return decode(value)
    except (InvalidEntry, msgpack.ExtraData, ValueError):
        return None


def _prepare(
    status: int, headers: HeaderLines, body: bytes, plan: StorePlan, response_time_ms: int
) -> tuple[HttpResponse, list[str]]:
    """The response as the proxy stores it (stored.rs `prepare`), and its tags."""
    lines = [(name.lower(), value) for name, value in headers]
    named = {option.strip().lower() for name, value in lines if name == "connection" for option in value.split(",")}
    lines = [(n, v) for n, v in lines if n not in HOP_BY_HOP and n not in named]
    tags = _tags_of(lines)
    lines = [(n, v) for n, v in lines if n not in CONSUMED and n != "content-length"]
    content_encoding = "identity"
    codings = [v for n, v in lines if n == "content-encoding"]
    if len(codings) == 1 and codings[0].strip().lower() in KNOWN_CODINGS:
        content_encoding = codings[0].strip().lower()
        lines = [(n, v) for n, v in lines if n != "content-encoding"]
    lines = [(n, v) for n, v in lines if n != "age"]
    lines.append(("age", str(plan.initial_age_ms // 1000)))
    if not any(n == "date" for n, _ in lines):
        lines.append(("date", format_http_date(response_time_ms)))
    pairs = [(name.encode("ascii"), _header_bytes(value)) for name, value in lines]
    return HttpResponse(status, pairs, body, content_encoding), tags


def _header_bytes(value: str) -> bytes:
    """A header value's bytes: WSGI's, ASGI's (as the middlewares decode them) and Django's header strings are
    latin-1 code points of the bytes received; a str that is not latin-1 is taken as text, in UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _received(request: PageRequest) -> list[tuple[str, bytes]]:
    """The request's header lines with their values as received, for selecting values (FORMAT.md §5.4): bytes
    that are not UTF-8 then read as U+FFFD in every language, and UTF-8 as the text it encodes."""
    return [(name, _header_bytes(value)) for name, value in request.headers]


def _tags_of(lines: HeaderLines) -> list[str]:
    """Tags from `Surrogate-Key` (space-separated) and `Cache-Tag` (comma-separated), sorted and unique."""
    tags: set[str] = set()
    for name, value in lines:
        if name == "surrogate-key":
            tags.update(t for t in re.split(r"[\t\n\x0c\r ]+", value) if t)
        elif name == "cache-tag":
            tags.update(t.strip() for t in value.split(",") if t.strip())
    return sorted(tags)


def _tag_list(tags: Iterable[str]) -> list[str]:
    if isinstance(tags, (str, bytes)):
        raise TypeError("tags must be a sequence of str, not a single string")
    listed = list(tags)
    for tag in listed:
        if not isinstance(tag, str) or not tag or any(c.isspace() for c in tag):
            raise ValueError(f"a tag is a non-empty str without spaces, not {tag!r}")
    return listed
