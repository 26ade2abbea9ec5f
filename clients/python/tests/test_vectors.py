"""Every case of spec/vectors: entries decode and encode (byte for byte when uncompressed), invalid entries fail
with the exact error kind, keys derive to the exact text."""

from __future__ import annotations

from typing import Any

import pytest

import larder
from larder.report import inspect_text
from support import load_vectors, same_json, vector_response, vector_value

ENTRIES = load_vectors("entries.json")["cases"]
INVALID = load_vectors("invalid.json")["cases"]
KEYS = load_vectors("keys.json")


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


def _check_decoded(entry: larder.Entry, case: dict[str, Any]) -> None:
    options = case["options"]
    assert entry.kind == case["kind"]
    assert entry.serializer == options["serializer"]
    assert entry.compressor == case["stored_compressor"]
    assert entry.created_at == options["created_at"]
    assert entry.expires_at == options["expires_at"]
    assert entry.stale_ms == options["stale_ms"]
    assert entry.version == options["version"]
    assert entry.tags == tuple(options["tags"])
    if case["kind"] == "response":
        expected = vector_response(case)
        assert isinstance(entry.value, larder.HttpResponse)
        assert entry.value.status == expected.status
        assert entry.value.headers == expected.headers
        assert entry.value.body == expected.body
        assert entry.value.content_encoding == expected.content_encoding
    else:
        assert same_json(entry.value, vector_value(case)), f"{entry.value!r} != {vector_value(case)!r}"


def _encode(case: dict[str, Any]) -> bytes:
    options = case["options"]
    common = {
        "compressor": options["compressor"],
        "threshold": options["threshold"],
        "level": options["level"],
        "created_at": options["created_at"],
        "expires_at": options["expires_at"],
        "stale_ms": options["stale_ms"],
        "version": options["version"],
        "tags": options["tags"],
    }
    if case["kind"] == "response":
        return larder.encode_response(vector_response(case), **common)
    return larder.encode(vector_value(case), serializer=options["serializer"], **common)


def test_the_vector_files_cover_what_the_readme_promises() -> None:
    stored = {case["stored_compressor"] for case in ENTRIES}
    assert stored == set(larder.COMPRESSORS)
    assert {case["options"]["serializer"] for case in ENTRIES} == set(larder.SERIALIZERS)
    assert {case["error"] for case in INVALID} == set(larder.ERROR_KINDS)
    assert len({case["name"] for case in ENTRIES + INVALID}) == len(ENTRIES) + len(INVALID)


@pytest.mark.parametrize("case", ENTRIES, ids=_ids(ENTRIES))
def test_entry_vector_decodes(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["entry_hex"])
    _check_decoded(larder.decode(data), case)
    header = larder.read_header(data)
    assert (header.kind, header.compressor, header.expires_at) == (
        case["kind"],
        case["stored_compressor"],
        case["options"]["expires_at"],
    )
    assert larder.peek_expires_at(data) == case["options"]["expires_at"]


ENCODABLE = [case for case in ENTRIES if not case.get("decode_only")]


@pytest.mark.parametrize("case", ENCODABLE, ids=_ids(ENCODABLE))
def test_entry_vector_encodes(case: dict[str, Any]) -> None:
    encoded = _encode(case)
    _check_decoded(larder.decode(encoded), case)
    if case["stored_compressor"] == "none":
        assert encoded.hex() == case["entry_hex"], "uncompressed entries must be byte-identical across languages"


@pytest.mark.parametrize("case", INVALID, ids=_ids(INVALID))
def test_invalid_vector_is_refused_with_its_kind(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["entry_hex"])
    max_size = case.get("max_size", larder.DEFAULT_MAX_SIZE)
    with pytest.raises(larder.InvalidEntry) as decoded:
        larder.decode(data, max_size=max_size)
    assert decoded.value.kind == case["error"], decoded.value.detail
    # inspect decodes the same way, and fails the same way
    with pytest.raises(larder.InvalidEntry) as inspected:
        inspect_text(data, max_size=max_size)
    assert inspected.value.kind == case["error"]


@pytest.mark.parametrize("case", KEYS["http"], ids=_ids(KEYS["http"]))
def test_http_key_vector(case: dict[str, Any]) -> None:
    drop = case.get("drop", larder.DEFAULT_DROP)
    namespace = case.get("namespace", "")
    assert larder.url_key(case["method"], case["url"], namespace=namespace, drop=drop) == case["key"]


@pytest.mark.parametrize("case", KEYS["safe"], ids=_ids(KEYS["safe"]))
def test_safe_key_vector(case: dict[str, Any]) -> None:
    assert larder.safe_key(case["key"]) == case["safe"]


@pytest.mark.parametrize("case", KEYS["namespaced"], ids=_ids(KEYS["namespaced"]))
def test_namespaced_key_vector(case: dict[str, Any]) -> None:
    assert larder.namespaced_key(case["namespace"], case["key"]) == case["full"]
