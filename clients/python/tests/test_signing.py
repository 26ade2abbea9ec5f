"""Signed pickles (spec/FORMAT.md §2, "Ext 80 and 101 are signed"): every case of spec/vectors/signed.json (signing
is byte-identical, refused data reads as a miss without unpickling, fallbacks rotate), the rule that pickling needs
a secret, and refusals logged once per process and reason."""

from __future__ import annotations

import logging
import pickle
from typing import Any

import msgpack
import pytest

import larder
from larder import Cache
from larder.signing import PICKLE_EXT, Refused, Signer, signing_key
from larder.stores import open_store
from support import load_vectors

SIGNED = load_vectors("signed.json")


def entry_cache(entry_hex: str, secrets: list[str]) -> Cache:
    """A cache over a store holding `entry_hex` under "k", reading with `secrets` (current first)."""
    store = open_store("memory://")
    store.set("k", bytes.fromhex(entry_hex))
    if not secrets:
        return Cache(store)
    return Cache(store, pickle=True, signing_secret=secrets[0], signing_fallbacks=secrets[1:])


@pytest.fixture
def never_unpickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle.loads was called on data that should have been refused")

    monkeypatch.setattr("larder.cache.pickle.loads", refuse)


def test_the_vector_file_names_the_spec_s_constants() -> None:
    assert SIGNED["signing_key_message"] == "larder.signed-ext.v1"
    assert bytes.fromhex(SIGNED["mac_prefix_hex"]) == b"larder-ext\x00"


@pytest.mark.parametrize("case", SIGNED["signed"], ids=lambda c: c["name"])
def test_signing_is_byte_identical(case: dict[str, Any]) -> None:
    payload, data = bytes.fromhex(case["payload_hex"]), bytes.fromhex(case["data_hex"])
    assert signing_key(case["secret"]).hex() == case["signing_key_hex"]
    signer = Signer(case["secret"])
    assert signer.sign(case["ext_type"], payload) == data
    assert signer.verify(case["ext_type"], data) == payload
    entry = larder.decode(bytes.fromhex(case["entry_hex"]))
    assert entry.value == msgpack.ExtType(case["ext_type"], data)
    if case["ext_type"] == PICKLE_EXT and case["name"] == "pickle_small_dict":
        assert entry_cache(case["entry_hex"], [case["secret"]]).get("k") == pickle.loads(payload) == {"a": 1}


def test_a_written_pickle_is_the_vector_s_bytes() -> None:
    case = next(c for c in SIGNED["signed"] if c["name"] == "pickle_small_dict")
    cache = Cache("memory://", pickle=True, signing_secret=case["secret"])
    cache.set("k", {"a": (1,)})  # a tuple: pickled
    value = larder.decode(cache.store.get("k") or b"").value
    assert value.code == PICKLE_EXT
    assert value.data[0] == 1, "scheme 1"
    assert Signer(case["secret"]).verify(PICKLE_EXT, value.data) == pickle.dumps({"a": (1,)}, pickle.HIGHEST_PROTOCOL)


@pytest.mark.usefixtures("never_unpickle")
@pytest.mark.parametrize("case", SIGNED["refused"], ids=lambda c: c["name"])
def test_refused_data_reads_as_a_miss_without_unpickling(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["data_hex"])
    if case["secrets"]:
        with pytest.raises(Refused):
            Signer(case["secrets"][0], case["secrets"][1:]).verify(case["ext_type"], data)
    cache = entry_cache(case["entry_hex"], case["secrets"])
    if case["ext_type"] == PICKLE_EXT:
        assert cache.get("k", "miss") == "miss"
        stats = cache.stats()
        assert stats.refused_pickles + stats.corrupt_entries == 1
    else:
        assert cache.get("k") == msgpack.ExtType(case["ext_type"], data), "a Marshal dump stays opaque to Python"


@pytest.mark.parametrize("case", SIGNED["rotation"], ids=lambda c: c["name"])
def test_fallback_secrets_rotate(case: dict[str, Any]) -> None:
    data, payload = bytes.fromhex(case["data_hex"]), bytes.fromhex(case["payload_hex"])
    current, *fallbacks = case["secrets"]
    assert Signer(current, fallbacks).verify(case["ext_type"], data) == payload
    with pytest.raises(Refused):
        Signer(current).verify(case["ext_type"], data)
    store = open_store("memory://")
    store.set("k", larder.encode(msgpack.ExtType(case["ext_type"], data)))
    assert Cache(store, pickle=True, signing_secret=current, signing_fallbacks=fallbacks).get("k") == {"a": 1}
    writer = Cache(store, pickle=True, signing_secret=current, signing_fallbacks=fallbacks)
    writer.set("new", {1, 2})
    written = larder.decode(store.get("new") or b"").value.data
    assert Signer(current).verify(PICKLE_EXT, written), "writers sign with the current secret only"
    with pytest.raises(Refused):
        Signer(fallbacks[0]).verify(PICKLE_EXT, written)


def test_the_mac_covers_the_type() -> None:
    signer = Signer("s3cret")
    with pytest.raises(Refused, match="not signed"):
        signer.verify(101, signer.sign(80, b"payload"))


def test_pickling_needs_a_secret() -> None:
    with pytest.raises(ValueError, match="signing_secret"):
        Cache("memory://", pickle=True)
    with pytest.raises(ValueError, match="non-empty"):
        Cache("memory://", pickle=True, signing_secret="")
    plain = Cache("memory://")
    with pytest.raises(TypeError, match="pickle=True and signing_secret="):
        plain.set("k", {1, 2})
    plain.set("list", [1, 2])
    assert plain.get("list") == [1, 2]


def test_each_refusal_reason_is_logged_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr("larder.signing._logged", set())
    good = Signer("s3cret").sign(PICKLE_EXT, pickle.dumps(1))
    store = open_store("memory://")
    store.set("unsigned", larder.encode(msgpack.ExtType(PICKLE_EXT, pickle.dumps("x" * 100))))
    store.set("other", larder.encode(msgpack.ExtType(PICKLE_EXT, Signer("other").sign(PICKLE_EXT, b"x"))))
    store.set("good", larder.encode(msgpack.ExtType(PICKLE_EXT, good)))
    cache = Cache(store, pickle=True, signing_secret="s3cret")
    with caplog.at_level(logging.WARNING, logger="larder.signing"):
        for _ in range(3):
            assert cache.get("unsigned") is None
            assert cache.get("other") is None
            assert cache.get("good") == 1
    reasons = [r.getMessage() for r in caplog.records if r.name == "larder.signing"]
    assert len(reasons) == 2, reasons
    assert "scheme 128" in reasons[0]
    assert "not signed by this application" in reasons[1]
    assert cache.stats().refused_pickles == 6
