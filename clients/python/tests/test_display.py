"""Display JSON and the `inspect` report (spec/CLI.md), checked against the texts the spec writes out."""

from __future__ import annotations

import math
import struct
from typing import Any

import pytest

import larder
from larder.display import DisplayTooDeep, DisplayTooLarge, JsonIntegerText, display_json, float_text
from larder.msgpack_reader import Ext, MapPairs, read_whole_tree, within_read_budget
from larder.report import inspect_text, time_text
from support import bare_header


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-7, "1.5e-07"),
        (123456789.0, "123456789.0"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.2345e16, "1.2345e+16"),
        (1e300, "1e+300"),
        (5e-324, "5e-324"),
        (-0.0, "-0.0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (struct.unpack("<f", struct.pack("<f", 0.1))[0], "0.10000000149011612"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_floats_print_as_python_repr(value: float, text: str) -> None:
    assert float_text(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"id": 7, "name": "Ada"}, '{"id":7,"name":"Ada"}'),
        ('q"b\\s\b\f\n\r\t\x01\x1f\x7f é🍞', '"q\\"b\\\\s\\b\\f\\n\\r\\t\\u0001\\u001f\x7f é🍞"'),
        (b"\xc3\xa9", '"é"'),
        (b"\xff\x00raw", '{"$base64":"/wByYXc="}'),
        (Ext(-1, b"\x00\x00\x00\x05"), '{"$ext":-1,"$base64":"AAAABQ=="}'),
        (MapPairs([("a", 1), ("a", 2)]), '{"a":1,"a":2}'),
        (MapPairs([(1, "int"), (None, 0), (1.5, 0), (True, 0)]), '{"1":"int","null":0,"1.5":0,"true":0}'),
        (MapPairs([([1, "x"], 0), (MapPairs([("k", "v")]), 1)]), '{"[1,\\"x\\"]":0,"{\\"k\\":\\"v\\"}":1}'),
        (MapPairs([(b"\xff", 0), (b"ok", 1)]), '{"{\\"$base64\\":\\"/w==\\"}":0,"ok":1}'),
        ([None, True, False, -1, 2**64 - 1, [], MapPairs()], "[null,true,false,-1,18446744073709551615,[],{}]"),
    ],
)
def test_display_json(value: Any, text: str) -> None:
    assert display_json(value) == text


def test_display_reads_msgpack_exactly() -> None:
    # a timestamp ext keeps its own bytes; a str that is not UTF-8 shows as base64; duplicate keys stay
    tree = read_whole_tree(bytes.fromhex("93d6ff00000005a2fffe82a16101a16102"))
    assert display_json(tree) == '[{"$ext":-1,"$base64":"AAAABQ=="},{"$base64":"//4="},{"a":1,"a":2}]'


def test_deep_nesting_needs_no_recursion() -> None:
    depth = 1024  # as deep as msgpack-python goes, and far past Python's default recursion limit
    assert display_json(read_whole_tree(b"\x91" * (depth - 1) + b"\x90")) == "[" * depth + "]" * depth
    with pytest.raises(larder.InvalidEntry):
        read_whole_tree(b"\x91" * depth + b"\x90")


def test_keys_within_keys_cannot_blow_up_the_display() -> None:
    # {{{1: 2}: 2}: 2}: each level of map keys escapes the one inside it, doubling its backslashes
    assert display_json(read_whole_tree(b"\x81" * 3 + b"\x01" + b"\x02" * 3)) == r'{"{\"{\\\"1\\\":2}\":2}":2}'
    deep = b"\x81" * 60 + b"\x01" + b"\x02" * 60  # 121 bytes that would display as 2^60 backslashes
    with pytest.raises(DisplayTooLarge):
        display_json(read_whole_tree(deep), limit=10_000)
    with pytest.raises(larder.InvalidEntry) as error:
        inspect_text(bare_header() + deep)
    assert error.value.kind == "too_large"


def test_depth_is_counted_from_the_top_keys_included() -> None:
    at_limit = read_whole_tree(b"\x91" * 99 + b"\x81\x01\x02")  # 99 arrays around a map: the map at level 99
    assert display_json(at_limit, max_depth=100) == "[" * 99 + '{"1":2}' + "]" * 99
    for too_deep in (
        b"\x91" * 101 + b"\x01",
        b"\x91" * 100 + b"\x80",
        b"\x91" * 99 + b"\x81\x90\x02",  # an array used as a key, inside a map at level 99
        b"\x91" * 99 + b"\x81\x01\x90",
    ):
        with pytest.raises(DisplayTooDeep):
            display_json(read_whole_tree(too_deep), max_depth=100)
    assert display_json([[[]]], max_depth=3) == "[[[]]]"
    with pytest.raises(DisplayTooDeep):
        display_json([[[[]]]], max_depth=3)
    with pytest.raises(larder.InvalidEntry) as error:
        inspect_text(bare_header() + b"\x91" * 101 + b"\x01")
    assert error.value.kind == "bad_value"


