"""plain_read.py reads an array or map as msgpack does, or leaves it to msgpack: never another value, never a
payload msgpack refuses (bytes after the value, cut short, nested too deep, invalid UTF-8)."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from larder import Cache
from larder.plain_read import _MARK, NOT_READ, unpack_container


def msgpack_reads(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner) | st.dictionaries(st.text() | st.integers(-(2**63), 2**64 - 1), inner),
    max_leaves=30,
)


@given(_values)
@settings(max_examples=400, deadline=None)
def test_what_it_reads_is_what_msgpack_reads(value: Any) -> None:
    payload = msgpack.packb(value, use_bin_type=True)
    read = unpack_container(payload)
    if read is not NOT_READ:
        assert read == msgpack_reads(payload)
        assert msgpack.packb(read) == payload
        assert type(read) is type(msgpack_reads(payload))


@given(st.lists(_scalars) | st.dictionaries(st.text(), _scalars))
@settings(max_examples=200, deadline=None)
def test_plain_arrays_and_maps_with_str_keys_are_read(value: Any) -> None:
    payload = msgpack.packb(value, use_bin_type=True)
    assert unpack_container(payload) == value
    assert unpack_container(memoryview(payload)) == value


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x01",  # a scalar: msgpack's
        b"\xa1a",
        b"\x91\x01\x02",  # bytes after the value
        b"\x91\x01" + _MARK,  # bytes after the value that are this process's mark
        b"\x91\xc0\xc0",
        b"\x92\x01",  # cut short
        b"\x91\xd9\x05ab",
        b"\x81\x01\x02",  # an int key
        b"\x81\xc4\x01a\x02",  # a bin key
        b"\x81\x91\x01\x02",  # an array key
        b"\x91\xd4\x05\x01",  # an ext
        b"\x91" + _MARK,  # the mark itself, inside the payload
        b"\x91\xd6\xff\x00\x00\x00\x01",  # a timestamp
        b"\x91\xa1\xff",  # invalid UTF-8
        b"\x91\xa3\xed\xa0\x80",  # a surrogate in UTF-8
        b"\x91\xc1",  # reserved
        b"\x91" * 1025 + b"\x01",  # deeper than msgpack reads
        b"\x91" * 1024 + b"\x01",
    ],
)
def test_anything_else_is_left_to_msgpack(payload: bytes) -> None:
    assert unpack_container(payload) is NOT_READ


def test_deep_arrays_msgpack_reads_are_read_alike_or_left_to_it() -> None:
    for depth in (1, 100, 500, 1000):
        payload = b"\x91" * depth + b"\x01"
        read = unpack_container(payload)
        assert read is NOT_READ or msgpack.packb(read) == payload


def test_floats_read_as_msgpack_reads_them() -> None:
    payload = b"\x94\xca\x3f\x80\x00\x01\xcb" + msgpack.packb(math.pi)[1:] + msgpack.packb([math.inf, -0.0])[1:]
    payload = b"\x94" + payload[1:]
    assert repr(unpack_container(payload)) == repr(msgpack_reads(payload))


def test_a_cache_reads_entries_with_other_keys_and_ext_types_as_before() -> None:
    cache = Cache("memory://")
    for value in ({1: [2]}, [msgpack.ExtType(5, b"x")], {"a": {b"k": 1}}, [[1] * 3] * 2000):
        cache.set("k", value)
        assert cache.get("k") == value
        assert cache.get_many(["k"]) == {"k": value}
