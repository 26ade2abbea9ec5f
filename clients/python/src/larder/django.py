"""`larder.django.LarderCache`: a Django cache backend over any larder store.

    CACHES = {
        "default": {
            "BACKEND": "larder.django.LarderCache",
            "LOCATION": "memcached://127.0.0.1:11211",   # any store URL (spec/STORES.md §1)
            "OPTIONS": {"compressor": "lz4"},            # larder.Cache options (see below)
        }
    }

Values are larder entries under Django's key (`KEY_PREFIX:VERSION:key`, made memcached-safe by larder's
`safe_key`), so `larder inspect`, the Rust proxy and the other languages read what Django writes. Plain values
(None, bool, int, float, str, bytes, and lists and dicts of those) are MessagePack; anything else (tuples, sets,
datetimes, model instances…) is pickled inside a MessagePack ext of type 80, signed with Django's `SECRET_KEY`
(spec/FORMAT.md §2): only a pickle this application signed is unpickled (a `SECRET_KEY_FALLBACKS` secret is
accepted when reading, so a rotation keeps the cache); an unsigned or wrongly signed one is a miss, so a writer of
the shared store cannot make Django run code. Every other reader sees an opaque extension value.

OPTIONS: `compressor`, `compress_threshold`, `default_stale` (seconds), `lock_ttl`, `max_value_size`,
`outage_memory` (a size, default `"16M"`, 0 = off: what was written while the store failed answers the reads it
fails, until it answers again; spec/STORES.md §3), `pickle` (default True), as for `larder.Cache`;
`signing_secret` and `signing_fallbacks` instead of `SECRET_KEY` and `SECRET_KEY_FALLBACKS`. Without any secret
pickling is off, and storing a value that needs it raises TypeError.
Django's `MAX_ENTRIES` and `CULL_FREQUENCY` cull a `memory://` store as LocMemCache does (and caches of one
`memory://` LOCATION share it); shared stores bound their memory themselves.
Store errors surface as `larder.stores.StoreError` from writes (naming the server); reads treat a failing store,
and any entry they cannot use, as a miss (or the outage memory's value), as every larder cache does.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache, default_key_func
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from .cache import Cache
from .entry import now_ms
from .http_rules import Rules
from .keys import DEFAULT_DROP
from .page_site import target_authority
from .pages import DEFAULT_MAX_BODY, PageCache, PageRequest, front_headers
from .plain import is_plain
from .stores import open_store
from .stores.base import parse_counter
from .stores.memory import MemoryStore
from .wsgi import origin_form

_MISSING = object()
_OPTIONS = (
    "compressor",
    "compress_threshold",
    "default_stale",
    "lock_ttl",
    "max_value_size",
    "outage_memory",
    "pickle",
    "serializer",
    "signing_secret",
    "signing_fallbacks",
)
#: Django's own OPTIONS, read by BaseCache: on `memory://` they cull as LocMemCache does; shared stores bound their
#: memory themselves (the URL's capacity, memcached's and Redis's eviction).
_DJANGO_OPTIONS = ("MAX_ENTRIES", "CULL_FREQUENCY")


class LarderCache(BaseCache):
    """Django's cache API on a `larder.Cache`."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(params)
        options = {k: v for k, v in (params.get("OPTIONS") or {}).items() if k not in _DJANGO_OPTIONS}
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise ValueError(f"unknown larder OPTIONS {', '.join(unknown)} (known: {', '.join(_OPTIONS)})")
        options.setdefault("pickle", True)
        self._location = server
        self._options = options
        self._cache_obj: Cache | None = None

    @property
    def larder(self) -> Cache:
        """The `larder.Cache` underneath (opened on first use, when Django's settings are read)."""
        if self._cache_obj is None:
            options = dict(self._options)
            if options["pickle"] and options.get("signing_secret") is None:
                secret, fallbacks = _django_secrets()
                options["signing_secret"] = secret
                options.setdefault("signing_fallbacks", fallbacks)
                options["pickle"] = secret is not None
            shared = _memory_store(self._location)  # (a MemoryStore has a length: an empty one is falsy)
            self._cache_obj = Cache(self._location if shared is None else shared, **options)
        return self._cache_obj

    def _cull_if_full(self) -> None:
        """On `memory://`, Django's culling before a write, as LocMemCache does it: when MAX_ENTRIES (default 300)
        entries are held, CULL_FREQUENCY (default 3) says which share goes (0: everything)."""
        store = self.larder.store
        if isinstance(store, MemoryStore) and len(store) >= self._max_entries:
            store.cull(self._cull_frequency)

    def _storable(self, value: Any) -> Any:
        """`value`, if this backend can store it as it is: with pickling off (no secret), a value that would need a
        pickle is refused rather than stored as something else (a tuple read back as a list)."""
        if not self.larder.pickle and self._options["pickle"] and not is_plain(value):
            raise TypeError(
                f"cannot cache a {type(value).__name__} without pickling, which is off because there is no signing"
                " secret: set Django's SECRET_KEY, or OPTIONS['signing_secret'] (spec/FORMAT.md §2)"
            )
        return value

    def _ttl(self, timeout: Any) -> float | None:
        """larder's TTL for a Django timeout: 0 = never expires, None = already expired."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return 0
        timeout = float(timeout)
        return timeout if timeout > 0 else None

    def make_and_validate_key(self, key: Any, version: int | None = None) -> str:
        """Django's, with the default KEY_FUNCTION's key made here (`make_key` and `default_key_func` are two calls of
        the ~20 Python calls a memcached write makes)."""
        if self.key_func is not default_key_func:
            return str(super().make_and_validate_key(key, version))
        version = self.version if version is None else version
        made = "%s:%s:%s" % (self.key_prefix, version, key)  # noqa: UP031 - default_key_func's formatting
        self.validate_key(made)
        return made

    def validate_key(self, key: Any) -> None:
        """Django's check (a warning for a key memcached would refuse), answered at once for the common key: at most
        250 characters of printable ASCII but the space cannot draw a warning."""
        if type(key) is str and key.isascii() and len(key) <= 250 and key.isprintable() and " " not in key:
            return
        super().validate_key(key)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        ttl = self._ttl(timeout)
        k = self.make_and_validate_key(key, version)
        if ttl is None:
            # Django's rule for a timeout <= 0: "added" (and at once expired) when nothing is there.
            return not self.larder.exists(k)
        value = self._storable(value)
        if isinstance(self.larder.store, MemoryStore) and not self.larder.exists(k):
            self._cull_if_full()
        return self.larder.add(k, value, ttl)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return (self._cache_obj or self.larder).get(self.make_and_validate_key(key, version), default)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        ttl = self._ttl(timeout)
        k = self.make_and_validate_key(key, version)
        cache = self._cache_obj or self.larder
        if ttl is None:
            cache.delete(k)
        else:
            if not cache.pickle:
                value = self._storable(value)
            store = cache._shared.store
            if isinstance(store, MemoryStore) and len(store) >= self._max_entries:
                store.cull(self._cull_frequency)
            cache.set(k, value, ttl)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        k = self.make_and_validate_key(key, version)
        value = self.larder.get(k, _MISSING)
        if value is _MISSING:
            return False
        ttl = self._ttl(timeout)
        if ttl is None:
            self.larder.delete(k)
        else:
            self.larder.set(k, value, ttl)
        return True

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self.larder.delete(self.make_and_validate_key(key, version))

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self.larder.exists(self.make_and_validate_key(key, version))

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        by_store_key = {self.make_and_validate_key(key, version): key for key in keys}
        found = (self._cache_obj or self.larder).get_many(list(by_store_key))
        return {by_store_key[k]: v for k, v in found.items()}

    def set_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        ttl = self._ttl(timeout)
        items = {self.make_and_validate_key(key, version): self._storable(value) for key, value in data.items()}
        if ttl is None:
            self.larder.delete_many(list(items))
        elif isinstance(self.larder.store, MemoryStore):
            for key, value in items.items():  # culled before each write, as LocMemCache's set_many does
                self._cull_if_full()
                self.larder.set(key, value, ttl)
        else:
            self.larder.set_many(items, ttl)
        return []

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        self.larder.delete_many([self.make_and_validate_key(key, version) for key in keys])

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> Any:
        """Atomic on larder counters (written by `incr` in any language); read-modify-write on a value Django
        `set`, as Django's base backend does."""
        k = self.make_and_validate_key(key, version)
        raw = self.larder.store.get(self.larder.store_key(k))
        if raw is not None and parse_counter(bytes(raw).rstrip(b" ")) is not None:
            value = self.larder.incr(k, delta, create=False)
            if value is not None:
                return value
        current = self.larder.get(k, _MISSING)
        if current is _MISSING:
            raise ValueError(f"Key '{key}' not found")
        new = current + delta
        self.larder.set(k, new, self._ttl(DEFAULT_TIMEOUT))
        return new

    def clear(self) -> None:
        self.larder.clear()

    def close(self, **kwargs: Any) -> None:
        """Connections are pooled for the process's lifetime; nothing to do per request."""