def test_long_json_integers_display_as_written() -> None:
    digits = "7" * 5000  # more than Python's int() converts
    shown = inspect_text(bare_header(serializer="json") + f"[-{digits},{digits},-0]".encode(), as_json=True)
    assert shown.endswith(f'"value":[-{digits},{digits},0]}}\n')
    assert display_json(JsonIntegerText("-12")) == "-12"
    with pytest.raises(larder.InvalidEntry) as error:
        larder.decode(bare_header(serializer="json") + digits.encode())  # decode needs an int: it refuses
    assert error.value.kind == "bad_value"


def test_read_budget_of_the_rust_reader() -> None:
    assert within_read_budget(b"\x91" * 511 + b"\x01")  # 2 * 511 + 1 = 1023
    assert within_read_budget(b"\x91" * 511 + b"\xc0")
    assert not within_read_budget(b"\x91" * 512 + b"\x01")
    assert within_read_budget(b"\x91" * 510 + b"\xa0")  # a str costs 3: 1023
    assert not within_read_budget(b"\x91" * 511 + b"\xa0")
    assert within_read_budget(b"\x91" * 511 + b"\xc4\x00")  # bin, array and map cost 2: 1024 is the most
    assert within_read_budget(b"\x91" * 511 + b"\x90")
    assert not within_read_budget(b"\x91" * 511 + b"\x91\xc0")
    assert not within_read_budget(b"\x91" * 511 + b"\xd4\x01\x00")
    assert within_read_budget(b"\x92" + b"\x81" * 300 + b"\x01" + b"\x02" * 300 + b"\x01")  # keys count alike


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0 (1970-01-01T00:00:00.000Z)"),
        (1700000000000, "1700000000000 (2023-11-14T22:13:20.000Z)"),
        (1700000000007, "1700000000007 (2023-11-14T22:13:20.007Z)"),
        (253402300799999, "253402300799999 (9999-12-31T23:59:59.999Z)"),
        (253402300800000, "253402300800000"),
        (2**64 - 1, "18446744073709551615"),
    ],
)
def test_times(ms: int, text: str) -> None:
    assert time_text(ms) == text


def test_human_report_of_the_worked_example_is_the_spec_text() -> None:
    entry = larder.encode(
        {"id": 7, "name": "Ada"}, created_at=1700000000000, ttl_ms=60000, version="v1", tags=["user:7"]
    )
    assert inspect_text(entry) == (
        "format:      1\n"
        "kind:        value\n"
        "serializer:  msgpack\n"
        "compressor:  none\n"
        "created_at:  1700000000000 (2023-11-14T22:13:20.000Z)\n"
        "expires_at:  1700000060000 (2023-11-14T22:14:20.000Z)\n"
        "stale_ms:    0\n"
        "version:     v1\n"
        "tags:        user:7\n"
        "size:        51 bytes stored, 14 bytes payload\n"
        'value:       {"id":7,"name":"Ada"}\n'
    )
    assert inspect_text(entry, as_json=True) == (
        '{"format":1,"kind":"value","serializer":"msgpack","compressor":"none","created_at":1700000000000,'
        '"expires_at":1700000060000,"stale_ms":0,"version":"v1","tags":["user:7"],"stored_bytes":51,'
        '"payload_bytes":14,"value":{"id":7,"name":"Ada"}}\n'
    )


def test_human_report_of_a_response() -> None:
    response = larder.HttpResponse(200, [("etag", '"abc"'), (b"x-bin", b"\xff")], b"<p>hi</p>" * 200, "identity")
    text = inspect_text(larder.encode_response(response, created_at=0, version="", tags=["a", "b"]))
    lines = text.splitlines()
    assert lines[1] == "kind:        response"
    assert lines[3] == "compressor:  lz4"
    assert lines[5:9] == ["expires_at:  never", "stale_ms:    0", "version:     ", "tags:        a, b"]
    assert lines[10:] == [
        "status:      200",
        "encoding:    identity",
        'header:      etag: "abc"',
        'header:      x-bin: {"$base64":"/w=="}',
        "body:        1800 bytes",
    ]
    as_json = inspect_text(larder.encode_response(response, created_at=0), as_json=True)
    assert as_json.endswith(
        '"value":{"status":200,"headers":[["etag","\\"abc\\""],["x-bin",{"$base64":"/w=="}]],'
        '"content_encoding":"identity","body":"' + "<p>hi</p>" * 200 + '"}}\n'
    )


@pytest.mark.parametrize(
    ("serializer", "payload", "shown"),
    [
        ("json", b'{"a":1,"a":-0,"b":[1.0,1e2,1E400]}', '{"a":1,"a":0,"b":[1.0,100.0,Infinity]}'),
        ("text", b"tab\there", '"tab\\there"'),
        ("raw", b"\xff", '{"$base64":"/w=="}'),
        ("raw", b"", '""'),
    ],
)
def test_value_display_per_serializer(serializer: str, payload: bytes, shown: str) -> None:
    assert inspect_text(bare_header(serializer=serializer) + payload).endswith(f"value:       {shown}\n")
