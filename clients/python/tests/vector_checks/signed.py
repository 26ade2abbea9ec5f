"""signed.json (spec/FORMAT.md §2, "Ext 80 and 101 are signed"): signing is byte-identical and verifies; a cache
configured with the secret reads a signed pickle as its object (a Marshal dump stays an opaque ext); refused data
raises `Refused` and reads as a miss without ever being unpickled; an older secret among the fallbacks still reads,
while writers sign with the current one only. Case names are prefixed with their section."""

from __future__ import annotations

import pickle
from typing import Any
from unittest import mock

import msgpack

import larder
from larder import Cache
from larder.signing import PICKLE_EXT, Refused, Signer, signing_key
from larder.stores import open_store

from . import Case, each, section


def cases(document: dict[str, Any]) -> list[Case]:
    assert document["signing_key_message"] == "larder.signed-ext.v1", "the spec's signing key message"
    assert bytes.fromhex(document["mac_prefix_hex"]) == b"larder-ext\x00", "the spec's MAC prefix"
    sections = (("signed", check_signed), ("refused", check_refused), ("rotation", check_rotation))
    return [case for name, check in sections for case in each(section(document, name), check, f"{name}/")]


def reader(entry: bytes, secrets: list[str]) -> Cache:
    """A cache over a store holding `entry` under "k", reading with `secrets` (the current one first)."""
    store = open_store("memory://")
    store.set("k", entry)
    if not secrets:
        return Cache(store)
    return Cache(store, pickle=True, signing_secret=secrets[0], signing_fallbacks=secrets[1:])


def check_signed(case: dict[str, Any]) -> None:
    payload, data = bytes.fromhex(case["payload_hex"]), bytes.fromhex(case["data_hex"])
    assert signing_key(case["secret"]).hex() == case["signing_key_hex"], "signing key"
    signer = Signer(case["secret"])
    assert signer.sign(case["ext_type"], payload) == data, "signed bytes"
    assert signer.verify(case["ext_type"], data) == payload, "verified payload"
    entry = bytes.fromhex(case["entry_hex"])
    assert larder.decode(entry).value == msgpack.ExtType(case["ext_type"], data), "the entry holds the ext"
    value = reader(entry, [case["secret"]]).get("k", "miss")
    if case["ext_type"] != PICKLE_EXT:
        assert value == msgpack.ExtType(case["ext_type"], data), "a Marshal dump stays opaque to Python"
        return
    try:
        expected = pickle.loads(payload)  # the vector's own payload, signed with the vector's secret
    except Exception:
        expected = "miss"  # a signed payload that is no pickle reads as a miss
    assert value == expected, f"read {value!r}"


def check_refused(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["data_hex"])
    if case["secrets"]:
        try:
            Signer(case["secrets"][0], case["secrets"][1:]).verify(case["ext_type"], data)
        except Refused:
            pass
        else:
            raise AssertionError("verified")
    never = AssertionError("pickle.loads was called on data that should have been refused")
    with mock.patch("larder.cache.pickle.loads", side_effect=never):
        cache = reader(bytes.fromhex(case["entry_hex"]), case["secrets"])
        value = cache.get("k", "miss")
    if case["ext_type"] == PICKLE_EXT:
        assert value == "miss", f"read {value!r}"
        stats = cache.stats()
        assert stats.refused_pickles + stats.corrupt_entries == 1, stats
    else:
        assert value == msgpack.ExtType(case["ext_type"], data), "a Marshal dump stays opaque to Python"


def check_rotation(case: dict[str, Any]) -> None:
    data, payload = bytes.fromhex(case["data_hex"]), bytes.fromhex(case["payload_hex"])
    current, *fallbacks = case["secrets"]
    assert Signer(current, fallbacks).verify(case["ext_type"], data) == payload, "verified with a fallback"
    try:
        Signer(current).verify(case["ext_type"], data)
    except Refused:
        pass
    else:
        raise AssertionError("verified without the fallback")
    entry = larder.encode(msgpack.ExtType(case["ext_type"], data))
    assert reader(entry, case["secrets"]).get("k") == pickle.loads(payload), "read with a fallback"
    writer = reader(entry, case["secrets"])
    writer.set("new", {1, 2})
    written = larder.decode(writer.store.get("new") or b"").value.data
    assert Signer(current).verify(PICKLE_EXT, written) == pickle.dumps({1, 2}, pickle.HIGHEST_PROTOCOL)
    try:
        Signer(fallbacks[0]).verify(PICKLE_EXT, written)
    except Refused:
        pass
    else:
        raise AssertionError("writers sign with the current secret only")
