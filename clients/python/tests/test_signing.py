"""Signed pickles (spec/FORMAT.md §2, "Ext 80 and 101 are signed") beside spec/vectors/signed.json (whose every
case runs in tests/test_vectors.py: signing is byte-identical, refused data reads as a miss without unpickling,
fallbacks rotate): what the cache writes is the vector's bytes, the MAC covers the type, pickling needs a secret,
and refusals are logged once per process and reason."""

from __future__ import annotations

import logging
import pickle

import msgpack
import pytest

import larder
from larder import Cache
from larder.signing import PICKLE_EXT, Refused, Signer
from larder.stores import open_store
from support import load_vectors

SIGNED = load_vectors("signed.json")


def test_a_written_pickle_is_the_vector_s_bytes() -> None:
    case = next(c for c in SIGNED["signed"] if c["name"] == "pickle_small_dict")
    cache = Cache("memory://", pickle=True, signing_secret=case["secret"])
    cache.set("k", {"a": (1,)})  # a tuple: pickled
    value = larder.decode(cache.store.get("k") or b"").value
    assert value.code == PICKLE_EXT
    assert value.data[0] == 1, "scheme 1"
    assert Signer(case["secret"]).verify(PICKLE_EXT, value.data) == pickle.dumps({"a": (1,)}, pickle.HIGHEST_PROTOCOL)


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
