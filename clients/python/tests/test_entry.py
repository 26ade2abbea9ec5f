"""Entries as a whole: the header fields, the compression rule, and what the encoder refuses."""

from __future__ import annotations

import random

import msgpack
import pytest

import larder
from larder.header import FIXED_HEADER_LEN
from support import bare_header

EXAMPLE = bytes.fromhex(
    "c14c01000100060068e5cf8b0100006052e6cf8b0100000200763101000600757365723a3782a2696407a46e616d65a3416461"
)


def test_header_is_read_without_the_payload() -> None:
    # the worked example with its payload replaced by garbage: the header still reads, decode refuses
    damaged = EXAMPLE[:-14] + b"\xc1\xc1"
    header = larder.read_header(damaged)
    assert (header.version, header.tags, header.expires_at, header.size) == ("v1", ("user:7",), 1700000060000, 37)
    assert header.hard_expiry == 1700000060000
    assert larder.peek_expires_at(damaged) == 1700000060000
    with pytest.raises(larder.InvalidEntry) as error:
        larder.decode(damaged)
    assert error.value.kind == "bad_value"


def test_peek_expires_at_needs_the_fixed_header() -> None:
    assert larder.peek_expires_at(EXAMPLE[:FIXED_HEADER_LEN]) == 1700000060000
    assert larder.peek_expires_at(EXAMPLE[: FIXED_HEADER_LEN - 1]) is None
    assert larder.peek_expires_at(b"\x00" + EXAMPLE[1:]) is None


def test_ttl_stale_and_hard_expiry() -> None:
    entry = larder.decode(larder.encode("v", created_at=1000, ttl_ms=500, stale_ms=250))
    assert (entry.expires_at, entry.stale_ms, entry.hard_expiry) == (1500, 250, 1750)
    never = larder.decode(larder.encode("v", created_at=1000, ttl_ms=0, stale_ms=250))
    assert (never.expires_at, never.hard_expiry) == (0, None)
    capped = larder.decode(larder.encode("v", created_at=2**64 - 10, ttl_ms=100, stale_ms=2**64 - 1))
    assert capped.expires_at == capped.hard_expiry == 2**64 - 1


def test_created_at_defaults_to_now() -> None:
    before = larder.now_ms()
    entry = larder.decode(larder.encode(1))
    assert before <= entry.created_at <= larder.now_ms()


def test_optional_fields_are_written_only_when_given() -> None:
    plain = larder.encode(1, created_at=0)
    assert len(plain) == FIXED_HEADER_LEN + 1
    assert plain[6] == 0
    assert larder.encode(1, created_at=0, version="")[6] == 0x02  # the empty version is a version
    assert larder.decode(larder.encode(1, created_at=0, version="")).version == ""
    assert larder.encode(1, created_at=0, stale_ms=1, tags=["t"])[6] == 0x05
    assert larder.decode(plain).version is None


def test_compression_threshold_and_keep_only_if_smaller() -> None:
    text = "a" * 100
    payload_len = len(larder.encode(text, created_at=0, compressor="none")) - FIXED_HEADER_LEN
    at = larder.read_header(larder.encode(text, created_at=0, threshold=payload_len))
    below = larder.read_header(larder.encode(text, created_at=0, threshold=payload_len + 1))
    assert (at.compressor, below.compressor) == ("lz4", "none")
    tiny = larder.encode(1, created_at=0, compressor="zstd", threshold=0)
    assert larder.read_header(tiny).compressor == "none"  # tried, but it did not shrink
    random_bytes = random.Random(7).randbytes(1024)  # incompressible
    assert larder.read_header(larder.encode(random_bytes, serializer="raw", threshold=0)).compressor == "none"


@pytest.mark.parametrize("compressor", larder.COMPRESSORS)
def test_every_compressor_is_recorded_when_it_pays(compressor: str) -> None:
    data = larder.encode({"page": "<li>item</li>" * 200}, compressor=compressor, created_at=0)
    entry = larder.decode(data)
    assert entry.compressor == compressor
    assert entry.value == {"page": "<li>item</li>" * 200}


def test_responses_round_trip_with_duplicate_headers() -> None:
    response = larder.HttpResponse(
        301,
        [("location", "/new"), (b"set-cookie", b"a=1"), ("Set-Cookie", "b=2"), (b"x-bin", b"\xff\x00")],
        b"",
    )
    entry = larder.decode(larder.encode_response(response, created_at=0, ttl_ms=60_000, tags=["page:1"]))
    assert entry.kind == "response"
    assert entry.serializer == "msgpack"
    assert entry.value == response
    assert entry.value.header("SET-COOKIE") == b"a=1"
    assert entry.value.header("missing") is None


