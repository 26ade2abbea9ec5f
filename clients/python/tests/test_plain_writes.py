"""The common write's short path (`Cache.set` of a plain value without stale window, version or tags): the entry it
builds is byte for byte the one the general encoder builds, a memory store is told the same expiry its `set` would
read, what the short path cannot write goes the general way (and fails or pickles as before), and `memory://` is not
compressed unless a compressor is asked for (spec/STORES.md §8). An ASCII str or bytes is held there in parts, and
every way out of the store still gives the exact entry bytes."""

from __future__ import annotations

import random
import string
import time
from typing import Any

import msgpack
import pytest

import larder
from larder import Cache
from larder.entry import build_plain, build_plain_msgpack, lz4_plain, plain_head
from larder.header import FIXED_HEADER_LEN, parse_header
from larder.serializers import pack_msgpack
from larder.stores import TooLarge
from larder.stores.base import NotACounter
from larder.stores.memory import ENTRY_OVERHEAD, PARTS_OVERHEAD, MemoryStore, joined
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


#: Text LZ4 cannot shrink (its compressed form is kept only when shorter), at and around the threshold.
_RANDOM_TEXT = "".join(random.Random(7).choices(string.ascii_letters + string.digits + " ", k=70_000))


@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{type(v).__name__}-{len(v) if hasattr(v, '__len__') else v}")
@pytest.mark.parametrize("expires_at", [0, 1, 1_700_000_000_123, 2**64 - 1])
def test_build_plain_msgpack_is_build_plain_of_the_packed_value(value: Any, expires_at: int) -> None:
    created_at = 1_700_000_000_000 if expires_at != 1 else 0
    ttl_ms = expires_at - created_at if expires_at else 0
    expected = build_plain("msgpack", pack_msgpack(value), "none", 1024, created_at, ttl_ms)
    if expires_at == 2**64 - 1:
        expected = build_plain("msgpack", pack_msgpack(value), "none", 1024, created_at, 2**64 - 1)
    assert build_plain_msgpack(value, created_at, expires_at) == expected


@pytest.mark.parametrize("threshold", [0, 1, 1024, 70_000])
@pytest.mark.parametrize("size", [0, 31, 1021, 1022, 4096, 65_536])
@pytest.mark.parametrize("text", [True, False])
@pytest.mark.parametrize("compressible", [True, False])
def test_lz4_in_place_is_build_plain_with_lz4(threshold: int, size: int, text: bool, compressible: bool) -> None:
    chars = ("abc" * size)[:size] if compressible else _RANDOM_TEXT[:size]
    value: Any = chars if text else chars.encode()
    entry = build_plain_msgpack(value, 1_700_000_000_000, 1_700_000_060_000)
    assert entry is not None
    expected = build_plain("msgpack", pack_msgpack(value), "lz4", threshold, 1_700_000_000_000, 60_000)
    assert lz4_plain(entry, threshold) == expected


@pytest.mark.parametrize("value", ["\ud800", "a\udfffb", 2**64, -(2**63) - 1])
def test_build_plain_msgpack_declines_what_msgpack_refuses(value: Any) -> None:
    assert build_plain_msgpack(value, 1, 0) is None


@pytest.mark.parametrize("compressor", [None, "none", "lz4"])
@pytest.mark.parametrize(
    "value",
    [
        *VALUES[:20],
        "w" * 4096,
        "ab" * 5000,
        _RANDOM_TEXT[:1020],
        _RANDOM_TEXT[:1021],
        _RANDOM_TEXT,
        _RANDOM_TEXT.encode()[:1021],
        _RANDOM_TEXT.encode()[:1022],
        _RANDOM_TEXT.encode(),
        "é" + _RANDOM_TEXT[:5000],
    ],
    ids=lambda v: f"{type(v).__name__}-{len(v) if hasattr(v, '__len__') else v}",
)
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


# -- the memory store's parts (stores/memory.py `Parts`): an ASCII str or bytes written without a copy --

#: Values `Cache.set` hands the memory store in parts (an ASCII str, bytes) and one it joins (other characters).
PARTS_VALUES: list[Any] = ["", "a" * 31, "x" * 256, "y" * 65536, b"", b"z" * 255, b"q" * 65536, "é" * 200]


def _entry_of(value: Any, stored: bytes) -> bytes:
    """The entry the general encoder makes of `value` with the times `stored` carries."""
    created_at = int.from_bytes(stored[7:15], "little")
    expires_at = int.from_bytes(stored[15:23], "little")
    expected = build_plain_msgpack(value, created_at, expires_at)
    assert expected is not None
    return expected


