"""Whole entries: header + payload, encoded and decoded.

Encoding serializes the value, then applies the compression rule of spec/FORMAT.md §3: compress only a payload of at
least `threshold` bytes, and keep the compressed form only if it is strictly shorter; the compressor byte records
what was done. Decoding parses the header, decompresses within `max_size`, and deserializes; any invalid input
surfaces as `InvalidEntry`, never as another exception.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .compressors import DEFAULT_MAX_SIZE, compress, decompress
from .header import COMPRESSOR_OFFSET, COMPRESSORS, U64_MAX, BytesLike, Header, hard_expiry, pack_header, read_header
from .response import HttpResponse
from .serializers import deserialize, serialize

#: Payloads shorter than this many bytes are stored uncompressed unless told otherwise.
DEFAULT_THRESHOLD: Final = 1024


@dataclass(frozen=True)
class Entry:
    """A decoded entry. Times are milliseconds since the Unix epoch; `expires_at == 0` means never.

    `value` is the deserialized value for kind "value", an `HttpResponse` for kind "response".
    """

    kind: str
    serializer: str
    compressor: str
    created_at: int
    expires_at: int
    stale_ms: int
    version: str | None
    tags: tuple[str, ...]
    value: Any

    @property
    def hard_expiry(self) -> int | None:
        """The moment past which the entry may not be served at all, even stale; None = never."""
        return hard_expiry(self.expires_at, self.stale_ms)


def now_ms() -> int:
    """Milliseconds since the Unix epoch, from the system clock."""
    return time.time_ns() // 1_000_000


def encode(
    value: Any,
    *,
    serializer: str = "msgpack",
    compressor: str = "lz4",
    threshold: int = DEFAULT_THRESHOLD,
    level: int | None = None,
    created_at: int | None = None,
    ttl_ms: int | None = None,
    expires_at: int | None = None,
    stale_ms: int = 0,
    version: str | None = None,
    tags: Sequence[str] = (),
) -> bytes:
    """Encodes `value` as a value entry (kind 0).

    `serializer`: "msgpack" (default), "json", "text" (a str) or "raw" (bytes, or a str stored as UTF-8).
    `compressor`: "lz4" (default), "snappy", "zstd", "brotli", "gzip" or "none"; it is applied only to payloads of
    at least `threshold` bytes and kept only when it shrinks them. `level` is the codec's level (None = default).
    Times are ms since the epoch: `created_at` defaults to now; give either `ttl_ms` (0 = never expires) or an
    absolute `expires_at` (0 = never), not both. `stale_ms` is how long past expiry the entry may still be served
    while it is recomputed. Raises TypeError or ValueError for what the format cannot hold.
    """
    payload = serialize(serializer, value)
    return _build(
        "value",
        serializer,
        payload,
        compressor=compressor,
        threshold=threshold,
        level=level,
        created_at=created_at,
        ttl_ms=ttl_ms,
        expires_at=expires_at,
        stale_ms=stale_ms,
        version=version,
        tags=tags,
    )


def encode_response(
    response: HttpResponse,
    *,
    compressor: str = "lz4",
    threshold: int = DEFAULT_THRESHOLD,
    level: int | None = None,
    created_at: int | None = None,
    ttl_ms: int | None = None,
    expires_at: int | None = None,
    stale_ms: int = 0,
    version: str | None = None,
    tags: Sequence[str] = (),
) -> bytes:
    """Encodes an HTTP response as a kind-1 entry (always serializer msgpack). Options as for `encode`."""
    if not isinstance(response, HttpResponse):
        raise TypeError(f"encode_response takes an HttpResponse, not {type(response).__name__}")
    return _build(
        "response",
        "msgpack",
        response.to_payload(),
        compressor=compressor,
        threshold=threshold,
        level=level,
        created_at=created_at,
        ttl_ms=ttl_ms,
        expires_at=expires_at,
        stale_ms=stale_ms,
        version=version,
        tags=tags,
    )


def decode(data: BytesLike, *, max_size: int = DEFAULT_MAX_SIZE) -> Entry:
    """Decodes a whole entry. `max_size` bounds the decompressed payload (default 64 MiB).

    Raises `InvalidEntry`, whose `kind` says why (spec/FORMAT.md §7), for any bytes that are not a valid entry.
    """
    header, payload = decode_payload(data, max_size=max_size)
    value = HttpResponse.from_payload(payload) if header.kind == "response" else deserialize(header.serializer, payload)
    return Entry(
        header.kind,
        header.serializer,
        header.compressor,
        header.created_at,
        header.expires_at,
        header.stale_ms,
        header.version,
        header.tags,
        value,
    )


def decode_payload(data: BytesLike, *, max_size: int = DEFAULT_MAX_SIZE) -> tuple[Header, bytes]:
    """The header and the decompressed (still serialized) payload of an entry. Raises `InvalidEntry`."""
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
        raise ValueError(f"max_size must be a non-negative int, not {max_size!r}")
    if not isinstance(data, bytes):
        if not isinstance(data, (bytearray, memoryview)):
            raise TypeError(f"an entry is bytes, not {type(data).__name__}")
        data = bytes(data)
    header = read_header(data)
    payload = decompress(header.compressor, data[header.size :], max_size)
    return header, payload


def _build(
    kind: str,
    serializer: str,
    payload: bytes,
    *,
    compressor: str,
    threshold: int,
    level: int | None,
    created_at: int | None,
    ttl_ms: int | None,
    expires_at: int | None,
    stale_ms: int,
    version: str | None,
    tags: Sequence[str],
) -> bytes:
    if compressor not in COMPRESSORS:
        raise ValueError(f"unknown compressor {compressor!r} (expected one of: {', '.join(COMPRESSORS)})")
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ValueError(f"threshold must be a non-negative int, not {threshold!r}")
    if level is not None and (isinstance(level, bool) or not isinstance(level, int)):
        raise TypeError(f"level must be an int or None, not {level!r}")
    if created_at is None:
        created_at = now_ms()
    if ttl_ms is not None and expires_at is not None:
        raise ValueError("give ttl_ms or expires_at, not both")
    if ttl_ms is not None:
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0:
            raise ValueError(f"ttl_ms must be a non-negative int, not {ttl_ms!r}")
        expires_at = 0 if ttl_ms == 0 else min(created_at + ttl_ms, U64_MAX)
    header = pack_header(
        kind=kind,
        serializer=serializer,
        compressor="none",
        created_at=created_at,
        expires_at=expires_at or 0,
        stale_ms=stale_ms,
        version=version,
        tags=tags,
    )
    if compressor != "none" and len(payload) >= threshold:
        compressed = compress(compressor, payload, level)
        if len(compressed) < len(payload):
            header[COMPRESSOR_OFFSET] = COMPRESSORS.index(compressor)
            return bytes(header + compressed)
    return bytes(header + payload)
