"""entries.json and invalid.json (spec/vectors/README.md): every valid entry decodes to its header and value, and
encodes (unless `decode_only`) to an entry that decodes the same, byte for byte the vector's when uncompressed;
every invalid entry is refused with its error kind, by `decode` and by `inspect` alike."""

from __future__ import annotations

from typing import Any

import larder
from larder.report import inspect_text

from . import Case, each, same_json, section, vector_response, vector_value


def valid_cases(document: dict[str, Any]) -> list[Case]:
    return each(section(document, "cases"), check_valid)


def invalid_cases(document: dict[str, Any]) -> list[Case]:
    return each(section(document, "cases"), check_invalid)


def check_valid(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["entry_hex"])
    check_decoded(larder.decode(data), case)
    header = larder.read_header(data)
    expected = (case["kind"], case["stored_compressor"], case["options"]["expires_at"])
    assert (header.kind, header.compressor, header.expires_at) == expected, "read_header"
    assert larder.peek_expires_at(data) == case["options"]["expires_at"], "peek_expires_at"
    if case.get("decode_only"):
        return
    encoded = encode(case)
    check_decoded(larder.decode(encoded), case)
    if case["stored_compressor"] == "none":
        assert encoded.hex() == case["entry_hex"], "uncompressed entries must be byte-identical across languages"


def check_invalid(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["entry_hex"])
    max_size = case.get("max_size", larder.DEFAULT_MAX_SIZE)
    for what, read in (("decode", larder.decode), ("inspect", inspect_text)):
        refused = None
        try:
            read(data, max_size=max_size)
        except larder.InvalidEntry as e:
            refused = e
        assert refused is not None, f"{what} accepted it; expected {case['error']}"
        assert refused.kind == case["error"], f"{what}: {refused.kind} ({refused.detail}), not {case['error']}"


def check_decoded(entry: larder.Entry, case: dict[str, Any]) -> None:
    options = case["options"]
    got = (entry.kind, entry.serializer, entry.compressor, entry.created_at, entry.expires_at, entry.stale_ms)
    expected = (
        case["kind"],
        options["serializer"],
        case["stored_compressor"],
        options["created_at"],
        options["expires_at"],
        options["stale_ms"],
    )
    assert got == expected, f"header {got} != {expected}"
    assert entry.version == options["version"], f"version {entry.version!r}"
    assert entry.tags == tuple(options["tags"]), f"tags {entry.tags!r}"
    if case["kind"] == "response":
        want = vector_response(case)
        assert isinstance(entry.value, larder.HttpResponse), f"not a response: {entry.value!r}"
        assert entry.value.status == want.status, "status"
        assert entry.value.headers == want.headers, "headers"
        assert entry.value.body == want.body, "body"
        assert entry.value.content_encoding == want.content_encoding, "content_encoding"
    else:
        assert same_json(entry.value, vector_value(case)), f"{entry.value!r} != {vector_value(case)!r}"


def encode(case: dict[str, Any]) -> bytes:
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
