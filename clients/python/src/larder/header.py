"""The entry header (spec/FORMAT.md §1): the fixed 23 bytes and the optional stale window, version and tags.

Everything a store or a cache decides about an entry (expiry, version, tags) is read here, without touching the
payload, so a store can skip an expired entry without decompressing or deserializing anything.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NoReturn

from .errors import BAD_HEADER, BAD_MAGIC, TRUNCATED, UNKNOWN_CODEC, UNSUPPORTED_VERSION, InvalidEntry

MAGIC: Final = b"\xc1\x4c"
FORMAT_VERSION: Final = 1
FIXED_HEADER_LEN: Final = 23
#: Offset of the compressor byte, rewritten once the encoder knows whether compression paid.
COMPRESSOR_OFFSET: Final = 5
#: Offset of `expires_at`, for readers that want only the expiry.
EXPIRES_AT_OFFSET: Final = 15

FLAG_STALE: Final = 0x01
FLAG_VERSION: Final = 0x02
FLAG_TAGS: Final = 0x04
RESERVED_FLAGS: Final = 0xFF & ~(FLAG_STALE | FLAG_VERSION | FLAG_TAGS)

#: Names of the header's numbered choices; a name's index is its wire id.
KINDS: Final = ("value", "response")
SERIALIZERS: Final = ("raw", "msgpack", "json", "text")
COMPRESSORS: Final = ("none", "lz4", "snappy", "zstd", "brotli", "gzip")

U16_MAX: Final = 0xFFFF
U64_MAX: Final = 0xFFFF_FFFF_FFFF_FFFF

#: What decoders take: any contiguous bytes.
BytesLike = bytes | bytearray | memoryview

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")


@dataclass(frozen=True)
class Header:
    """A parsed entry header. Times are milliseconds since the Unix epoch; `expires_at == 0` means never."""

    kind: str
    serializer: str
    compressor: str
    created_at: int
    expires_at: int
    stale_ms: int
    version: str | None
    tags: tuple[str, ...]
    #: Bytes the header takes: the payload starts at this offset.
    size: int

    @property
    def hard_expiry(self) -> int | None:
        """The moment past which the entry may not be served at all, even stale; None = never."""
        return hard_expiry(self.expires_at, self.stale_ms)


def hard_expiry(expires_at: int, stale_ms: int) -> int | None:
    """`expires_at + stale_ms` (capped at 2^64-1), or None when the entry never expires."""
    if expires_at == 0:
        return None
    return min(expires_at + stale_ms, U64_MAX)


def peek_expires_at(data: BytesLike) -> int | None:
    """Only `expires_at`, the cheapest check a store can make; None if `data` does not start like an entry."""
    if len(data) < FIXED_HEADER_LEN or bytes(data[:2]) != MAGIC:
        return None
    value: int = _U64.unpack_from(data, EXPIRES_AT_OFFSET)[0]
    return value


#: What `parse_header` returns: kind id, serializer id, compressor id, created_at, expires_at, stale_ms, version,
#: tags, and the header's size in bytes (the payload's offset).
HeaderFields = tuple[int, int, int, int, int, int, str | None, tuple[str, ...], int]

_KIND_IDS: Final = {name: i for i, name in enumerate(KINDS)}
_SERIALIZER_IDS: Final = {name: i for i, name in enumerate(SERIALIZERS)}
_COMPRESSOR_IDS: Final = {name: i for i, name in enumerate(COMPRESSORS)}

#: The fixed 23 bytes in one unpack: magic, format, kind, serializer, compressor, flags, created_at, expires_at.
_FIXED = struct.Struct("<2sBBBBBQQ")
_KIND_RESPONSE: Final = 1
_SERIALIZER_MSGPACK: Final = 1


def read_header(data: BytesLike) -> Header:
    """Parses the header of `data` (the whole entry, or at least its header) without looking at the payload.

    Raises `InvalidEntry` (truncated, bad_magic, unsupported_version, unknown_codec, bad_header).
    """
    view = data if isinstance(data, bytes) else bytes(data)
    kind, serializer, compressor, created_at, expires_at, stale_ms, version, tags, size = parse_header(view)
    return Header(
        KINDS[kind],
        SERIALIZERS[serializer],
        COMPRESSORS[compressor],
        created_at,
        expires_at,
        stale_ms,
        version,
        tags,
        size,
    )


def parse_header(view: bytes) -> HeaderFields:
    """`read_header`'s fields as a tuple, the kind, serializer and compressor as their wire ids (indexes into KINDS,
    SERIALIZERS and COMPRESSORS): what every read does first, without building a `Header`. Same checks, same
    errors. `view` is bytes."""
    try:
        magic, fmt, kind, serializer, compressor, flags, created_at, expires_at = _FIXED.unpack_from(view)
    except struct.error:
        _refuse(view)  # shorter than the fixed header
    if (
        magic != MAGIC
        or fmt != FORMAT_VERSION
        or kind >= len(KINDS)
        or serializer >= len(SERIALIZERS)
        or compressor >= len(COMPRESSORS)
        or flags & RESERVED_FLAGS
        or (kind == _KIND_RESPONSE and serializer != _SERIALIZER_MSGPACK)
    ):
        _refuse(view)
    if not flags:
        return kind, serializer, compressor, created_at, expires_at, 0, None, (), FIXED_HEADER_LEN
    length = len(view)
    pos = FIXED_HEADER_LEN
    stale_ms = 0
    if flags & FLAG_STALE:
        _need(length, pos, 8, "stale window")
        stale_ms = _U64.unpack_from(view, pos)[0]
        pos += 8
    version: str | None = None
    if flags & FLAG_VERSION:
        version, pos = _read_string(view, pos, "version")
    tags: list[str] = []
    if flags & FLAG_TAGS:
        _need(length, pos, 2, "tag count")
        (count,) = _U16.unpack_from(view, pos)
        pos += 2
        for _ in range(count):
            tag, pos = _read_string(view, pos, "tag")
            tags.append(tag)
    return kind, serializer, compressor, created_at, expires_at, stale_ms, version, tuple(tags), pos


def _refuse(view: bytes) -> NoReturn:
    """Raises the error of a fixed header `parse_header` could not take, checking in the spec's order."""
    length = len(view)
    if length < 3:
        if length >= 2 and view[:2] != MAGIC:
            raise _bad_magic(view[:2])
        raise _truncated("fixed header", FIXED_HEADER_LEN, length)
    if view[:2] != MAGIC:
        raise _bad_magic(view[:2])
    if view[2] != FORMAT_VERSION:
        raise InvalidEntry(
            UNSUPPORTED_VERSION, f"format version {view[2]} (this reader knows version {FORMAT_VERSION})"
        )
    if length < FIXED_HEADER_LEN:
        raise _truncated("fixed header", FIXED_HEADER_LEN, length)
    kind = _name(KINDS, view[3], "kind")
    serializer = _name(SERIALIZERS, view[4], "serializer")
    _name(COMPRESSORS, view[5], "compressor")
    flags = view[6]
    if flags & RESERVED_FLAGS:
        raise InvalidEntry(BAD_HEADER, f"reserved flag bits set: {flags:#04x}")
    if kind == "response" and serializer != "msgpack":
        raise InvalidEntry(BAD_HEADER, f"an HTTP response entry must use msgpack, not {serializer}")
    raise AssertionError("a header parse_header refused passes every check")  # pragma: no cover


