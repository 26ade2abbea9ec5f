"""The compressors of spec/FORMAT.md §3, in the wire forms every language can read, each decoder bounded.

A decoder never produces more than `max_size` bytes and never allocates according to a size field it has not
checked: the LZ4 prefix and the Snappy preamble are checked against `max_size` (and LZ4's largest possible ratio)
before anything is allocated, zstd must record its content size, and brotli and gzip are decoded incrementally with
an output limit. Every failure is an `InvalidEntry` of kind `too_large` or `corrupt_payload`.

Compressor objects are expensive to set up next to a small value, so the zstd contexts are reused, one per thread, and
so is the buffer a large payload's LZ4 attempt is made in (`lz4_if_shorter`: cramjam's `compress_block` zeroes a new
buffer of the worst-case size at every call, then copies every byte of a payload LZ4 cannot shrink into it).
"""

from __future__ import annotations

import gzip
import struct
import threading
import zlib
from typing import Final

import brotli
import cramjam
import lz4.block
import zstandard

from .errors import CORRUPT_PAYLOAD, TOO_LARGE, InvalidEntry
from .header import U64_MAX

#: Default maximum decompressed size: 64 MiB.
DEFAULT_MAX_SIZE: Final = 64 * 1024 * 1024

#: Levels used when none is given (spec/FORMAT.md §3); the other codecs have no level.
DEFAULT_LEVELS: Final = {"zstd": 3, "brotli": 4, "gzip": 6}

#: The most an LZ4 block can expand: each extra length byte adds at most 255 bytes of output.
LZ4_MAX_RATIO: Final = 255

_ZSTD_MAX_LEVEL: Final = 22
_U32_MAX: Final = 0xFFFF_FFFF
#: The longest varint a u64 takes (7 bits a byte), and the longest a raw Snappy preamble (a u32) may take.
_VARINT_MAX_BYTES: Final = 10
_SNAPPY_PREAMBLE_MAX_BYTES: Final = 5
_LZ4_PREFIX = struct.Struct("<I")


#: The largest payload whose LZ4 attempt is made in the thread's kept buffer (`lz4_if_shorter`); a larger one is
#: compressed into a buffer of its own, so that no thread keeps more than about this much for it.
_LZ4_KEPT_MAX: Final = 256 * 1024
#: From this many bytes on, the LZ4 attempt is made in a kept buffer with room for a strictly shorter block only
#: (`lz4_if_shorter`): below it, the exception LZ4's failure raises (~0.5 µs) and the view cost more than the zeroed
#: buffer and the copy of literals they save (bench/RESULTS.md, fourth pass).
_LZ4_LIMITED_FROM: Final = 32 * 1024


class _Contexts(threading.local):
    """zstd contexts and the LZ4 attempt's buffer, kept per thread (they are not safe to share between threads)."""

    def __init__(self) -> None:
        self.compressors: dict[int, zstandard.ZstdCompressor] = {}
        self.decompressor: zstandard.ZstdDecompressor | None = None
        self.lz4_out = memoryview(bytearray(0))


_contexts = _Contexts()


