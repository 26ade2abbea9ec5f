"""larder's stores (spec/STORES.md): one interface, `Store`, over the process's memory, a memcached pool, Redis
(standalone and Cluster), SQLite and PostgreSQL, and a directory of files, each opened from the same URL every
language uses:

    >>> from larder.stores import open_store
    >>> store = open_store("memory://?capacity=64M")
    >>> store.set("k", b"v"); store.get("k")
    b'v'

Module names mirror the Rust crates (`larder-memcached` → `larder.stores.memcached`, …). Remote backends import
their client library (redis-py, psycopg) only when a URL asks for them.
"""

from __future__ import annotations

from typing import Final

from .base import (
    InvalidKey,
    NotACounter,
    ServerError,
    Store,
    StoreError,
    StoreStats,
    StoreTimeout,
    TooLarge,
    Unsupported,
    UrlError,
    internal_key,
    lock_key,
    stored_key,
)
from .url import StoreUrl, redact

#: The schemes `open_store` knows.
SCHEMES: Final = ("memory", "memcached", "redis", "redis+cluster", "sqlite", "postgres", "file")


def open_store(url: str) -> Store:
    """Opens the store `url` names. Remote stores connect on first use; SQLite and file stores create their file
    or directory now. Raises `UrlError` for a malformed URL or an unknown option, naming it and the known ones."""
    parsed = StoreUrl.parse(url)
    scheme = parsed.scheme
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore.from_url(parsed)
    if scheme == "memcached":
        from .memcached import MemcachedStore

        return MemcachedStore.from_url(parsed)
    if scheme in ("redis", "redis+cluster"):
        from .redis import RedisStore

        return RedisStore.from_url(parsed)
    if scheme in ("sqlite", "postgres", "postgresql"):
        from .sql import SqlStore

        return SqlStore.from_url(parsed)
    if scheme == "file":
        from .file import FileStore

        return FileStore.from_url(parsed)
    raise parsed.error(f"unknown store scheme {scheme!r} (known: {', '.join(SCHEMES)})")


__all__ = [
    "SCHEMES",
    "InvalidKey",
    "NotACounter",
    "ServerError",
    "Store",
    "StoreError",
    "StoreStats",
    "StoreTimeout",
    "StoreUrl",
    "TooLarge",
    "Unsupported",
    "UrlError",
    "internal_key",
    "lock_key",
    "open_store",
    "redact",
    "stored_key",
]