def entry_hard_expiry(value: bytes) -> int | None:
    """The entry's hard expiry in ms, if `value` is an entry that expires (None for one that never does, and for a
    value that is not an entry): what a store reads of an entry it is given."""
    if type(value) is not bytes:
        value = bytes(value)
    try:  # the common header (no optional field) at once
        magic, fmt, kind, serializer, compressor, flags, _, expires_at = _FIXED.unpack_from(value)
    except struct.error:
        return None  # shorter than a header: not an entry
    if (
        flags == 0
        and magic == MAGIC
        and fmt == FORMAT_VERSION
        and kind < len(KINDS)
        and serializer < len(SERIALIZERS)
        and compressor < len(COMPRESSORS)
        and (kind != _KIND_RESPONSE or serializer == _SERIALIZER_MSGPACK)
    ):
        return expires_at or None
    try:
        fields = parse_header(value)
    except InvalidEntry:
        return None
    return hard_expiry(fields[4], fields[5])


def pack_header(
    *,
    kind: str,
    serializer: str,
    compressor: str,
    created_at: int,
    expires_at: int,
    stale_ms: int,
    version: str | None,
    tags: Sequence[str],
) -> bytearray:
    """The header bytes for these fields. Raises ValueError for a field the format cannot hold."""
    if (
        stale_ms == 0
        and version is None
        and type(tags) in (tuple, list)
        and not tags
        and type(created_at) is int
        and type(expires_at) is int
        and type(stale_ms) is int
        and 0 <= created_at <= U64_MAX
        and 0 <= expires_at <= U64_MAX
        and type(kind) is str
        and type(serializer) is str
        and type(compressor) is str
    ):  # the common header, fixed fields only, packed at once (anything else is checked field by field below)
        ids = (_KIND_IDS.get(kind, -1), _SERIALIZER_IDS.get(serializer, -1), _COMPRESSOR_IDS.get(compressor, -1))
        if -1 not in ids:
            return bytearray(_FIXED.pack(MAGIC, FORMAT_VERSION, *ids, 0, created_at, expires_at))
    for field, value in (("created_at", created_at), ("expires_at", expires_at), ("stale_ms", stale_ms)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{field} must be an int, not {type(value).__name__}")
        if not 0 <= value <= U64_MAX:
            raise ValueError(f"{field} {value} is outside 0..2^64-1")
    if isinstance(tags, (str, bytes)):
        raise TypeError("tags must be a sequence of strings, not a single string")
    tags = tuple(tags)
    flags = 0
    if stale_ms > 0:
        flags |= FLAG_STALE
    if version is not None:
        flags |= FLAG_VERSION
    if tags:
        flags |= FLAG_TAGS
    out = bytearray(MAGIC)
    out += bytes(
        (
            FORMAT_VERSION,
            _id(KINDS, kind, "kind"),
            _id(SERIALIZERS, serializer, "serializer"),
            _id(COMPRESSORS, compressor, "compressor"),
            flags,
        )
    )
    out += _U64.pack(created_at)
    out += _U64.pack(expires_at)
    if stale_ms > 0:
        out += _U64.pack(stale_ms)
    if version is not None:
        out += _pack_string("version", version)
    if tags:
        if len(tags) > U16_MAX:
            raise ValueError(f"{len(tags)} tags; the format allows at most {U16_MAX}")
        out += _U16.pack(len(tags))
        for tag in tags:
            out += _pack_string("tag", tag)
    return out


def _pack_string(field: str, text: str) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"{field} must be a str, not {type(text).__name__}")
    raw = text.encode("utf-8")
    if len(raw) > U16_MAX:
        raise ValueError(f"{field} is {len(raw)} bytes; the format allows at most {U16_MAX}")
    return _U16.pack(len(raw)) + raw