def test_response_payload_rules() -> None:
    with pytest.raises(ValueError, match="status"):
        larder.HttpResponse(99)
    with pytest.raises(ValueError, match="content_encoding"):
        larder.HttpResponse(200, content_encoding="deflate")
    with pytest.raises(TypeError):
        larder.encode_response({"status": 200})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"created_at": -1}, ValueError),
        ({"created_at": 2**64}, ValueError),
        ({"expires_at": 2**64}, ValueError),
        ({"stale_ms": -5}, ValueError),
        ({"created_at": 1.5}, TypeError),
        ({"ttl_ms": 5, "expires_at": 5}, ValueError),
        ({"ttl_ms": -1}, ValueError),
        ({"version": "v" * 65536}, ValueError),
        ({"version": b"v1"}, TypeError),
        ({"tags": "one-string"}, TypeError),
        ({"tags": ["t"] * 65536}, ValueError),
        ({"tags": ["\ud800"]}, ValueError),
        ({"serializer": "yaml"}, ValueError),
        ({"compressor": "lzma"}, ValueError),
        ({"threshold": -1}, ValueError),
        ({"level": "9"}, TypeError),
    ],
)
def test_what_the_format_cannot_hold_is_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        larder.encode("v", **kwargs)  # type: ignore[arg-type]


def _nested(levels: int, kind: str) -> object:
    """`levels` lists (or tuples, or dicts) around the integer 1."""
    value: object = 1
    for _ in range(levels):
        value = [value] if kind == "array" else (value,) if kind == "tuple" else {"a": value}
    return value


@pytest.mark.parametrize("kind", ["array", "tuple", "map"])
@pytest.mark.parametrize("serializer", ["msgpack", "json"])
def test_values_nested_more_than_100_deep_are_refused(serializer: str, kind: str) -> None:
    assert larder.MAX_NESTING == 100
    if serializer == "json" and kind == "tuple":
        kind = "array"  # json writes tuples as arrays: same depth
    entry = larder.decode(larder.encode(_nested(100, kind), serializer=serializer, created_at=0))
    assert repr(entry.value).count("[" if kind != "map" else "{") == 100
    with pytest.raises(ValueError, match="nested more than 100 levels deep"):
        larder.encode(_nested(101, kind), serializer=serializer)


def test_containers_used_as_keys_count_as_nested() -> None:
    key: object = 1
    for _ in range(99):
        key = (key,)
    assert larder.decode(larder.encode({key: 1}, created_at=0)).value == {key: 1}  # 99 tuples inside a map: 100
    with pytest.raises(ValueError, match="nested more than 100 levels deep"):
        larder.encode({(key,): 1})
    with pytest.raises(ValueError, match="nested more than 100 levels deep"):
        larder.encode([{key: 1}])
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="nested more than 100 levels deep"):
        larder.encode(looped)
    # text and raw hold no containers; responses have a fixed shape
    assert larder.decode(larder.encode("[" * 500, serializer="text")).value == "[" * 500


def test_longest_version_and_most_tags_fit() -> None:
    entry = larder.decode(larder.encode("v", created_at=0, version="é" * 32767 + "x", tags=["t"] * 65535))
    assert len(entry.version or "") == 32768
    assert len(entry.tags) == 65535


def test_decode_takes_bytes_like_objects_only() -> None:
    assert larder.decode(bytearray(EXAMPLE)).value == {"id": 7, "name": "Ada"}
    assert larder.decode(memoryview(EXAMPLE)).tags == ("user:7",)
    with pytest.raises(TypeError):
        larder.decode(EXAMPLE.hex())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_size"):
        larder.decode(EXAMPLE, max_size=-1)


def test_invalid_entry_carries_its_kind() -> None:
    with pytest.raises(larder.InvalidEntry) as error:
        larder.decode(b"\xc1\x4c\x02")
    assert error.value.kind == "unsupported_version"
    assert str(error.value).startswith("unsupported_version: ")
    assert isinstance(error.value, ValueError)
    with pytest.raises(ValueError, match="unknown error kind"):
        larder.InvalidEntry("oops", "detail")


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ([200, [], "body as str", "identity"], "body must be bin"),
        ([200, [], b"", b"identity"], "content_encoding must be str"),
        ([200, [], b"", "GZIP"], "content_encoding is one of four exact tokens"),
        ([200, [[b"a", b"b", b"c"]], b"", "identity"], "a header is a pair"),
        ([200, [[b"a", 1]], b"", "identity"], "header values are bytes"),
        ([1000, [], b"", "identity"], "status is 100..999"),
        ([200.0, [], b"", "identity"], "status is an integer"),
        ([-200, [], b"", "identity"], "status is unsigned"),
        ({"status": 200}, "the payload is an array"),
        ([200, [], b""], "at least four elements"),
    ],
)
def test_response_payloads_that_do_not_fit_are_bad_values(payload: object, why: str) -> None:
    with pytest.raises(larder.InvalidEntry) as error:
        larder.decode(bare_header("response") + msgpack.packb(payload, use_bin_type=True))
    assert error.value.kind == "bad_value", why


def test_response_payloads_other_encoders_may_write() -> None:
    # status as int16, header names and values as str, reserved elements of any type (a timestamp ext here)
    payload = bytes.fromhex("96d100c89192a3782d61a162c400a86964656e74697479c0d6ff00000005")
    response = larder.decode(bare_header("response") + payload).value
    assert response == larder.HttpResponse(200, [(b"x-a", b"b")])


def test_the_package_docstring_example_runs() -> None:
    import doctest

    result = doctest.testmod(larder)
    assert (result.failed, result.attempted) == (0, 4)
