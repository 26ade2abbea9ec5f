"""Whole entries: header + payload, encoded and decoded.

Encoding serializes the value, then applies the compression rule of spec/FORMAT.md §3: compress only a payload of at
least `threshold` bytes, and keep the compressed form only if it is strictly shorter; the compressor byte records
what was done. Decoding parses the header, decompresses within `max_size`, and deserializes; any invalid input
surfaces as `InvalidEntry`, never as another exception.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .compressors import DEFAULT_MAX_SIZE, compress, decompress, lz4_if_shorter
from .header import (
    COMPRESSOR_OFFSET,
    COMPRESSORS,
    FORMAT_VERSION,
    KINDS,
    MAGIC,
    SERIALIZERS,
    U64_MAX,
    BytesLike,
    Header,
    hard_expiry,
    pack_header,
    parse_header,
    read_header,
)
from .response import HttpResponse
from .serializers import deserialize, pack_msgpack, serialize

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
    _check_max_size(max_size)
    data = _as_bytes(data)
    kind, serializer, compressor, created_at, expires_at, stale_ms, version, tags, size = parse_header(data)
    payload = payload_of(data, compressor, size, max_size)
    value = HttpResponse.from_payload(bytes(payload)) if kind else deserialize(SERIALIZERS[serializer], payload)
    return Entry(
        KINDS[kind],
        SERIALIZERS[serializer],
        COMPRESSORS[compressor],
        created_at,
        expires_at,
        stale_ms,
        version,
        tags,
        value,
    )


def decode_payload(data: BytesLike, *, max_size: int = DEFAULT_MAX_SIZE) -> tuple[Header, bytes]:
    """The header and the decompressed (still serialized) payload of an entry. Raises `InvalidEntry`."""
    _check_max_size(max_size)
    data = _as_bytes(data)
    header = read_header(data)
    payload = decompress(header.compressor, data[header.size :], max_size)
    return header, payload


#: Uncompressed payloads of at least this many bytes are read through a view of the entry rather than a copy (below
#: it, making the view costs more than the copy it saves).
_VIEW_FROM: Final = 4096


def payload_of(data: bytes, compressor: int, offset: int, max_size: int) -> bytes | memoryview:
    """The decompressed payload of the entry `data`, whose header (compressor id `compressor`) takes `offset` bytes:
    an uncompressed payload is not copied (a large one is a view into `data`), an LZ4 block is read in place. At
    most `max_size` bytes; raises `InvalidEntry` as `decompress` does."""
    if compressor == 0:
        if len(data) - offset > max_size:
            decompress("none", data[offset:], max_size)  # raises too_large
        return data[offset:] if len(data) - offset < _VIEW_FROM else memoryview(data)[offset:]
    if compressor == 1:
        return decompress("lz4", memoryview(data)[offset:], max_size)
    return decompress(COMPRESSORS[compressor], data[offset:], max_size)


def _check_max_size(max_size: int) -> None:
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
        raise ValueError(f"max_size must be a non-negative int, not {max_size!r}")


def _as_bytes(data: BytesLike) -> bytes:
    if type(data) is bytes:
        return data
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"an entry is bytes, not {type(data).__name__}")
    return bytes(data)


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
        compressed = lz4_if_shorter(payload) if compressor == "lz4" else compress(compressor, payload, level)
        if compressed is not None and len(compressed) < len(payload):
            header[COMPRESSOR_OFFSET] = COMPRESSORS.index(compressor)
            return b"".join((header, compressed))
    return b"".join((header, payload))


_FIXED: Final = struct.Struct("<2sBBBBBQQ")
_SERIALIZER_IDS: Final = {name: i for i, name in enumerate(SERIALIZERS)}
_COMPRESSOR_IDS: Final = {name: i for i, name in enumerate(COMPRESSORS)}


_MSGPACK_ID: Final = _SERIALIZER_IDS["msgpack"]
_LZ4_ID: Final = _COMPRESSOR_IDS["lz4"]
_HEAD8: Final = struct.Struct(">BB")
_HEAD16: Final = struct.Struct(">BH")
_HEAD32: Final = struct.Struct(">BI")
#: MessagePack's one-byte heads of the str of 0-31 bytes (fixstr).
_FIXSTR: Final = tuple(bytes((0xA0 | n,)) for n in range(32))
#: MessagePack's other str and bin heads, by the bit length of the length they hold (0-32): the head's struct, its str
#: marker, its bin marker (str8/bin8, str16/bin16, str32/bin32). One lookup, as fast as the if/elif ladder it replaced.
_HEADS: Final = tuple(
    (_HEAD8, 0xD9, 0xC4) if bits <= 8 else (_HEAD16, 0xDA, 0xC5) if bits <= 16 else (_HEAD32, 0xDB, 0xC6)
    for bits in range(33)
)


def build_plain_msgpack(value: Any, created_at: int, expires_at: int) -> bytes | None:
    """`build_plain("msgpack", pack_msgpack(value), "none", ...)` with the header's `expires_at` given (0 = never),
    for a value MessagePack holds as it is (None, bool, int, float, str, bytes, lists and dicts of them: what
    `cache._plain` accepts, checked by the caller): the same bytes. A str or bytes is written with one copy fewer:
    MessagePack's str (bin) head is made here and the value's UTF-8 bytes (the bytes themselves) are joined behind
    it, instead of being copied into a packer's buffer, then out of it, then into the entry. None where packing
    fails (a str that is not valid UTF-8, an int beyond 64 bits, a value of 4 GiB or more): the caller's general
    path says why."""
    kind = type(value)
    if kind is not str and kind is not bytes:
        try:
            payload = pack_msgpack(value)
        except (OverflowError, ValueError, TypeError):
            return None
        return b"".join((_FIXED.pack(MAGIC, FORMAT_VERSION, 0, _MSGPACK_ID, 0, 0, created_at, expires_at), payload))
    if kind is str:
        try:
            raw = value.encode()
        except UnicodeEncodeError:
            return None
    else:
        raw = value
    head = plain_head(kind is str, len(raw), created_at, expires_at)
    return None if head is None else b"".join((head, raw))


def lz4_plain(entry: bytes, threshold: int) -> bytes:
    """FORMAT.md §3's rule applied to an uncompressed entry with only the fixed header (`build_plain_msgpack`'s):
    its payload, read in place, is compressed with LZ4 when it is at least `threshold` bytes (an int >= 0), and the
    compressed form kept only if strictly shorter (the compressor byte then says lz4). The bytes
    `build_plain(serializer, payload, "lz4", threshold, ...)` makes of the same payload, without the copy of the
    payload `build_plain` is given (MessagePack's packer copies a str or bytes in and out)."""
    if len(entry) - _FIXED.size < threshold:
        return entry
    compressed = lz4_if_shorter(memoryview(entry)[_FIXED.size :])
    if compressed is None:
        return entry
    header = bytearray(entry[: _FIXED.size])
    header[COMPRESSOR_OFFSET] = _LZ4_ID
    return b"".join((header, compressed))


def plain_head(text: bool, n: int, created_at: int, expires_at: int) -> bytes | None:
    """The bytes of `build_plain_msgpack`'s entry before the value's own `n` bytes (UTF-8 when `text`, a str;
    else bytes): the fixed header (expires_at 0 = never) and MessagePack's str or bin head. None for 4 GiB or more.
    The memory store keeps a str or bytes behind this head as it is (stores/memory.py `Parts`)."""
    fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, 0, _MSGPACK_ID, 0, 0, created_at, expires_at)
    if text and n < 32:
        return fixed + _FIXSTR[n]
    if n > 0xFFFFFFFF:
        return None
    head, str_marker, bin_marker = _HEADS[n.bit_length()]
    return fixed + head.pack(str_marker if text else bin_marker, n)


