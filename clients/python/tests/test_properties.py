"""Properties over generated inputs: every value round-trips through every serializer and compressor, and decoding
any bytes at all (random, or valid entries bit-flipped, truncated, spliced) raises nothing but InvalidEntry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import larder
from larder.display import display_json
from larder.msgpack_reader import read_display_tree, read_whole_tree
from larder.report import Report
from larder.serializers import check_nesting
from support import (
    entry_options,
    examples,
    http_responses,
    load_vectors,
    msgpack_objects,
    pack_msgpack,
    same_json,
    values_for,
)

COMPRESSORS = larder.COMPRESSORS


@pytest.mark.parametrize("compressor", COMPRESSORS)
@pytest.mark.parametrize("serializer", larder.SERIALIZERS)
@settings(max_examples=examples(25))
@given(data=st.data())
def test_values_round_trip(serializer: str, compressor: str, data: st.DataObject) -> None:
    value = data.draw(values_for(serializer), label="value")
    threshold = data.draw(st.sampled_from([0, 1024]), label="threshold")
    encoded = larder.encode(value, serializer=serializer, compressor=compressor, threshold=threshold, created_at=1)
    entry = larder.decode(encoded)
    assert same_json(entry.value, value)
    assert entry.serializer == serializer
    # the compressor byte records what was done: the configured one only if it was tried and it shrank the payload
    plain = larder.encode(value, serializer=serializer, compressor="none", created_at=1)
    if entry.compressor == "none":
        assert encoded == plain
    else:
        assert entry.compressor == compressor
        assert len(encoded) < len(plain)
        assert len(plain) - larder.read_header(plain).size >= threshold


@settings(max_examples=examples(60))
@given(response=http_responses, options=entry_options())
def test_responses_and_header_fields_round_trip(response: larder.HttpResponse, options: dict[str, Any]) -> None:
    entry = larder.decode(larder.encode_response(response, **options))
    assert entry.value == response
    assert (entry.created_at, entry.expires_at, entry.stale_ms) == (
        options["created_at"],
        options["expires_at"],
        options["stale_ms"],
    )
    assert entry.version == options["version"]
    assert entry.tags == tuple(options["tags"])


# --- decoding never raises anything but InvalidEntry ---------------------------------------------------------------


def _valid_entries() -> list[bytes]:
    entries = [bytes.fromhex(case["entry_hex"]) for case in load_vectors("entries.json")["cases"]]
    value = [{"id": i, "name": f"user{i}", "score": i / 4, "tags": ["a", "b"]} for i in range(40)]
    for compressor in COMPRESSORS:
        for serializer in ("msgpack", "json"):
            entries.append(
                larder.encode(value, serializer=serializer, compressor=compressor, version="v", tags=["t"], stale_ms=5)
            )
    return [entry for entry in entries if len(entry) < 4000]  # keep mutation fast


VALID = _valid_entries()


def _decode_only_invalid_entry(data: bytes, max_size: int = larder.DEFAULT_MAX_SIZE) -> None:
    """Decodes `data` both ways (decode and inspect's display decoding): each may fail only with InvalidEntry, and
    inspect displays whatever decode accepts, unless its display would be absurdly long (too_large) or the value is
    nested deeper than the format commands display (bad_value; decode does not apply that limit)."""
    decoded: list[larder.Entry] = []
    decode_error = _invalid_entry_kind(lambda: decoded.append(larder.decode(data, max_size=max_size)))
    inspect_error = _invalid_entry_kind(lambda: Report.of(data, max_size))
    assert decode_error in (None, *larder.ERROR_KINDS)
    assert inspect_error in (None, *larder.ERROR_KINDS)
    if decode_error is None and inspect_error not in (None, "too_large"):
        assert inspect_error == "bad_value", "decode accepted what inspect refused"
        with pytest.raises(ValueError, match="nested more than 100"):
            check_nesting(decoded[0].value)


def _invalid_entry_kind(attempt: Callable[[], object]) -> str | None:
    """None if `attempt` succeeds, the error kind if it raises InvalidEntry; any other exception propagates."""
    try:
        attempt()
    except larder.InvalidEntry as e:
        return e.kind
    return None


@settings(max_examples=examples(300))
@given(data=st.one_of(st.binary(max_size=64), st.binary(max_size=64).map(lambda b: b"\xc1\x4c\x01" + b)))
def test_random_bytes_raise_only_invalid_entry(data: bytes) -> None:
    _decode_only_invalid_entry(data)


@st.composite
def _header_then_random_payload(draw: st.DrawFn) -> bytes:
    """A valid header (any kind, serializer, compressor, optional fields) followed by random payload bytes."""
    header = bytes(
        larder.header.pack_header(
            kind=draw(st.sampled_from(larder.KINDS)),
            serializer=draw(st.sampled_from(larder.SERIALIZERS)),
            compressor=draw(st.sampled_from(COMPRESSORS)),
            created_at=0,
            expires_at=0,
            stale_ms=draw(st.sampled_from([0, 9])),
            version=draw(st.sampled_from([None, "v"])),
            tags=draw(st.sampled_from([(), ("t",)])),
        )
    )
    return header + draw(st.binary(max_size=80))


@settings(max_examples=examples(300))
@given(data=_header_then_random_payload(), max_size=st.sampled_from([0, 100, larder.DEFAULT_MAX_SIZE]))
def test_random_payloads_raise_only_invalid_entry(data: bytes, max_size: int) -> None:
    _decode_only_invalid_entry(data, max_size)


@st.composite
def _mutated_entries(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        mutation = draw(st.sampled_from(["flip", "truncate", "splice", "byte"]))
        if not data:
            break
        at = draw(st.integers(min_value=0, max_value=len(data) - 1))
        if mutation == "flip":
            data[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif mutation == "byte":
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif mutation == "truncate":
            del data[at:]
        else:
            end = draw(st.integers(min_value=at, max_value=len(data)))
            if draw(st.booleans()):
                data[at:end] = draw(st.binary(max_size=12))
            else:  # the same span of another valid entry
                data[at:end] = draw(st.sampled_from(VALID))[at:end]
    return bytes(data)


@settings(max_examples=examples(600))
@given(data=_mutated_entries(), max_size=st.sampled_from([64, larder.DEFAULT_MAX_SIZE]))
def test_mutated_entries_raise_only_invalid_entry(data: bytes, max_size: int) -> None:
    _decode_only_invalid_entry(data, max_size)


# --- inspect's two MessagePack readers agree ------------------------------------------------------------------------


@settings(max_examples=examples(300))
@given(
    obj=msgpack_objects, cut=st.one_of(st.none(), st.integers(min_value=0, max_value=200)), junk=st.binary(max_size=3)
)
def test_fast_and_exact_msgpack_readers_display_alike(obj: Any, cut: int | None, junk: bytes) -> None:
    payload = pack_msgpack(obj)
    if cut is not None:
        payload = payload[:cut] + junk  # truncated or with trailing bytes: both must refuse, or agree
    shown = []
    for read in (read_whole_tree, read_display_tree):
        try:
            shown.append(display_json(read(payload)))
        except larder.InvalidEntry as e:
            shown.append(e.kind)
    assert shown[0] == shown[1]