_MEMORY_STORES: dict[str, MemoryStore] = {}
_MEMORY_LOCK = threading.Lock()


def _memory_store(location: str) -> MemoryStore | None:
    """For a `memory://` LOCATION, the process's one store of that URL, so that every cache alias naming it shares it
    (as LocMemCache's caches of one LOCATION share theirs); None for other stores."""
    if not location.lower().startswith("memory:"):
        return None
    with _MEMORY_LOCK:
        store = _MEMORY_STORES.get(location)
        if store is None:
            opened = open_store(location)
            assert isinstance(opened, MemoryStore)
            store = _MEMORY_STORES[location] = opened
        return store


def _django_secrets() -> tuple[str | None, list[str]]:
    """Django's SECRET_KEY (None when unset or empty) and SECRET_KEY_FALLBACKS."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        secret = settings.SECRET_KEY
    except (ImproperlyConfigured, AttributeError):
        secret = None
    fallbacks = [f for f in getattr(settings, "SECRET_KEY_FALLBACKS", None) or [] if f]
    return (secret or None), fallbacks


# --- page caching for larder's front -------------------------------------------------------------------------------


def page_request(request: HttpRequest, scheme: str | None = None) -> PageRequest:
    """The request as Django received it: the raw target from RAW_URI (gunicorn) or REQUEST_URI when the server
    gives it, else `get_full_path()`; the raw Host field (not `get_host()`, which USE_X_FORWARDED_HOST makes believe
    anyone), the peer (REMOTE_ADDR) and the connection's scheme (not `request.scheme`, which
    SECURE_PROXY_SSL_HEADER makes believe anyone) unless `scheme`: spec/HTTP.md §2 believes forwarding fields only
    from the page cache's `trusted_proxies`."""
    meta = request.META
    target = str(meta.get("RAW_URI") or meta.get("REQUEST_URI") or request.get_full_path())
    headers = tuple((name.lower(), str(value)) for name, value in request.headers.items())
    connection_scheme = getattr(request, "_get_scheme", lambda: "http")()
    peer = meta.get("REMOTE_ADDR")
    return PageRequest(
        method=str(request.method),
        scheme=scheme or str(connection_scheme or "http"),
        authority=str(meta.get("HTTP_HOST") or ""),
        target=origin_form(target),
        headers=headers,
        peer=str(peer) if peer else None,
        target_authority=target_authority(target),
    )


