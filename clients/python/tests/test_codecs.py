"""Serializers and compressors on their own: the canonical MessagePack bytes, strict JSON, and decoders that stay
within max_size whatever a size field claims."""

from __future__ import annotations

import gzip
import json
import math
import re
import struct
from typing import Any

import brotli
import cramjam
import lz4.block
import msgpack
import pytest
import zstandard

import larder
from larder.compressors import compress, compress_lz4, decompress, lz4_if_shorter
from larder.serializers import deserialize, parse_json_text, serialize

# --- MessagePack: the canonical form of FORMAT.md §2 ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected_hex"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "cc80"),
        (255, "ccff"),
        (256, "cd0100"),
        (65535, "cdffff"),
        (65536, "ce00010000"),
        (2**32 - 1, "ceffffffff"),
        (2**32, "cf0000000100000000"),
        (2**64 - 1, "cfffffffffffffffff"),
        (-1, "ff"),
        (-32, "e0"),
        (-33, "d0df"),
        (-128, "d080"),
        (-129, "d1ff7f"),
        (-32768, "d18000"),
        (-32769, "d2ffff7fff"),
        (-(2**31), "d280000000"),
        (-(2**31) - 1, "d3ffffffff7fffffff"),
        (-(2**63), "d38000000000000000"),
        (1.5, "cb3ff8000000000000"),
        (-0.0, "cb8000000000000000"),
        (1.0, "cb3ff0000000000000"),
        ("", "a0"),
        ("é", "a2c3a9"),
        ("x" * 32, "d920" + "78" * 32),
        (b"\x00", "c40100"),
        (None, "c0"),
        (True, "c3"),
        ([], "90"),
        ({}, "80"),
        ({"b": 1, "a": 2}, "82a16201a16102"),
    ],
)
def test_msgpack_is_canonical(value: Any, expected_hex: str) -> None:
    assert serialize("msgpack", value).hex() == expected_hex


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, [1, {"a": 2**70}]])
def test_integers_beyond_64_bits_cannot_be_encoded(value: Any) -> None:
    with pytest.raises(ValueError, match="MessagePack range"):
        larder.encode(value)


def test_msgpack_decoding_keeps_odd_but_valid_objects() -> None:
    # float32, str8 for a short string, ext types, and maps keyed by arrays (which a dict cannot hold as lists)
    assert deserialize("msgpack", bytes.fromhex("92ca3fc00000d903616263")) == [1.5, "abc"]
    assert deserialize("msgpack", bytes.fromhex("d40501")) == msgpack.ExtType(5, b"\x01")
    assert deserialize("msgpack", bytes.fromhex("81920102a178")) == {(1, 2): "x"}


@pytest.mark.parametrize(
    ("payload_hex", "why"),
    [
        ("0101", "trailing"),
        ("c1", "reserved marker"),
        ("ab68656c6c6f", "truncated"),
        ("ddffffffff", "huge array claim"),
        ("a2fffe", "str not UTF-8"),
        ("81810102a178", "map keyed by a map"),
        ("91" * 1100 + "01", "nested too deeply"),
        ("", "empty"),
    ],
)
def test_bad_msgpack_is_bad_value(payload_hex: str, why: str) -> None:
    with pytest.raises(larder.InvalidEntry) as error:
        deserialize("msgpack", bytes.fromhex(payload_hex))
    assert error.value.kind == "bad_value", why


# --- JSON ---------------------------------------------------------------------------------------------------------


def test_json_numbers_follow_the_spec() -> None:
    value = parse_json_text("[1, 1.0, -0, -0.0, 1e2, 18446744073709551615, -9223372036854775808, 0.1]")
    assert [type(v) for v in value] == [int, float, int, float, float, int, int, float]
    assert value[2] == 0
    assert math.copysign(1, value[3]) == -1
    assert serialize("msgpack", value).hex() == (
        "98" + "01" + "cb3ff0000000000000" + "00" + "cb8000000000000000" + "cb4059000000000000"
        "cfffffffffffffffff" + "d38000000000000000" + "cb3fb999999999999a"
    )