@pytest.mark.parametrize("value", PARTS_VALUES, ids=lambda v: f"{type(v).__name__}-{len(v)}")
def test_every_way_out_of_the_memory_store_gives_the_exact_entry(value: Any) -> None:
    cache = Cache("memory://")
    memory = cache.store
    assert isinstance(memory, MemoryStore)
    for key in ("get", "many", "decr", "del", "other"):
        cache.set(key, value, ttl=60)
    held = memory.read("get")
    assert held is not None
    in_parts = type(value) is bytes or value.isascii()
    assert (type(held[0]) is tuple) is in_parts  # held as written: in parts, or joined
    assert (held[2] is not None) is in_parts  # parts come with the write's note: the first read decodes nothing
    assert joined(held[0]) == _entry_of(value, joined(held[0]))
    stored = memory.get("get")
    assert stored is not None
    assert stored == _entry_of(value, stored)
    assert memory.get("get") is stored  # joined once, then held joined
    assert cache.get("get") == value  # and read again through the cache
    (many,) = memory.get_many(["many"])
    assert many is not None
    assert many == _entry_of(value, many)
    with pytest.raises(NotACounter):
        memory.incr("decr", 1)
    assert cache.get("decr") == value
    entry = joined(memory.read("del")[0])  # type: ignore[index]
    assert not memory.delete_if("del", entry + b"x")
    assert memory.delete_if("del", entry)
    assert cache.get("del") is None
    # other readers of the same store: the payload (MessagePack head and value) is more than the value
    assert Cache(memory, max_value_size=len(value)).get("other", "miss") == "miss"
    assert Cache(memory, max_value_size=2 * len(value) + 5).get("other") == value
    assert cache.get("other") == value


def test_parts_are_counted_as_held_and_joined() -> None:
    memory = MemoryStore(capacity=1 << 20)
    cache = Cache(memory)
    value = "t" * 1000
    cache.set("k", value)
    entry_len = len(joined(memory.read("k")[0]))  # type: ignore[index]
    assert entry_len == FIXED_HEADER_LEN + 3 + 1000
    assert memory.stats().bytes == len("k") + entry_len + ENTRY_OVERHEAD + PARTS_OVERHEAD
    cache.set("k", value + "u")  # parts over parts
    assert memory.stats().bytes == len("k") + entry_len + 1 + ENTRY_OVERHEAD + PARTS_OVERHEAD
    memory.get("k")  # joined: the parts' overhead and their note go
    assert memory.stats().bytes == len("k") + entry_len + 1 + ENTRY_OVERHEAD
    assert cache.get("k") == value + "u"  # decoded and noted anew
    assert memory.read("k")[2] is not None  # type: ignore[index]
    cache.set("k", b"b" * 10)  # parts over noted bytes
    assert memory.stats().bytes == len("k") + FIXED_HEADER_LEN + 2 + 10 + ENTRY_OVERHEAD + PARTS_OVERHEAD
    cache.delete("k")
    assert memory.stats().bytes == 0


def test_parts_are_evicted_within_the_capacity() -> None:
    memory = MemoryStore(capacity=64 << 10)
    cache = Cache(memory)
    for i in range(200):
        cache.set(f"k{i}", "v" * 1000)
        assert memory.stats().bytes <= 64 << 10
    assert cache.get("k0") is None  # the oldest went
    assert cache.get("k199") == "v" * 1000
    assert sum(cache.get(f"k{i}") is not None for i in range(200)) == len(memory)


def test_a_value_near_the_largest_is_written_joined_and_a_larger_one_refused() -> None:
    memory = MemoryStore(capacity=1 << 20)
    cache = Cache(memory)
    # an entry 100 bytes short of the largest weight under the key "k" (the str head is 3 bytes)
    largest = memory.max_value_bytes() + 250 - len("k") - FIXED_HEADER_LEN - 3 - 100
    cache.set("k", "n" * largest)
    assert type(memory.read("k")[0]) is bytes  # type: ignore[index]  # parts would weigh more than an entry may
    assert cache.get("k") == "n" * largest
    with pytest.raises(TooLarge):
        cache.set("k", "n" * (largest + 300))


def test_purges_and_expiry_reach_parts() -> None:
    cache = Cache("memory://")
    cache.set("plain", "p" * 100, ttl=60)
    cache.set("tagged", "t", ttl=60, tags=["t"])
    cache.set("page:1", b"b" * 100, ttl=60)
    assert cache.purge(tag="t") == 1
    assert cache.get("plain") == "p" * 100
    assert cache.purge(prefix="page:") == 1
    assert cache.get("page:1") is None
    cache.set("short", "s" * 100, ttl=0.05)
    time.sleep(0.1)
    assert cache.get("short") is None
    assert cache.store.get("short") is None


@pytest.mark.parametrize("text", [True, False])
def test_plain_head_is_msgpacks_head_at_every_boundary(text: bool) -> None:
    """`plain_head`: the fixed header, then MessagePack's own str (bin) head for each length where the head changes,
    the largest MessagePack holds (4 GiB - 1: its head only), and None beyond."""
    for n in (0, 1, 31, 32, 33, 255, 256, 65535, 65536, 65537):
        value: str | bytes = "a" * n if text else b"a" * n
        head = plain_head(text, n, 1_700_000_000_000, 0)
        assert head is not None
        assert head + (value.encode() if isinstance(value, str) else value) == build_plain(
            "msgpack", msgpack.packb(value, use_bin_type=True), "none", 1024, 1_700_000_000_000, 0
        )
    assert plain_head(text, 2**32 - 1, 0, 0) == plain_head(text, 0x10000, 0, 0)[:-4] + b"\xff" * 4  # type: ignore[index]
    assert plain_head(text, 2**32, 0, 0) is None
