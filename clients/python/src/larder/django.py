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
datetimes, model instances…) is pickled inside a MessagePack ext of type 80, which only a Python cache with
`pickle=True` (this backend) turns back into an object; every other reader sees an opaque extension value.

OPTIONS: `compressor`, `compress_threshold`, `default_stale` (seconds), `lock_ttl`, `max_value_size`, `pickle`
(default True), as for `larder.Cache`. Store errors surface as `larder.stores.StoreError` from writes (naming the
server); reads treat a failing store as a miss, as every larder cache does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache

from .cache import Cache
from .stores.base import parse_counter

_MISSING = object()
_OPTIONS = ("compressor", "compress_threshold", "default_stale", "lock_ttl", "max_value_size", "pickle", "serializer")
#: Django's own OPTIONS, read by BaseCache; larder bounds memory with the store URL (capacity, max_entries).
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
        """The `larder.Cache` underneath (opened on first use)."""
        if self._cache_obj is None:
            self._cache_obj = Cache(self._location, **self._options)
        return self._cache_obj

    def _ttl(self, timeout: Any) -> float | None:
        """larder's TTL for a Django timeout: 0 = never expires, None = already expired."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return 0
        timeout = float(timeout)
        return timeout if timeout > 0 else None

    def _key(self, key: Any, version: int | None) -> str:
        return str(self.make_and_validate_key(key, version=version))

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        ttl = self._ttl(timeout)
        k = self._key(key, version)
        if ttl is None:
            # Django's rule for a timeout <= 0: "added" (and at once expired) when nothing is there.
            return not self.larder.exists(k)
        return self.larder.add(k, value, ttl)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self.larder.get(self._key(key, version), default)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        ttl = self._ttl(timeout)
        k = self._key(key, version)
        if ttl is None:
            self.larder.delete(k)
        else:
            self.larder.set(k, value, ttl)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        k = self._key(key, version)
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
        return self.larder.delete(self._key(key, version))

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self.larder.exists(self._key(key, version))

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        by_store_key = {self._key(key, version): key for key in keys}
        found = self.larder.get_many(list(by_store_key))
        return {by_store_key[k]: v for k, v in found.items()}

    def set_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        ttl = self._ttl(timeout)
        items = {self._key(key, version): value for key, value in data.items()}
        if ttl is None:
            self.larder.delete_many(list(items))
        else:
            self.larder.set_many(items, ttl)
        return []

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        self.larder.delete_many([self._key(key, version) for key in keys])

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> Any:
        """Atomic on larder counters (written by `incr` in any language); read-modify-write on a value Django
        `set`, as Django's base backend does."""
        k = self._key(key, version)
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


__all__ = ["LarderCache"]