@pytest.mark.parametrize(
    "text",
    ["NaN", "[Infinity]", "-Infinity", '"\\ud800"', '["\\udc00x"]', '{"\\ud83c": 1}', "01", "[1,]", "1 2", ""],
)
def test_json_that_rfc_8259_or_other_languages_refuse_is_refused(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - json's own errors and ours are all ValueErrors
        parse_json_text(text)
    with pytest.raises(larder.InvalidEntry) as error:
        deserialize("json", text.encode())
    assert error.value.kind == "bad_value"


def test_json_accepts_surrogate_pairs_and_keeps_map_order() -> None:
    assert parse_json_text('{"z": "\\ud83c\\udf5e", "a": 1}') == {"z": "🍞", "a": 1}
    assert list(parse_json_text('{"z": 1, "a": 2}')) == ["z", "a"]


def test_json_payload_must_be_utf8() -> None:
    with pytest.raises(larder.InvalidEntry) as error:
        deserialize("json", '"é"'.encode("utf-16"))
    assert error.value.kind == "bad_value"


def test_json_serializer_writes_compact_utf8() -> None:
    assert serialize("json", {"b": [1, 2.5, "é\n"], "a": None}) == '{"b":[1,2.5,"é\\n"],"a":null}'.encode()
    # Refused as the json module refuses it (allow_nan=False), in its words at the installed Python.
    try:
        json.dumps(math.inf, allow_nan=False)
    except ValueError as e:
        refusal = str(e)
    else:
        pytest.fail("json.dumps wrote inf")
    with pytest.raises(ValueError, match=re.escape(refusal)):
        serialize("json", math.inf)


def test_text_and_raw_take_only_their_types() -> None:
    assert serialize("text", "é") == b"\xc3\xa9"
    assert serialize("raw", "é") == b"\xc3\xa9"
    assert serialize("raw", bytearray(b"\x00\xff")) == b"\x00\xff"
    with pytest.raises(TypeError):
        serialize("text", b"bytes")
    with pytest.raises(TypeError):
        serialize("raw", 1)
    with pytest.raises(larder.InvalidEntry):
        deserialize("text", b"\xff")


# --- compressors: bounded decoders -------------------------------------------------------------------------------

DATA = b"larder entry payload " * 500  # 10,500 bytes, compresses well


@pytest.mark.parametrize("name", larder.COMPRESSORS)
def test_round_trip_and_limits(name: str) -> None:
    packed = compress(name, DATA)
    assert decompress(name, packed, len(DATA)) == DATA
    with pytest.raises(larder.InvalidEntry) as error:
        decompress(name, packed, len(DATA) - 1)
    assert error.value.kind == "too_large"


@pytest.mark.parametrize("name", ["zstd", "brotli", "gzip"])
def test_levels_change_the_bytes_not_the_content(name: str) -> None:
    low, high = compress(name, DATA, 1), compress(name, DATA, 9)
    assert decompress(name, low, len(DATA)) == decompress(name, high, len(DATA)) == DATA


def test_lz4_wire_form_is_a_size_prefix_and_one_block() -> None:
    packed = compress("lz4", DATA)
    assert struct.unpack("<I", packed[:4])[0] == len(DATA)
    assert lz4.block.decompress(packed[4:], uncompressed_size=len(DATA)) == DATA


def _noise(n: int, seed: int) -> bytes:
    """`n` bytes LZ4 cannot shrink (a linear congruential stream's high bytes)."""
    out = bytearray(n)
    x = seed
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        out[i] = x >> 56
    return bytes(out)


@pytest.mark.parametrize(
    "size", [1, 100, 1024, 4096, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1, 64 * 1024, 256 * 1024, 256 * 1024 + 1]
)
def test_lz4_if_shorter_is_the_block_when_strictly_shorter(size: int) -> None:
    """The LZ4 attempt of a write (`lz4_if_shorter`, in the thread's kept buffer, or given room for a shorter block
    only): the bytes `compress_lz4` writes when they are strictly shorter, None when they are not, around every
    size where its buffer changes."""
    for data in (DATA * (size // len(DATA) + 1))[:size], _noise(size, size), b"x" * (size - 1) + _noise(1, 3):
        whole = bytes(compress_lz4(data))
        attempt = lz4_if_shorter(data)
        if len(whole) < len(data):
            assert attempt is not None
            assert bytes(attempt) == whole
            assert decompress("lz4", bytes(attempt), size) == data
        else:
            assert attempt is None


@pytest.mark.parametrize(
    ("payload", "max_size", "kind"),
    [
        (struct.pack("<I", 2**32 - 1) + b"\x00", larder.DEFAULT_MAX_SIZE, "too_large"),
        (struct.pack("<I", 255 * 4 + 17) + b"\x1f\x61\x01\x00", larder.DEFAULT_MAX_SIZE, "corrupt_payload"),
        (struct.pack("<I", 100), 1000, "corrupt_payload"),
        (b"\x01\x02\x03", 1000, "corrupt_payload"),
    ],
)
def test_lz4_size_prefix_is_checked_before_allocating(payload: bytes, max_size: int, kind: str) -> None:
    with pytest.raises(larder.InvalidEntry) as error:
        decompress("lz4", payload, max_size)
    assert error.value.kind == kind


def test_lz4_block_shorter_than_its_prefix_is_corrupt() -> None:
    block = lz4.block.compress(b"abc" * 100, store_size=False)
    with pytest.raises(larder.InvalidEntry) as error:
        decompress("lz4", struct.pack("<I", 301) + block, 1000)
    assert error.value.kind == "corrupt_payload"


def test_snappy_is_raw_not_framed() -> None:
    assert decompress("snappy", bytes(cramjam.snappy.compress_raw(DATA)), len(DATA)) == DATA
    with pytest.raises(larder.InvalidEntry) as error:
        decompress("snappy", bytes(cramjam.snappy.compress(DATA)), len(DATA))
    assert error.value.kind == "corrupt_payload"


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (b"\xff\xff\xff\xff\x0f", "too_large"),  # a 4 GiB preamble
        (b"\x80\x80\x80\x80\x80\x01", "too_large"),  # 32 GiB: beyond 32 bits, still too large first
        (b"\xff" * 9 + b"\x01", "too_large"),  # 2^64 - 1, the longest preamble (10 bytes)
        (b"\x80" * 9 + b"\x02", "corrupt_payload"),  # bits past the 64th are dropped: 0, and no block
        (b"\x80" * 10 + b"\x00", "corrupt_payload"),  # 11 bytes: longer than any u64 varint
        (b"\x85\x80\x80\x80\x80\x00\x10hello", "corrupt_payload"),  # 5, written in 6 bytes: snappy refuses
        (b"\xff\xff", "corrupt_payload"),  # cut short
        (b"", "corrupt_payload"),
        (b"\x05ab", "corrupt_payload"),
    ],
)
def test_snappy_preamble_is_checked_before_allocating(payload: bytes, kind: str) -> None:
    with pytest.raises(larder.InvalidEntry) as error:
        decompress("snappy", payload, 1000)
    assert error.value.kind == kind


def test_zstd_needs_the_content_size_and_one_frame() -> None:
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress(DATA)
    with pytest.raises(larder.InvalidEntry) as error:
        decompress("zstd", without_size, len(DATA))
    assert error.value.kind == "corrupt_payload"
    frame = compress("zstd", DATA)
    assert zstandard.frame_content_size(frame) == len(DATA)
    for bad in (frame + b"\x00", frame + frame, frame[:-1]):
        with pytest.raises(larder.InvalidEntry) as error:
            decompress("zstd", bad, 2 * len(DATA))
        assert error.value.kind == "corrupt_payload"


@pytest.mark.parametrize("name", ["brotli", "gzip"])
def test_streams_stop_at_max_size_and_refuse_truncation_and_trailing_bytes(name: str) -> None:
    bomb = compress(name, b"\x00" * (8 << 20))  # 8 MiB of zeros, a few KiB compressed
    assert len(bomb) < 20_000
    with pytest.raises(larder.InvalidEntry) as error:
        decompress(name, bomb, 65536)
    assert error.value.kind == "too_large"
    packed = compress(name, DATA)
    for bad in (packed[:-5], packed + b"\x00", b"\x1f\x8b\x08garbage"):
        with pytest.raises(larder.InvalidEntry) as error:
            decompress(name, bad, len(DATA))
        assert error.value.kind == "corrupt_payload"


def test_gzip_reads_members_other_encoders_write() -> None:
    member = gzip.compress(DATA, compresslevel=9, mtime=1_700_000_000)
    assert decompress("gzip", member, len(DATA)) == DATA
    assert decompress("brotli", brotli.compress(DATA, quality=11), len(DATA)) == DATA


def test_none_checks_the_stored_length() -> None:
    assert decompress("none", b"abc", 3) == b"abc"
    with pytest.raises(larder.InvalidEntry) as error:
        decompress("none", b"abcd", 3)
    assert error.value.kind == "too_large"
