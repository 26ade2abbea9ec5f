"""The common write's short path (`Cache.set` of a plain value without stale window, version or tags): the entry it
builds is byte for byte the one the general encoder builds, a memory store is told the same expiry its `set` would
read, what the short path cannot write goes the general way (and fails or pickles as before), and `memory://` is not
compressed unless a compressor is asked for (spec/STORES.md §8)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import larder
from larder import Cache
from larder.entry import build_plain, build_plain_msgpack
from larder.header import parse_header
from larder.serializers import pack_msgpack
from servers import Memcached

#: Values around every MessagePack head size (fixstr, str8, str16, str32; bin8, bin16, bin32), multi-byte UTF-8,
#: scalars at their limits, and plain containers.
VALUES: list[Any] = [
    "",
    "a" * 31,
    "a" * 32,
    "x" * 255,
    "x" * 256,
    "y" * 65535,
    "y" * 65536,
    "é" * 10,
    "é" * 200,
    "😀" * 100,
    b"",
    b"z" * 255,
    b"z" * 256,
    b"q" * 65535,
    b"q" * 65536,
    0,
    -1,
    2**64 - 1,
    -(2**63),
    1.5,
    True,
    None,
    {"id": 7, "name": "Ada", "tags": ["a", "b"]},
    [1, [2, [3]], {"k": None}],
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{type(v).__name__}-{len(v) if hasattr(v, '__len__') else v}")
@pytest.mark.parametrize("expires_at", [0, 1, 1_700_000_000_123, 2**64 - 1])
def test_build_plain_msgpack_is_build_plain_of_the_packed_value(value: Any, expires_at: int) -> None:
    created_at = 1_700_000_000_000 if expires_at != 1 else 0
    ttl_ms = expires_at - created_at if expires_at else 0
    expected = build_plain("msgpack", pack_msgpack(value), "none", 1024, created_at, ttl_ms)
    if expires_at == 2**64 - 1:
        expected = build_plain("msgpack", pack_msgpack(value), "none", 1024, created_at, 2**64 - 1)
    assert build_plain_msgpack(value, created_at, expires_at) == expected


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", 2**64, -(2**63) - 1])
def test_build_plain_msgpack_declines_what_msgpack_refuses(value: Any) -> None:
    assert build_plain_msgpack(value, 1, 0) is None


@pytest.mark.parametrize("compressor", [None, "none", "lz4"])
@pytest.mark.parametrize("value", [*VALUES[:20], "w" * 4096, "ab" * 5000], ids=repr)
def test_a_set_stores_what_encode_makes(compressor: str | None, value: Any) -> None:
    """The short path's entry equals `Cache.encode`'s but for the moment it was made (created_at, expires_at), which
    are the same distance apart."""
    cache = Cache("memory://", compressor=compressor)
    cache.set("k", value, ttl=60)
    stored = cache.store.get("k")
    assert stored is not None
    made, _ = cache.encode(value, ttl=60)
    got, want = parse_header(stored), parse_header(made)
    assert got[:3] == want[:3]  # kind, serializer, compressor
    assert got[4] - int.from_bytes(stored[7:15], "little") == 60_000  # expires_at - created_at
    assert stored[got[-1] :] == made[want[-1] :]  # the payloads
    assert cache.get("k") == value


def test_the_memory_store_is_told_the_expiry_its_set_would_read() -> None:
    cache = Cache("memory://")
    cache.set("short", "v", ttl=0.2)
    cache.set("never", "v")
    memory = cache.store
    assert memory.read("never")[1] is None  # type: ignore[attr-defined]
    expiry = memory.read("short")[1]  # type: ignore[attr-defined]
    stored = memory.get("short")
    assert stored is not None
    assert expiry == int.from_bytes(stored[15:23], "little")
    time.sleep(0.25)
    assert cache.get("short") is None
    assert memory.get("short") is None
    assert cache.get("never") == "v"


def test_what_the_short_path_cannot_write_goes_the_general_way() -> None:
    plain = Cache("memory://")
    with pytest.raises(UnicodeEncodeError):
        plain.set("k", "\ud800")  # not UTF-8: MessagePack refuses it, as before
    with pytest.raises((ValueError, TypeError)):
        plain.set("k", 2**64)
    with pytest.raises(TypeError):
        plain.set("k", {1, 2})
    plain.set("k", (1, 2))  # MessagePack's array, as the general encoder writes a tuple without pickling
    assert plain.get("k") == [1, 2]
    pickling = Cache("memory://", pickle=True, signing_secret="s" * 40)
    for value in ("\ud800", 2**64, (1, 2), {1: "int key"}):
        pickling.set("k", value)
        assert pickling.get("k") == value  # pickled and signed, as the general encoder does


def test_a_stale_window_version_or_tags_still_write_them() -> None:
    cache = Cache("memory://", default_stale=5)
    cache.set("k", "v", ttl=60)
    assert parse_header(cache.store.get("k"))[5] == 5000  # type: ignore[arg-type]
    cache = Cache("memory://")
    cache.set("v", "x", ttl=60, version="2", tags=["t"])
    assert cache.get("v", version="2") == "x"
    assert cache.get("v", version="3") is None
    assert cache.purge(tag="t") == 1


def test_memory_is_not_compressed_unless_asked() -> None:
    text = "compressible " * 500
    default = Cache("memory://")
    assert default.compressor == "none"
    default.set("k", text)
    assert larder.decode(default.store.get("k")).compressor == "none"  # type: ignore[arg-type]
    asked = Cache("memory://", compressor="lz4")
    asked.set("k", text)
    assert larder.decode(asked.store.get("k")).compressor == "lz4"  # type: ignore[arg-type]
    assert asked.with_namespace("n").compressor == "lz4"
    assert default.with_namespace("n").compressor == "none"


def test_shared_stores_are_compressed_by_default(memcached_server: Memcached) -> None:
    text = "compressible " * 500
    cache = Cache(f"memcached://{memcached_server.address}", namespace=f"pw{time.monotonic_ns()}")
    try:
        assert cache.compressor == "lz4"
        cache.set("k", text, ttl=60)
        raw = cache.store.get(cache.store_key("k"))
        assert raw is not None
        assert larder.decode(raw).compressor == "lz4"
        assert cache.get("k") == text
    finally:
        cache.close()
