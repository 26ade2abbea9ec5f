"""When the store fails (spec/STORES.md §3, issue 33), for `Cache`, `AsyncCache` and the Django backend, over a store
that can be switched to fail as a dead server does (`ServerError`):

- the outage memory keeps a value whose write failed, with the expiry the store would have given it (stale window
  included), and answers the reads the store fails; reads still go to the store first;
- the store's first good answer (a miss included) once no failure has been seen for a second empties it (a good
  answer within that second keeps it: with several servers, the others answer while one fails), and nothing in it
  is written back;
- deletes and purges apply to it; its size is bounded; `outage_memory=0` turns it off; errors that are not a server
  failure (invalid_key, too_large, not_a_counter) keep nothing;
- concurrent `fetch` callers of one key share one load and get the leader's value in memory even though the lock
  cannot be taken and the write fails, and a caller that comes after the leader finished gets the kept value
  instead of loading again.

The same against real servers behind larder-faults is outage.json (tests/test_vectors.py)."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from larder import AsyncCache, Cache
from larder.cache import OUTAGE_QUIET
from larder.stores import InvalidKey, NotACounter, ServerError, Store, StoreError, StoreStats, TooLarge
from larder.stores.memory import MemoryStore


class Flaky(Store):
    """A memory store that fails like a dead server while `down` (or with `error`, when set), or only for the store
    keys in `dead` (the keys of one dead server of a pool), and counts the requests that reached it."""

    backend = "flaky"

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.down = False
        self.dead: set[str] = set()
        self.error: StoreError | None = None
        self.requests = 0
        self._lock = threading.Lock()

    def _call(self, keys: Sequence[str] = ()) -> None:
        with self._lock:
            self.requests += 1
        if self.error is not None:
            raise self.error
        if self.down or not self.dead.isdisjoint(keys):
            raise ServerError(self.backend, "connection refused", "127.0.0.1:1")

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self._call(keys)
        return self.inner.get_many(keys)

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        self._call([key for key, _ in items])
        self.inner.set_many(items, ttl)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        self._call([key])
        return self.inner.add(key, value, ttl)

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        self._call([key])
        return self.inner.incr(key, delta, ttl, create)

    def delete_if(self, key: str, expected: bytes) -> bool:
        self._call([key])
        return self.inner.delete_if(key, expected)

    def delete_many(self, keys: Sequence[str]) -> int:
        self._call(keys)
        return self.inner.delete_many(keys)

    def clear(self) -> None:
        self._call()
        self.inner.clear()

    def purge_prefix(self, prefix: str) -> int | None:
        self._call()
        return self.inner.purge_prefix(prefix)

    def purge_tag(self, tag: str) -> int | None:
        self._call()
        return self.inner.purge_tag(tag)

    def stats(self) -> StoreStats:
        return self.inner.stats()


class Loader:
    def __init__(self, value: Any, seconds: float = 0.0) -> None:
        self.value = value
        self.seconds = seconds
        self.runs = 0
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.runs += 1
        time.sleep(self.seconds)
        return self.value


def kept(cache: Cache) -> MemoryStore:
    memory = cache._shared.outage.memory
    assert memory is not None
    return memory


class Clock:
    """A monotonic clock the test moves by hand (`now`, seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clocked(cache: Cache) -> Clock:
    """`cache`'s outage memory on a clock of the test's (shared by the cache's namespaces)."""
    clock = Clock()
    cache._shared.outage.clock = clock
    return clock


def test_a_value_loaded_while_the_store_fails_answers_the_reads_it_fails() -> None:
    store = Flaky()
    cache = Cache(store, namespace="n")
    store.down = True
    loader = Loader("v1")
    assert cache.fetch("k", loader, ttl=60) == "v1"
    assert cache.fetch("k", loader, ttl=60) == "v1"
    assert loader.runs == 1, "the second fetch was answered from the outage memory"
    assert cache.get("k") == "v1"
    assert cache.get_many(["k", "other"]) == {"k": "v1"}
    assert cache.exists("k")
    assert cache.stats().store_errors >= 4, "the store was asked first each time"


def test_reads_go_to_the_store_first_and_its_answer_wins() -> None:
    store = Flaky()
    cache = Cache(store)
    clock = clocked(cache)
    store.down = True
    cache.fetch("k", Loader("from the outage"), ttl=60)
    store.down = False
    clock.now += OUTAGE_QUIET
    cache.set("elsewhere", 1)  # (through this cache: a good answer a second on, which empties the outage memory)
    store.inner.set(cache.store_key("k"), cache.encode("from the store", ttl=60)[0], 60)
    assert cache.get("k") == "from the store"
    store.down = True
    assert cache.get("k") is None, "emptied by the good answers: nothing kept any more"


def test_a_failed_write_is_kept_with_the_expiry_the_store_would_have_given() -> None:
    store = Flaky()
    cache = Cache(store)
    store.down = True
    before = time.time_ns() // 1_000_000
    cache.fetch("k", Loader("v"), ttl=10, stale=5)
    record = kept(cache).read(cache.store_key("k"))
    assert record is not None
    assert record[1] is not None
    assert before + 15_000 <= record[1] <= time.time_ns() // 1_000_000 + 15_000, "ttl + the stale window"
    cache.fetch("never", Loader("v"))
    record = kept(cache).read(cache.store_key("never"))
    assert record is not None
    assert record[1] is None, "no ttl: kept until the outage ends or it is evicted"


def test_a_kept_value_expires_as_it_would_in_the_store() -> None:
    store = Flaky()
    cache = Cache(store)
    store.down = True
    loader = Loader("v")
    cache.fetch("k", loader, ttl=0.1)
    assert cache.get("k") == "v"
    time.sleep(0.15)
    assert cache.get("k") is None
    cache.fetch("k", loader, ttl=0.1)
    assert loader.runs == 2


def test_a_stale_kept_value_is_served_stale_while_one_caller_refreshes() -> None:
    store = Flaky()
    cache = Cache(store)
    store.down = True
    cache.fetch("k", Loader("old"), ttl=0.05, stale=10)
    time.sleep(0.1)
    assert cache.get("k") is None, "past its freshness"
    assert cache.fetch("k", Loader("new"), ttl=60) == "new", "a refresh: the store lock cannot be taken"
    assert cache.get("k") == "new"


def test_the_first_good_answer_a_second_on_empties_it_even_a_miss_and_nothing_is_written_back() -> None:
    store = Flaky()
    cache = Cache(store)
    clock = clocked(cache)
    store.down = True
    for key in ("a", "b", "c"):
        cache.fetch(key, Loader(key), ttl=60)
    assert len(kept(cache)) == 3
    store.down = False
    clock.now += OUTAGE_QUIET  # (exactly a second since the last failure: enough)
    assert cache.get("nothing-here") is None  # a miss, but a good answer
    assert len(kept(cache)) == 0
    assert not cache._shared.outage.failing
    assert len(store.inner) == 0, "nothing was written back"
    store.down = True
    assert cache.get("a") is None


@pytest.mark.parametrize(
    "answer",
    [
        lambda cache: cache.set("x", 1),
        lambda cache: cache.delete("x"),
        lambda cache: cache.incr("n"),
        lambda cache: cache.add("x", 1),
        lambda cache: cache.fetch("x", lambda: 1),
        lambda cache: cache.get_many(["x", "y"]),
        lambda cache: cache.purge(prefix="p"),
    ],
    ids=["set", "delete", "incr", "add", "fetch", "get_many", "purge"],
)
def test_any_good_answer_ends_the_outage(answer: Any) -> None:
    store = Flaky()
    cache = Cache(store)
    clock = clocked(cache)
    store.down = True
    cache.fetch("k", Loader("v"), ttl=60)
    store.down = False
    clock.now += OUTAGE_QUIET
    answer(cache)
    assert len(kept(cache)) == 0


def test_a_good_answer_within_a_second_of_a_failure_keeps_it() -> None:
    store = Flaky()
    cache = Cache(store)
    clock = clocked(cache)
    store.down = True
    cache.fetch("k", Loader("v"), ttl=60)
    store.down = False
    clock.now += 0.5
    assert cache.get("other") is None  # a good answer half a second after the failure
    assert len(kept(cache)) == 1, "kept: too soon after the failure"
    assert cache._shared.outage.failing
    store.down = True
    assert cache.get("k") == "v", "still answered from the outage memory"
    store.down = False
    clock.now += 0.75  # 1.25 s after the first failure, 0.75 s after the last
    cache.set("x", 1)
    assert len(kept(cache)) == 1, "the second counts from the last failure"
    clock.now += 0.25
    cache.set("x", 1)
    assert len(kept(cache)) == 0, "a second without a failure: emptied"
    assert not cache._shared.outage.failing


def test_while_one_server_of_a_pool_fails_the_others_answers_keep_it() -> None:
    store = Flaky()
    cache = Cache(store)
    clock = clocked(cache)
    store.dead = {cache.store_key("k")}
    loader = Loader("v")
    for _ in range(8):
        assert cache.fetch("k", loader, ttl=60) == "v"
        assert cache.get("elsewhere") is None  # another server answers
        cache.set("elsewhere-too", 1)
        clock.now += 0.25
    assert loader.runs == 1, "the dead server's key was loaded once, the other servers answering all along"
    store.dead = set()
    clock.now += OUTAGE_QUIET
    assert cache.get("elsewhere") is None
    assert len(kept(cache)) == 0


def test_the_quiet_second_is_measured_on_the_monotonic_clock_by_default() -> None:
    store = Flaky()
    cache = Cache(store)
    assert cache._shared.outage.clock is time.monotonic
    store.down = True
    cache.fetch("k", Loader("v"), ttl=60)
    store.down = False
    assert cache.get("other") is None
    assert len(kept(cache)) == 1
    time.sleep(OUTAGE_QUIET + 0.05)
    assert cache.get("other") is None
    assert len(kept(cache)) == 0


def test_a_plain_set_that_fails_is_kept_and_still_raises() -> None:
    store = Flaky()
    cache = Cache(store)
    store.down = True
    with pytest.raises(ServerError):
        cache.set("k", {"a": 1}, ttl=60)
    with pytest.raises(ServerError):
        cache.set_many({"m1": 1, "m2": 2}, ttl=60)
    with pytest.raises(ServerError):
        cache.set("tagged", "t", ttl=60, stale=5, tags=["tag"])
    assert cache.get("k") == {"a": 1}
    assert cache.get_many(["m1", "m2"]) == {"m1": 1, "m2": 2}
    assert cache.get("tagged") == "t"
    with pytest.raises(ServerError):
        cache.add("k", "other", ttl=60)
    assert cache.get("k") == {"a": 1}, "add keeps nothing over a value held"


def test_deletes_and_purges_apply_to_it() -> None:
    store = Flaky()
    cache = Cache(store)
    store.down = True
    for key in ("d1", "d2", "d3", "user:1", "user:2", "keep"):
        cache.fetch(key, Loader(key), ttl=60)
    cache.fetch("tagged", Loader("t"), ttl=60, tags=["red"])
    with pytest.raises(ServerError):
        cache.delete("d1")
    with pytest.raises(ServerError):
        cache.delete_many(["d2", "d3"])
    with pytest.raises(ServerError):
        cache.purge(prefix="user:")
    with pytest.raises(ServerError):
        cache.purge(tag="red")
    assert cache.get_many(["d1", "d2", "d3", "user:1", "user:2", "tagged", "keep"]) == {"keep": "keep"}
    with pytest.raises(ServerError):
        cache.clear()
    assert cache.get("keep") is None


def test_a_namespace_s_clear_applies_to_its_keys_only() -> None:
    store = Flaky()
    outer = Cache(store)
    inner = outer.with_namespace("ns")
    store.down = True
    outer.fetch("k", Loader("outer"), ttl=60)
    inner.fetch("k", Loader("inner"), ttl=60)
    with pytest.raises(ServerError):
        inner.clear()
    assert inner.get("k") is None
    assert outer.get("k") == "outer", "a namespaced view shares the outage memory, and clears only its own"


def test_its_size_is_bounded() -> None:
    store = Flaky()
    cache = Cache(store, outage_memory="64K")
    store.down = True
    values = [secrets.token_hex(500) for _ in range(200)]  # (1000 characters LZ4 cannot shrink)
    for i, value in enumerate(values):
        cache.fetch(f"k{i}", Loader(value), ttl=60)
    memory = kept(cache)
    assert memory.capacity == 64 << 10
    assert memory.stats().bytes <= 64 << 10
    assert 0 < len(memory) < 200, "the least recently used went first"
    assert cache.get("k199") == values[199]
    assert cache.get("k0") is None
    cache.fetch("big", Loader(secrets.token_hex(4000)), ttl=60)  # more than a sixteenth of it: not kept
    assert cache.get("big") is None
    with pytest.raises(ServerError):
        cache.set("k199", secrets.token_hex(4000), ttl=60)
    assert cache.get("k199") is None, "a newer value too large to keep drops the older one"


def test_zero_turns_it_off() -> None:
    store = Flaky()
    cache = Cache(store, outage_memory=0)
    assert cache._shared.outage.memory is None
    store.down = True
    loader = Loader("v")
    assert cache.fetch("k", loader, ttl=60) == "v"
    assert cache.fetch("k", loader, ttl=60) == "v"
    assert loader.runs == 2
    assert cache.get("k") is None


def test_its_size_is_read_as_store_urls_write_sizes() -> None:
    assert kept(Cache(Flaky())).capacity == 16 << 20, "16M by default"
    assert kept(Cache(Flaky(), outage_memory="512K")).capacity == 512 << 10
    assert kept(Cache(Flaky(), outage_memory=4096)).capacity == 4096
    assert Cache(Flaky(), outage_memory="0").with_namespace("x")._shared.outage.memory is None
    with pytest.raises(ValueError, match="outage_memory"):
        Cache(Flaky(), outage_memory="lots")
    with pytest.raises(ValueError, match="outage_memory"):
        Cache(Flaky(), outage_memory=-1)
    assert Cache("memory://")._shared.outage.memory is None, "larder's memory store cannot fail so: none"


@pytest.mark.parametrize(
    "error",
    [
        InvalidKey("flaky", "k", "refused"),
        TooLarge("flaky", "k", 10, 5),
        NotACounter("flaky", "k"),
    ],
    ids=["invalid_key", "too_large", "not_a_counter"],
)
def test_errors_that_are_not_a_server_failure_keep_nothing(error: StoreError) -> None:
    store = Flaky()
    cache = Cache(store)
    store.error = error
    loader = Loader("v")
    assert cache.fetch("k", loader, ttl=60) == "v"
    with pytest.raises(StoreError):
        cache.set("s", 1)
    assert len(kept(cache)) == 0
    assert not cache._shared.outage.failing
    assert cache.fetch("k", loader, ttl=60) == "v"
    assert loader.runs == 2


def test_concurrent_callers_share_one_load_while_the_lock_and_the_write_fail() -> None:
    store = Flaky()
    cache = Cache(store)
    store.down = True
    loader = Loader("v", seconds=0.1)
    start = threading.Barrier(16)
    got: list[Any] = []

    def call() -> None:
        start.wait()
        got.append(cache.fetch("k", loader, ttl=60))

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == ["v"] * 16
    assert loader.runs == 1
    assert cache.stats().coalesced_waits >= 1


def test_a_caller_that_leads_after_the_leader_finished_takes_the_kept_value() -> None:
    """A caller whose read failed before the leader kept its value, and whose turn to lead comes after the leader
    finished, finds the value kept instead of loading again (the straggler of a burst)."""
    store = Flaky()
    cache = Cache(store)
    store.down = True
    key = cache.store_key("k")
    loader = Loader("v")
    lookup = cache._lookup
    read_failed = threading.Event()
    leader_done = threading.Event()

    def slow_lookup(store_key: str, version: str | None) -> Any:
        found = lookup(store_key, version)
        if threading.current_thread().name == "straggler":
            read_failed.set()
            leader_done.wait(5)
        return found

    cache._lookup = slow_lookup  # type: ignore[method-assign]
    results: list[Any] = []
    straggler = threading.Thread(target=lambda: results.append(cache.fetch("k", loader, ttl=60)), name="straggler")
    straggler.start()
    assert read_failed.wait(5)
    assert cache.fetch("k", loader, ttl=60) == "v"
    assert kept(cache).read(key) is not None
    leader_done.set()
    straggler.join(5)
    assert results == ["v"]
    assert loader.runs == 1


def test_async_callers_share_one_load_and_the_kept_value() -> None:
    async def main() -> None:
        store = Flaky()
        cache = AsyncCache(store, outage_memory="1M")
        clock = clocked(cache.sync)
        store.down = True
        runs = 0

        async def load() -> str:
            nonlocal runs
            runs += 1
            await asyncio.sleep(0.1)
            return "v"

        for _ in range(3):
            assert await asyncio.gather(*(cache.fetch("k", load, ttl=60) for _ in range(16))) == ["v"] * 16
        assert runs == 1
        assert await cache.get("k") == "v"
        store.down = False
        assert await cache.get("other") is None  # a good answer right after the failures
        assert await cache.get("k") is None, "the store answers first: its miss wins"
        assert len(kept(cache.sync)) == 1, "but the outage memory stays: too soon after the failures"
        store.down = True
        assert await cache.get("k") == "v"
        store.down = False
        clock.now += OUTAGE_QUIET
        assert await cache.get("k") is None, "the store answers a second on: its miss, and the outage memory is emptied"
        assert len(kept(cache.sync)) == 0

    asyncio.run(main())


def test_the_django_backend_takes_the_option() -> None:
    from support import configure_django

    configure_django()
    from larder.django import LarderCache

    backend = LarderCache("memcached://127.0.0.1:1?timeout=50ms", {"OPTIONS": {"outage_memory": "1M"}})
    assert kept(backend.larder).capacity == 1 << 20
    off = LarderCache("memcached://127.0.0.1:1?timeout=50ms", {"OPTIONS": {"outage_memory": 0}})
    assert off.larder._shared.outage.memory is None
    with pytest.raises(StoreError):
        backend.set("k", "v", 60)  # nothing listens: refused, so kept
    assert backend.get("k") == "v"
    with pytest.raises(StoreError):
        backend.delete("k")
    assert backend.get("k") is None