def _id(names: tuple[str, ...], name: str, what: str) -> int:
    try:
        return names.index(name)
    except ValueError:
        raise ValueError(f"unknown {what} {name!r} (expected one of: {', '.join(names)})") from None


def _name(names: tuple[str, ...], wire_id: int, what: str) -> str:
    if wire_id >= len(names):
        raise InvalidEntry(UNKNOWN_CODEC, f"unknown {what} id {wire_id}")
    return names[wire_id]


def _need(length: int, pos: int, n: int, what: str) -> None:
    if pos + n > length:
        raise _truncated(what, pos + n, length)


def _read_string(view: bytes, pos: int, what: str) -> tuple[str, int]:
    _need(len(view), pos, 2, what)
    (size,) = _U16.unpack_from(view, pos)
    pos += 2
    _need(len(view), pos, size, what)
    raw = view[pos : pos + size]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidEntry(BAD_HEADER, f"{what} is not valid UTF-8: {e.reason} at byte {e.start}") from None
    return text, pos + size


def _bad_magic(first_two: bytes) -> InvalidEntry:
    return InvalidEntry(BAD_MAGIC, f"starts with {first_two.hex()} instead of c14c: not a larder entry")


def _truncated(what: str, need: int, have: int) -> InvalidEntry:
    return InvalidEntry(TRUNCATED, f"{what} needs {need} bytes, entry has {have}")