def compress(name: str, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed with the compressor called `name`, at `level` (None = the codec's default)."""
    if level is None:
        level = DEFAULT_LEVELS.get(name)
    if name == "none":
        return bytes(data)
    if name == "lz4":
        return bytes(compress_lz4(data))
    if name == "snappy":
        return bytes(cramjam.snappy.compress_raw(data))
    if name == "zstd":
        zstd_level = min(level if level is not None else 3, _ZSTD_MAX_LEVEL)
        compressor = _contexts.compressors.get(zstd_level)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(level=zstd_level, write_content_size=True)
            _contexts.compressors[zstd_level] = compressor
        return compressor.compress(data)
    if name == "brotli":
        quality = _clamp(level if level is not None else 4, 0, 11)
        return bytes(brotli.compress(data, quality=quality, lgwin=22))
    if name == "gzip":
        return gzip.compress(data, compresslevel=_clamp(level if level is not None else 6, 0, 9), mtime=0)
    raise ValueError(f"unknown compressor {name!r}")


def compress_lz4(data: bytes | memoryview) -> bytes | cramjam.Buffer:
    """`data` as the format's LZ4 payload: its 4-byte little-endian uncompressed size, then one LZ4 block (what
    python-lz4's `lz4.block.compress(data, store_size=True)` writes). cramjam's encoder: a third faster on values of
    tens of KiB, no slower on small ones; its result is bytes-like (`len`, `b"".join`) without a copy."""
    if len(data) > _U32_MAX:
        raise ValueError(f"lz4 input of {len(data)} bytes exceeds 4 GiB")
    return cramjam.lz4.compress_block(data)


def lz4_if_shorter(data: bytes | memoryview) -> bytes | cramjam.Buffer | memoryview | None:
    """`compress_lz4(data)` if it is strictly shorter than `data` (FORMAT.md §3's rule for keeping it), else None.
    A payload of `_LZ4_LIMITED_FROM` bytes or more is compressed into a buffer the thread keeps, given room for a
    strictly shorter block only: LZ4 then gives up on a payload it cannot shrink without writing it out as literals,
    and no new buffer of the worst-case size is zeroed (`compress_lz4` does both at every call: 64 KiB of random text,
    5.0 -> 3.9 µs). The view returned is valid only until the thread's next call: the caller copies it out at once
    (joined into the entry). A payload LZ4 shrinks gets the same bytes as from `compress_lz4`."""
    n = len(data)
    if n < _LZ4_LIMITED_FROM:
        block = compress_lz4(data)
        return block if len(block) < n else None
    if n > _U32_MAX:
        raise ValueError(f"lz4 input of {n} bytes exceeds 4 GiB")
    if n > _LZ4_KEPT_MAX:
        out = memoryview(bytearray(n - 1))
    else:
        out = _contexts.lz4_out
        if len(out) < n - 1:
            out = _contexts.lz4_out = memoryview(bytearray(n - 1))
        out = out[: n - 1]
    try:
        size = cramjam.lz4.compress_block_into(data, out)
    except cramjam.CompressionError:
        return None  # (LZ4 could not write a block shorter than the payload)
    return out[:size]


def decompress(name: str, data: bytes | memoryview, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompresses `data`, refusing to produce more than `max_size` bytes. Raises only `InvalidEntry`. LZ4 reads a
    memoryview in place; the other codecs are given bytes."""
    if name == "lz4":
        return _lz4_decompress(data, max_size)
    if type(data) is not bytes:
        data = bytes(data)
    if name == "none":
        _check_size(len(data), max_size)
        return data
    if name == "snappy":
        return _snappy_decompress(data, max_size)
    if name == "zstd":
        return _zstd_decompress(data, max_size)
    if name == "brotli":
        return _brotli_decompress(data, max_size)
    if name == "gzip":
        return _gzip_decompress(data, max_size)
    raise ValueError(f"unknown compressor {name!r}")


def _lz4_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    if len(data) < 4:
        raise _corrupt(f"lz4 payload of {len(data)} bytes has no 4-byte size prefix")
    (declared,) = _LZ4_PREFIX.unpack_from(data)
    _check_size(declared, max_size)
    block = data[4:]
    if declared > LZ4_MAX_RATIO * len(block) + 16:
        raise _corrupt(
            f"lz4 size prefix claims {declared} bytes from a {len(block)}-byte block, more than LZ4 can expand"
        )
    try:
        out = bytes(lz4.block.decompress(block, uncompressed_size=declared))
    except (lz4.block.LZ4BlockError, ValueError, OverflowError) as e:
        raise _corrupt(f"lz4: {e}") from None
    if len(out) != declared:
        raise _corrupt(f"lz4 block decoded to {len(out)} bytes, prefix declared {declared}")
    return out


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    declared, preamble_len = _snappy_preamble(data)
    _check_size(declared, max_size)
    # A raw Snappy block's length is a u32 written in at most 5 bytes; the Rust decoder refuses anything else.
    if preamble_len > _SNAPPY_PREAMBLE_MAX_BYTES:
        raise _corrupt(f"snappy length preamble of {preamble_len} bytes (a raw block's takes at most 5)")
    if declared > _U32_MAX:
        raise _corrupt(f"snappy preamble claims {declared} bytes, more than a raw snappy block can hold")
    try:
        out = bytes(cramjam.snappy.decompress_raw(data))
    except (cramjam.DecompressionError, ValueError) as e:
        raise _corrupt(f"snappy: {e}") from None
    if len(out) != declared:
        raise _corrupt(f"snappy block decoded to {len(out)} bytes, preamble declared {declared}")
    return out


def _snappy_preamble(data: bytes) -> tuple[int, int]:
    """The uncompressed length a raw Snappy block starts with (a little-endian base-128 varint), and its length in
    bytes.

    Read as a u64 of at most 10 bytes, as the Rust implementation reads it, so that any absurd length is reported as
    too large (FORMAT.md §3: the preamble is checked against max_size first), even one beyond 32 bits.
    """
    if not data:
        raise _corrupt("snappy payload is empty")
    value = 0
    for i, byte in enumerate(data):
        if i == _VARINT_MAX_BYTES:
            raise _corrupt(f"snappy length preamble is longer than {_VARINT_MAX_BYTES} bytes")
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value & U64_MAX, i + 1
    raise _corrupt("snappy length preamble is cut short")


def _zstd_decompress(data: bytes, max_size: int) -> bytes:
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as e:
        raise _corrupt(f"not a zstd frame: {e}") from None
    if declared in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR) or declared < 0:
        raise _corrupt("zstd frame does not record its content size")
    _check_size(declared, max_size)
    decompressor = _contexts.decompressor
    if decompressor is None:
        decompressor = _contexts.decompressor = zstandard.ZstdDecompressor()
    try:
        out = decompressor.decompress(data, max_output_size=declared, allow_extra_data=False)
    except zstandard.ZstdError as e:
        raise _corrupt(f"zstd: {e}") from None
    if len(out) != declared:
        raise _corrupt(f"zstd frame decoded to {len(out)} bytes, header declared {declared}")
    return out


def _brotli_decompress(data: bytes, max_size: int) -> bytes:
    decoder = brotli.Decompressor()
    chunks: list[bytes] = []
    total = 0
    try:
        chunk = decoder.process(data, output_buffer_limit=max_size + 1)
        while True:
            chunks.append(chunk)
            total += len(chunk)
            if total > max_size:
                raise _too_large("brotli", max_size)
            if decoder.is_finished():
                break
            if decoder.can_accept_more_data():
                # The decoder wants more input and there is none: the stream is cut short.
                raise _corrupt("brotli stream is truncated")
            chunk = decoder.process(b"", output_buffer_limit=max_size + 1 - total)
            if not chunk and not decoder.is_finished() and not decoder.can_accept_more_data():
                raise _corrupt("brotli decoder made no progress")
    except brotli.error as e:
        raise _corrupt(f"brotli: {e}") from None
    return b"".join(chunks)


def _gzip_decompress(data: bytes, max_size: int) -> bytes:
    decoder = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        # zlib stops at max_length bytes of output, at the end of the member, or when the input runs out.
        out = decoder.decompress(data, max_size + 1)
    except zlib.error as e:
        raise _corrupt(f"gzip: {e}") from None
    if len(out) > max_size:
        raise _too_large("gzip", max_size)
    if not decoder.eof:
        raise _corrupt("gzip member is truncated")
    if decoder.unused_data:
        raise _corrupt(f"{len(decoder.unused_data)} bytes after the gzip member")
    return out


def _check_size(size: int, max_size: int) -> None:
    if size > max_size:
        raise InvalidEntry(TOO_LARGE, f"payload of {size} bytes exceeds the {max_size}-byte limit")


def _too_large(codec: str, max_size: int) -> InvalidEntry:
    return InvalidEntry(TOO_LARGE, f"{codec} payload decompresses to more than the {max_size}-byte limit")


def _corrupt(detail: str) -> InvalidEntry:
    return InvalidEntry(CORRUPT_PAYLOAD, detail)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))
