"""larder's entry format for Python: the bytes every larder component and client library agree on.

An entry is a small header (kind, serializer, compressor, created-at, expires-at, stale window, version, tags)
followed by a payload: a serialized value, or an HTTP response, compressed when that pays (spec/FORMAT.md).
`push_response` and `purge` put responses into a running larder proxy's cache, and take them out, through its admin
API (larder.admin).

    >>> import larder
    >>> data = larder.encode({"id": 7, "name": "Ada"}, created_at=1_700_000_000_000, ttl_ms=60_000, tags=["user:7"])
    >>> entry = larder.decode(data)
    >>> entry.value, entry.expires_at, entry.tags
    ({'id': 7, 'name': 'Ada'}, 1700000060000, ('user:7',))
"""

from __future__ import annotations

from .admin import AdminError, AdminWarning, PurgeError, PushError, proxy_key, purge, push_entry, push_response
from .aio import AsyncCache
from .cache import Cache, CacheStats
from .compressors import DEFAULT_MAX_SIZE
from .entry import DEFAULT_THRESHOLD, Entry, decode, decode_payload, encode, encode_response, now_ms
from .errors import ERROR_KINDS, InvalidEntry
from .header import COMPRESSORS, KINDS, SERIALIZERS, Header, peek_expires_at, read_header
from .keys import DEFAULT_DROP, http_key, namespaced_key, safe_key, url_key
from .response import CONTENT_ENCODINGS, HttpResponse
from .serializers import MAX_NESTING
from .stores import Store, StoreError, open_store

__version__ = "0.1.0"

__all__ = [
    "COMPRESSORS",
    "CONTENT_ENCODINGS",
    "DEFAULT_DROP",
    "DEFAULT_MAX_SIZE",
    "DEFAULT_THRESHOLD",
    "ERROR_KINDS",
    "KINDS",
    "MAX_NESTING",
    "SERIALIZERS",
    "AdminError",
    "AdminWarning",
    "AsyncCache",
    "Cache",
    "CacheStats",
    "Entry",
    "Header",
    "HttpResponse",
    "InvalidEntry",
    "PurgeError",
    "PushError",
    "Store",
    "StoreError",
    "decode",
    "decode_payload",
    "encode",
    "encode_response",
    "http_key",
    "namespaced_key",
    "now_ms",
    "open_store",
    "peek_expires_at",
    "proxy_key",
    "purge",
    "push_entry",
    "push_response",
    "read_header",
    "safe_key",
    "url_key",
]
