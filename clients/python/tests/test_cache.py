"""`larder.Cache` and `larder.AsyncCache`: the verbs, fetch's coalescing across threads and tasks, stale-while-
recompute with the cross-process lock, versions, namespaces, tags, pickled values, and a memcached server that dies
under a running cache (no exception reaches a fetch caller; the server is ejected and fails fast)."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Iterator
from decimal import Decimal

import msgpack
import pytest

import larder
from larder import AsyncCache, Cache
from larder.stores import ServerError, StoreError, lock_key, open_store
from servers import Memcached


@pytest.fixture(params=["memory", "memcached"])
def cache(request: pytest.FixtureRequest) -> Iterator[Cache]:
    if request.param == "memory":
        made = Cache("memory://?capacity=8M")
    else:
        server: Memcached = request.getfixturevalue("memcached_server")
        made = Cache(f"memcached://{server.address}", namespace=f"c{time.monotonic_ns()}")
    yield made
    made.close()


def test_verbs(cache: Cache) -> None:
    assert cache.get("k") is None
    assert cache.get("k", "dflt") == "dflt"
    cache.set("k", {"id": 7, "name": "Ada"}, ttl=60)
    assert cache.get("k") == {"id": 7, "name": "Ada"}
    assert cache.add("k", 1) is False
    assert cache.add("k2", [1, 2]) is True
    cache.set_many({"a": 1, "b": b"bytes", "c": None})
    assert cache.get_many(["a", "b", "c", "zz", "k2"]) == {"a": 1, "b": b"bytes", "c": None, "k2": [1, 2]}
    assert cache.exists("c") is True
    assert cache.exists("zz") is False
    assert cache.delete("a") is True
    assert cache.delete("a") is False
    assert cache.delete_many(["b", "c", "nope"]) == 2
    assert cache.incr("hits") == 1
    assert cache.incr("hits", 10) == 11
    assert cache.decr("hits", 2) == 9
    assert cache.get("hits") == 9, "get reads the store's decimal counters"
    assert cache.incr("none", create=False) is None


def test_stored_bytes_are_larder_entries_under_the_namespaced_key(cache: Cache) -> None:
    cache.set("user:7", {"id": 7}, ttl=60, version="v1", tags=["user:7"])
    raw = cache.store.get(cache.store_key("user:7"))
    assert raw is not None
    entry = larder.decode(raw)
    assert (entry.value, entry.version, entry.tags) == ({"id": 7}, "v1", ("user:7",))
    assert 59_000 <= entry.expires_at - entry.created_at <= 60_000
    if cache.namespace:
        assert cache.store_key("user:7") == f"{cache.namespace}:user:7"


def test_versions_and_expiry(cache: Cache) -> None:
    cache.set("v", "one", version="1")
    assert cache.get("v", version="1") == "one"
    assert cache.get("v", version="2") is None
    assert cache.get("v") == "one"
    cache.set("short", 1, ttl=0.2)
    time.sleep(0.3)
    assert cache.get("short") is None


def test_namespaces_nest_and_share_the_store(cache: Cache) -> None:
    outer = cache.with_namespace("app")
    inner = outer.with_namespace("users")
    inner.set("7", "Ada")
    assert inner.store_key("7").endswith("app:users:7")
    assert outer.get("users:7") == "Ada"
    assert cache.get("7") is None


def test_purge_by_tag_and_prefix(cache: Cache) -> None:
    old = larder.now_ms() - 5000
    for key, tags in [("p1", ["product:1"]), ("p2", ["product:2"])]:
        data = larder.encode(key, created_at=old, tags=tags)
        cache.store.set(cache.store_key(key), data)
    cache.purge(tag="product:1")
    assert cache.get("p1") is None
    assert cache.get("p2") == "p2"
    cache.purge(prefix="p")
    assert cache.get("p2") is None
    with pytest.raises(ValueError, match="exactly one"):
        cache.purge()


def test_fetch_computes_once_across_threads(cache: Cache) -> None:
    calls = []
    gate = threading.Event()

    def loader() -> str:
        calls.append(1)
        gate.wait(5)
        return "computed"

    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(cache.fetch("hot", loader, ttl=60))) for _ in range(16)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while cache.stats().coalesced_waits < 15 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    for t in threads:
        t.join(5)
    assert results == ["computed"] * 16
    assert len(calls) == 1
    assert cache.stats().loads == 1
    assert cache.get("hot") == "computed"
    assert cache.fetch("hot", lambda: "again") == "computed"


def test_a_failing_loader_reaches_every_waiter_and_caches_nothing(cache: Cache) -> None:
    gate = threading.Event()

    def loader() -> str:
        gate.wait(5)
        raise RuntimeError("database down")

    errors: list[BaseException] = []

    def call() -> None:
        try:
            cache.fetch("k", loader, ttl=60)
        except RuntimeError as e:
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(5)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while cache.stats().coalesced_waits < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    for t in threads:
        t.join(5)
    assert [str(e) for e in errors] == ["database down"] * 5
    assert cache.get("k") is None
    assert cache.fetch("k", lambda: "ok", ttl=60) == "ok"


def test_stale_while_recompute(cache: Cache) -> None:
    data = larder.encode("old", expires_at=larder.now_ms() - 100, stale_ms=60_000)
    cache.store.set(cache.store_key("page"), data)
    assert cache.get("page") is None, "a stale value is not fresh"
    gate = threading.Event()
    calls = []

    def slow() -> str:
        calls.append(1)
        gate.wait(5)
        return "new"

    leader: list[str] = []
    thread = threading.Thread(target=lambda: leader.append(cache.fetch("page", slow, ttl=60, stale=30)))
    thread.start()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.005)
    assert cache.fetch("page", lambda: "never", ttl=60) == "old", "others get the stale value at once"
    assert cache.store.get(lock_key("", cache.store_key("page"))) is not None, "the recompute lock is held"
    gate.set()
    thread.join(5)
    assert leader == ["new"]
    assert calls == [1]
    assert cache.get("page") == "new"
    assert cache.store.get(lock_key("", cache.store_key("page"))) is None, "released after the recompute"
    assert cache.stats().stale_served >= 1


def test_stale_value_is_served_while_another_process_holds_the_lock(cache: Cache) -> None:
    data = larder.encode("old", expires_at=larder.now_ms() - 100, stale_ms=60_000)
    cache.store.set(cache.store_key("page"), data)
    cache.store.add(lock_key("", cache.store_key("page")), b"0123456789abcdef", 30)
    assert cache.fetch("page", lambda: "new", ttl=60) == "old"
    assert cache.stats().loads == 0


def test_pickled_values_round_trip_only_with_pickle_on() -> None:
    store = open_store("memory://")
    pickling = Cache(store, pickle=True, signing_secret="app-secret")
    values = [(1, 2), {1, 2}, datetime.date(2024, 1, 2), Decimal("1.5"), {"a": (1,)}, 2**70, {1: "int key"}]
    for i, value in enumerate(values):
        pickling.set(f"k{i}", value)
        assert pickling.get(f"k{i}") == value
        assert type(pickling.get(f"k{i}")) is type(value)
    pickling.set("plain", {"a": [1, "x"]})
    assert larder.decode(store.get("plain") or b"").value == {"a": [1, "x"]}, "plain values stay plain msgpack"
    entry = larder.decode(store.get("k0") or b"")
    assert entry.serializer == "msgpack"
    assert isinstance(entry.value, msgpack.ExtType)
    assert entry.value.code == 80
    plain = Cache(store)
    assert plain.get("k0") is None, "a cache without pickle never unpickles"
    assert plain.stats().corrupt_entries == 1
    with pytest.raises(TypeError, match="pickle=True and signing_secret="):
        plain.set("t", object())
    with pytest.raises(ValueError, match="signing_secret"):
        Cache(store, pickle=True)


def test_async_cache_coalesces_across_tasks(memcached_server: Memcached) -> None:
    async def main() -> None:
        cache = AsyncCache(f"memcached://{memcached_server.address}", namespace=f"a{time.monotonic_ns()}")
        calls = []

        async def loader() -> dict[str, int]:
            calls.append(1)
            await asyncio.sleep(0.1)
            return {"n": 1}

        results = await asyncio.gather(*(cache.fetch("k", loader, ttl=60) for _ in range(20)))
        assert results == [{"n": 1}] * 20
        assert calls == [1]
        assert await cache.get("k") == {"n": 1}
        await cache.set("x", "y")
        assert await cache.get_many(["x", "k", "nope"]) == {"x": "y", "k": {"n": 1}}
        assert await cache.incr("c", 2) == 2
        assert await cache.fetch("sync", lambda: 5) == 5

        async def failing() -> int:
            await asyncio.sleep(0.05)
            raise KeyError("gone")

        outcomes = await asyncio.gather(*(cache.fetch("bad", failing) for _ in range(3)), return_exceptions=True)
        assert all(isinstance(o, KeyError) for o in outcomes)
        assert await cache.get("bad") is None
        cache.sync.close()

    asyncio.run(main())


def test_a_dead_memcached_server_is_ejected_and_fetch_never_raises() -> None:
    servers = [Memcached(), Memcached()]
    try:
        url = "memcached://" + ",".join(s.address for s in servers) + "?retry_after=60s&timeout=200ms"
        cache = Cache(url)
        keys = [f"key-{i}" for i in range(40)]
        for key in keys:
            cache.set(key, key)
        store = cache.store
        on_dead = [k for k in keys if store.server_of(cache.store_key(k)) == servers[1].address]  # type: ignore[attr-defined]
        assert on_dead, "the ring spreads keys over both servers"
        servers[1].kill()
        # Store errors are absorbed: every fetch returns, values on the dead server are recomputed.
        for key in keys:
            assert cache.fetch(key, lambda k=key: f"recomputed {k}", ttl=60) in (key, f"recomputed {key}")
        assert cache.stats().store_errors >= 1
        errors = dict(store.server_errors())
        assert errors[servers[1].address] >= 2, errors
        assert errors[servers[0].address] == 0
        # Ejected: its keys now go to the live server, at once.
        assert all(store.server_of(cache.store_key(k)) == servers[0].address for k in on_dead)  # type: ignore[attr-defined]
        started = time.monotonic()
        cache.set(on_dead[0], "moved")
        assert cache.get(on_dead[0]) == "moved"
        assert time.monotonic() - started < 0.2
    finally:
        for server in servers:
            server.stop()


def test_errors_name_the_server() -> None:
    stopped = Memcached()
    stopped.stop()  # nothing listens on its port now
    port = stopped.port
    store = open_store(f"memcached://127.0.0.1:{port}?failures=100")
    with pytest.raises(ServerError) as caught:
        store.set("k", b"v")
    assert f"memcached server 127.0.0.1:{port}" in str(caught.value)
    assert caught.value.server == f"127.0.0.1:{port}"
    cache = Cache(store)
    assert cache.get("k") is None
    assert cache.fetch("k", lambda: 1) == 1
    with pytest.raises(StoreError, match=f"127.0.0.1:{port}"):
        cache.set("k", 2)
    redis_store = open_store(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(ServerError, match=f"redis server 127.0.0.1:{port}"):
        redis_store.get("k")


# --- notes on the memory store: what a read decoded, kept for the next read of the same bytes ----------------------


def test_each_read_of_a_container_on_memory_gets_its_own_copy() -> None:
    cache = Cache("memory://")
    cache.set("k", {"id": 7, "tags": ["a", "b"]}, ttl=60)
    first = cache.get("k")
    first["tags"].append("mutated")
    first["id"] = 8
    second, third = cache.get("k"), cache.fetch("k", lambda: None)
    assert second == third == {"id": 7, "tags": ["a", "b"]}
    assert second is not third
    assert second["tags"] is not third["tags"]
    assert cache.get_many(["k"]) == {"k": {"id": 7, "tags": ["a", "b"]}}


@pytest.mark.parametrize(
    "value",
    [
        [1, "a", None],
        {"a": 1, "b": "x"},
        {"a": {"b": 1}, "c": [1, 2]},
        [[1], [2]],
        {"deep": {"er": [1]}},
        list(range(300)),
        {"k": msgpack.ExtType(5, b"x")},
    ],
)
def test_no_two_reads_on_memory_share_a_container(value: object) -> None:
    cache = Cache("memory://")
    cache.set("k", value, ttl=60)
    copies = [cache.get("k"), cache.get("k"), cache.fetch("k", lambda: None), cache.get_many(["k"])["k"]]
    assert all(copy == value for copy in copies)
    containers: list[int] = []
    for copy in copies:
        stack: list[object] = [copy]
        while stack:
            item = stack.pop()
            if isinstance(item, (list, dict)):
                containers.append(id(item))
                stack.extend(item.values() if isinstance(item, dict) else item)
    assert len(containers) == len(set(containers)), "every list and dict handed out is new"


def test_a_note_goes_with_the_bytes_it_was_made_from() -> None:
    cache = Cache("memory://")
    for value in ("text", b"bytes", 7, 1.5, None, True, {"a": 1}, [1, 2]):
        cache.set("k", value, ttl=60)
        assert cache.get("k") == value
        assert cache.get("k") == value, "read again, from the note"
    cache.set("k", "old", ttl=60)
    assert cache.get("k") == "old"
    cache.store.set(cache.store_key("k"), larder.encode("new"))  # written under the cache, straight to the store
    assert cache.get("k") == "new"
    cache.delete("k")
    assert cache.get("k") is None


def test_a_note_keeps_versions_expiry_and_stale_windows() -> None:
    cache = Cache("memory://")
    cache.set("v", "one", ttl=60, version="1")
    assert cache.get("v", version="1") == "one"
    assert cache.get("v", version="1") == "one"
    assert cache.get("v", version="2") is None
    cache.set("s", "stale soon", ttl=0.05, stale=60)
    assert cache.get("s") == "stale soon"
    time.sleep(0.1)
    assert cache.get("s") is None, "past its expiry: stale, which get does not serve"
    assert cache.fetch("s", lambda: "recomputed", ttl=60) == "recomputed", "the one caller recomputes it"
    assert cache.get("s") == "recomputed"
    cache.set("e", "short", ttl=0.05)
    assert cache.get("e") == "short"
    time.sleep(0.1)
    assert cache.get("e") is None


def test_a_cache_with_a_smaller_max_value_size_refuses_what_another_noted() -> None:
    store = open_store("memory://")
    big = Cache(store)
    small = Cache(store, max_value_size=100)
    big.set("k", "x" * 1000, ttl=60)
    assert big.get("k") == "x" * 1000
    assert small.get("k") is None
    assert small.stats().corrupt_entries == 1


def test_notes_weigh_in_the_capacity_but_never_evict_an_entry() -> None:
    cache = Cache("memory://?capacity=64K")
    for i in range(40):
        cache.set(f"k{i}", "v" * 1000, ttl=60)
    held = cache.store.stats()
    for _ in range(2):
        for i in range(40):
            assert cache.get(f"k{i}") == "v" * 1000
    after = cache.store.stats()
    assert after.entries == held.entries, "reads evict nothing"
    assert after.evictions == held.evictions
    assert after.bytes <= 64 * 1024, "notes count toward the bytes held, within the capacity"
    for i in range(40, 80):
        cache.set(f"k{i}", "v" * 1000, ttl=60)
        assert cache.store.stats().bytes <= 64 * 1024
    assert cache.store.stats().entries >= held.entries, "notes go before entries when a write needs room"