def _response_headers(response: HttpResponseBase) -> list[tuple[str, str]]:
    lines = [(str(name), str(value)) for name, value in response.items()]
    lines += [("Set-Cookie", cookie.output(header="").strip()) for cookie in response.cookies.values()]
    return lines


_PAGE_OPTIONS = ("STORE", "CACHE", "NAMESPACE", "DROP", "SCHEME", "SITE", "TRUSTED_PROXIES", "MAX_BODY", "RULES")


def page_cache_from_settings() -> PageCache:
    """The PageCache that settings.LARDER_PAGES describes:

    LARDER_PAGES = {
        "STORE": "memcached://127.0.0.1:11211",  # the store URL `larder serve --store` is given
        # or "CACHE": "default",                 # the store of a LarderCache alias in CACHES
        "NAMESPACE": "",                         # larder serve --namespace
        "DROP": ["utm_*", "gclid", "fbclid", "msclkid"],  # --drop-query-params
        "SCHEME": None,                          # None: a trusted proxy's X-Forwarded-Proto, else the connection's
        "SITE": None,                            # "shop.example": key every page on it; other Hosts are not stored
        "TRUSTED_PROXIES": [],                   # whose X-Forwarded-*/Forwarded count (larder serve --trusted-proxies)
        "MAX_BODY": 8 << 20,                     # --max-body
        "RULES": {"stale_if_error": 300},        # larder.http_rules.Rules fields, as larder serve is set
    }
    """
    from django.conf import settings
    from django.core.cache import caches
    from django.core.exceptions import ImproperlyConfigured

    config = dict(getattr(settings, "LARDER_PAGES", None) or {})
    unknown = sorted(set(config) - set(_PAGE_OPTIONS))
    if unknown:
        raise ImproperlyConfigured(
            f"unknown LARDER_PAGES keys {', '.join(unknown)} (known: {', '.join(_PAGE_OPTIONS)})"
        )
    if ("STORE" in config) == ("CACHE" in config):
        raise ImproperlyConfigured("LARDER_PAGES needs exactly one of STORE (a store URL) or CACHE (a cache alias)")
    store: Any = config.get("STORE")
    if "CACHE" in config:
        backend = caches[config["CACHE"]]
        if not isinstance(backend, LarderCache):
            raise ImproperlyConfigured(f"LARDER_PAGES CACHE {config['CACHE']!r} is not a larder.django.LarderCache")
        store = backend.larder.store
    rules = Rules(**config.get("RULES", {}))
    return PageCache(
        store,
        namespace=config.get("NAMESPACE", ""),
        drop=tuple(config.get("DROP", DEFAULT_DROP)),
        scheme=config.get("SCHEME"),
        rules=rules,
        max_body=int(config.get("MAX_BODY", DEFAULT_MAX_BODY)),
        site=config.get("SITE"),
        trusted_proxies=config.get("TRUSTED_PROXIES", ()),
    )