def build_plain(
    serializer: str, payload: bytes, compressor: str, threshold: int, created_at: int, ttl_ms: int
) -> bytes:
    """What `_build("value", serializer, payload, compressor=compressor, threshold=threshold, level=None,
    created_at=created_at, ttl_ms=ttl_ms, expires_at=None, stale_ms=0, version=None, tags=())` returns, for an
    entry with none of the header's optional fields (the common write): the fixed header packed at once. Arguments
    that need `_build`'s checks (an unknown compressor, a threshold or time that is not a plain int) go to it."""
    serializer_id = _SERIALIZER_IDS.get(serializer, -1) if type(serializer) is str else -1
    compressor_id = _COMPRESSOR_IDS.get(compressor, -1) if type(compressor) is str else -1
    if (
        serializer_id < 0
        or compressor_id < 0
        or type(threshold) is not int
        or threshold < 0
        or type(created_at) is not int
        or not 0 <= created_at <= U64_MAX
        or type(ttl_ms) is not int
        or ttl_ms < 0
    ):
        return _build(
            "value",
            serializer,
            payload,
            compressor=compressor,
            threshold=threshold,
            level=None,
            created_at=created_at,
            ttl_ms=ttl_ms,
            expires_at=None,
            stale_ms=0,
            version=None,
            tags=(),
        )
    expires_at = created_at + ttl_ms if ttl_ms else 0
    if expires_at > U64_MAX:
        expires_at = U64_MAX
    if compressor_id and len(payload) >= threshold:
        compressed = lz4_if_shorter(payload) if compressor_id == 1 else compress(compressor, payload)
        if compressed is not None and len(compressed) < len(payload):
            header = _FIXED.pack(MAGIC, FORMAT_VERSION, 0, serializer_id, compressor_id, 0, created_at, expires_at)
            return b"".join((header, compressed))
    return b"".join((_FIXED.pack(MAGIC, FORMAT_VERSION, 0, serializer_id, 0, 0, created_at, expires_at), payload))