class PageCacheMiddleware:
    """Writes every GET response larder's front may store into the shared store (settings.LARDER_PAGES), under the
    key the front looks it up under; the front then serves it without Django. Put it first in MIDDLEWARE, so it
    sees the response as it leaves Django (compressed by GZipMiddleware, with the session's Vary and cookies).
    Streaming responses are not stored."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.pages = page_cache_from_settings()
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        started = now_ms()
        response = self.get_response(request)
        self._save(request, response, started)
        return response

    async def __acall__(self, request: HttpRequest) -> Any:
        started = now_ms()
        response = await self.get_response(request)
        await asyncio.to_thread(self._save, request, response, started)
        return response

    def _save(self, request: HttpRequest, response: HttpResponseBase, started: int) -> None:
        if request.method != "GET":
            return
        if response.streaming or not isinstance(response, HttpResponse):
            self.pages._count(not_stored="streaming")
            return
        page = page_request(request, self.pages.scheme)
        self.pages.save(
            page, response.status_code, _response_headers(response), response.content, request_time_ms=started
        )


def cache_in_front(
    ttl: int,
    *,
    tags: Iterable[str] = (),
    stale_while_revalidate: int | None = None,
    stale_if_error: int | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A view decorator: larder's front keeps this view's responses `ttl` seconds, tagged `tags`, whatever their
    Cache-Control tells browsers (it adds `Surrogate-Control` and `Surrogate-Key`, which larder consumes; see
    larder.pages.front_headers). Responses that set cookies are still not stored."""
    extra = front_headers(ttl, tags=tags, stale_while_revalidate=stale_while_revalidate, stale_if_error=stale_if_error)

    def mark(response: Any) -> Any:
        for name, value in extra:
            if name == "Surrogate-Key" and response.has_header(name):
                value = f"{response[name]} {value}"
            elif name == "Surrogate-Control" and response.has_header(name):
                continue  # the view's own word wins
            response[name] = value
        return response

    def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
        if iscoroutinefunction(view):

            async def async_view(*args: Any, **kwargs: Any) -> Any:
                return mark(await view(*args, **kwargs))

            return functools.wraps(view)(async_view)

        def sync_view(*args: Any, **kwargs: Any) -> Any:
            return mark(view(*args, **kwargs))

        return functools.wraps(view)(sync_view)

    return decorator


__all__ = ["LarderCache", "PageCacheMiddleware", "cache_in_front", "page_cache_from_settings", "page_request"]
