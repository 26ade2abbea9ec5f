"""fetch's one lock policy (spec/STORES.md §3), for `Cache` and `AsyncCache`: whoever computes takes the store lock
first, on a cold miss and on a refresh alike, and reads the key once more once it holds it; a leader that finds it
held serves its stale value when it has one, else polls the store after 5 ms, each pause doubling to 50 ms, until a
value appears, or the lock goes (then it tries to take it: one waiter loads, the others wait for it), or `lock_ttl`
has passed since it began waiting (then it loads without the lock); the lock is released after a failure or a
cancellation too, even one that came while it was being taken.

Bursts on one key run the loader once: in real processes (cold misses, and reads of an entry gone stale), and in
several independent store clients, as several processes have them, for threads and for tasks."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from larder import AsyncCache, Cache
from larder.stores import Store, lock_key, open_store
from larder.stores.memory import MemoryStore
from servers import Memcached

# --- several processes --------------------------------------------------------------------------------------------

#: One process of a burst: says it is ready once larder is imported and its cache open, waits for the go line on
#: stdin, fetches "k" (the loader counts its runs in the store), prints what it got and how its cache saw it.
PROCESS = """
import json, sys, time
import larder
url, namespace = sys.argv[1], sys.argv[2]
cache = larder.Cache(url, namespace=namespace)
def loader():
    cache.incr("loads")
    time.sleep(0.5)  # long enough for every other process to find the lock held
    return "computed"
print("ready", flush=True)
sys.stdin.readline()
value = cache.fetch("k", loader, ttl=60, stale=30)
print(json.dumps({"value": value, "stats": vars(cache.stats())}, default=str))
"""


def burst_of_processes(memcached: Memcached, namespace: str, count: int) -> list[dict[str, Any]]:
    """`count` processes fetch "k" at once: each is started and ready (imports done, which takes seconds on a loaded
    machine) before any is told to go, so none arrives after the leader has finished."""
    url = f"memcached://{memcached.address}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS, url, namespace],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for p in processes:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in processes:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = [p.communicate(timeout=60)[0] for p in processes]
    assert [p.returncode for p in processes] == [0] * count
    return [json.loads(out) for out in outputs]


def test_a_burst_of_cold_misses_in_several_processes_runs_the_loader_once(memcached_server: Memcached) -> None:
    namespace = f"procs-cold-{time.monotonic_ns()}"
    results = burst_of_processes(memcached_server, namespace, 5)
    assert [r["value"] for r in results] == ["computed"] * 5
    cache = Cache(f"memcached://{memcached_server.address}", namespace=namespace)
    assert cache.get("loads") == 1, "one loader run across five processes"
    assert sorted(r["stats"]["coalesced_across_processes"] for r in results) == [0, 1, 1, 1, 1]
    assert cache.store.get(lock_key("", cache.store_key("k"))) is None, "the lock was released"


def test_a_burst_of_reads_of_a_stale_entry_in_several_processes_refreshes_once(memcached_server: Memcached) -> None:
    namespace = f"procs-stale-{time.monotonic_ns()}"
    cache = Cache(f"memcached://{memcached_server.address}", namespace=namespace)
    cache.set("k", "old", ttl=0.2, stale=60)
    time.sleep(0.4)
    results = burst_of_processes(memcached_server, namespace, 5)
    assert cache.get("loads") == 1, "one refresh across five processes"
    assert sorted(r["value"] for r in results) == ["computed"] + ["old"] * 4, "the others served stale at once"
    assert sum(r["stats"]["stale_served"] for r in results) == 4
    assert cache.get("k") == "computed"
    assert cache.store.get(lock_key("", cache.store_key("k"))) is None, "the lock was released"


# --- several independent store clients, as processes have them -----------------------------------------------------


def independent_caches(memcached: Memcached, count: int) -> list[Cache]:
    """`count` caches with a store client each, as `count` processes have, on one namespace of a real memcached."""
    namespace = f"lock-{time.monotonic_ns()}"
    return [Cache(f"memcached://{memcached.address}", namespace=namespace) for _ in range(count)]


def burst(caches: list[Cache], loader: object) -> list[object]:
    """Every cache fetches "k" at once, from its own thread."""
    start = threading.Barrier(len(caches))
    results: list[object] = []

    def run(cache: Cache) -> None:
        start.wait()
        results.append(cache.fetch("k", loader, ttl=60, stale=30))  # type: ignore[arg-type]

    threads = [threading.Thread(target=run, args=(c,)) for c in caches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_a_burst_of_cold_misses_across_clients_runs_the_loader_once(memcached_server: Memcached) -> None:
    caches = independent_caches(memcached_server, 6)
    calls: list[int] = []

    def loader() -> str:
        calls.append(1)
        time.sleep(0.3)  # long enough for every other client to find the lock held
        return "computed once"

    assert burst(caches, loader) == ["computed once"] * 6
    assert len(calls) == 1, "one loader run across six clients"
    assert sum(c.stats().coalesced_across_processes for c in caches) == 5
    assert caches[0].store.get(lock_key("", caches[0].store_key("k"))) is None, "the lock was released"


def test_a_burst_of_reads_of_a_stale_entry_across_clients_recomputes_once(memcached_server: Memcached) -> None:
    caches = independent_caches(memcached_server, 6)
    caches[0].set("k", "old", ttl=0.2, stale=30)
    time.sleep(0.4)
    calls: list[int] = []

    def loader() -> str:
        calls.append(1)
        time.sleep(0.3)
        return "new"

    results = burst(caches, loader)
    assert len(calls) == 1
    assert sorted(results) == ["new"] + ["old"] * 5, "the others are served the stale value at once"


def test_a_lock_released_without_a_value_lets_the_waiter_load(memcached_server: Memcached) -> None:
    (cache,) = independent_caches(memcached_server, 1)
    key = lock_key("", cache.store_key("k"))
    assert cache.store.add(key, b"another process", 30)  # held by a process whose loader will fail
    release = threading.Timer(0.3, lambda: cache.store.delete_if(key, b"another process"))
    release.start()
    started = time.monotonic()
    assert cache.fetch("k", lambda: "loaded") == "loaded"
    release.join()
    assert 0.25 < time.monotonic() - started < 3, "waited for the lock to go, and no longer"
    assert cache.stats().coalesced_across_processes == 0


def async_caches(memcached: Memcached, count: int) -> list[AsyncCache]:
    return [AsyncCache(c) for c in independent_caches(memcached, count)]


def test_async_caches_across_clients_run_the_loader_once(memcached_server: Memcached) -> None:
    calls: list[int] = []

    async def loader() -> str:
        calls.append(1)
        await asyncio.sleep(0.3)
        return "async once"

    async def main() -> list[str]:
        caches = async_caches(memcached_server, 5)
        return list(await asyncio.gather(*(c.fetch("k", loader, ttl=60) for c in caches)))

    assert asyncio.run(main()) == ["async once"] * 5
    assert len(calls) == 1


def test_async_caches_reading_a_stale_entry_across_clients_refresh_once(memcached_server: Memcached) -> None:
    calls: list[int] = []

    async def loader() -> str:
        calls.append(1)
        await asyncio.sleep(0.3)
        return "new"

    async def main() -> list[str]:
        caches = async_caches(memcached_server, 5)
        await caches[0].set("k", "old", ttl=0.2, stale=30)
        await asyncio.sleep(0.4)
        return list(await asyncio.gather(*(c.fetch("k", loader, ttl=60) for c in caches)))

    results = asyncio.run(main())
    assert len(calls) == 1
    assert sorted(results) == ["new"] + ["old"] * 4


# --- polling ------------------------------------------------------------------------------------------------------


def held_elsewhere(store: Store, cache: Cache, key: str = "k") -> str:
    """Takes `key`'s lock as another process would; its lock key."""
    lock = lock_key("", cache.store_key(key))
    assert store.add(lock, b"another process", 60)
    return lock


def test_a_cold_leader_polls_from_5_ms_doubling_to_50_ms_until_lock_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache("memory://", lock_ttl=0.4)
    held_elsewhere(cache.store, cache)
    pauses: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr("larder.cache.time.sleep", sleep)
    started = time.monotonic()
    assert cache.fetch("k", lambda: "mine") == "mine", "computes itself once lock_ttl has passed"
    assert time.monotonic() - started >= 0.4
    assert pauses[:5] == [0.005, 0.01, 0.02, 0.04, 0.05]
    assert set(pauses[5:]) == {0.05}
    assert cache.stats().loads == 1


def test_an_async_cold_leader_polls_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = AsyncCache("memory://", lock_ttl=0.4)
    held_elsewhere(cache.store, cache.sync)
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        await real_sleep(seconds)

    monkeypatch.setattr("larder.aio.asyncio.sleep", sleep)
    assert asyncio.run(cache.fetch("k", lambda: "mine")) == "mine"
    assert pauses[:5] == [0.005, 0.01, 0.02, 0.04, 0.05]
    assert set(pauses[5:]) == {0.05}


def test_a_value_written_by_the_holder_is_served_as_read() -> None:
    cache = Cache("memory://", lock_ttl=5)
    held_elsewhere(cache.store, cache)
    writer = threading.Timer(0.1, lambda: cache.set("k", "theirs"))
    writer.start()
    assert cache.fetch("k", lambda: "mine") == "theirs"
    writer.join()
    assert cache.stats().loads == 0
    assert cache.stats().coalesced_across_processes == 1


def test_a_stale_leader_that_finds_the_lock_held_serves_stale_at_once() -> None:
    cache = Cache("memory://", lock_ttl=5)
    cache.set("k", "old", ttl=0.05, stale=60)
    time.sleep(0.1)
    held_elsewhere(cache.store, cache)
    started = time.monotonic()
    assert cache.fetch("k", lambda: "mine") == "old"
    assert time.monotonic() - started < 0.5, "no polling"
    assert cache.stats().loads == 0


def waiters(count: int) -> tuple[Store, list[Cache], str]:
    """`count` caches on one memory store, each with its own coalescing, as processes have; the key's lock taken by
    yet another process."""
    store = open_store("memory://")
    caches = [Cache(store, lock_ttl=10) for _ in range(count)]
    return store, caches, held_elsewhere(store, caches[0])


def test_when_the_lock_goes_without_a_value_one_waiter_loads_and_the_others_wait_for_it() -> None:
    store, caches, lock = waiters(5)
    calls: list[int] = []

    def loader() -> str:
        calls.append(1)
        time.sleep(0.3)  # the others find the lock held again, by this waiter
        return "one"

    release = threading.Timer(0.2, lambda: store.delete_if(lock, b"another process"))  # it crashed, say
    release.start()
    assert burst(caches, loader) == ["one"] * 5
    release.join()
    assert calls == [1], "one waiter took the lock and loaded, not all of them"
    assert sum(c.stats().coalesced_across_processes for c in caches) == 4
    assert store.get(lock) is None


def test_async_waiters_do_the_same() -> None:
    store, caches, lock = waiters(5)
    calls: list[int] = []

    async def loader() -> str:
        calls.append(1)
        await asyncio.sleep(0.3)
        return "one"

    async def main() -> list[str]:
        asyncio.get_running_loop().call_later(0.2, store.delete_if, lock, b"another process")
        return list(await asyncio.gather(*(AsyncCache(c).fetch("k", loader) for c in caches)))

    assert asyncio.run(main()) == ["one"] * 5
    assert calls == [1]
    assert store.get(lock) is None


class JustReleased(MemoryStore):
    """A memory store where another process writes "k" and releases its lock just before this one takes it."""

    def __init__(self, value: bytes) -> None:
        super().__init__()
        self.value = value

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        if key.startswith("larder#"):
            self.set("k", self.value)
        return super().add(key, value, ttl)


@pytest.mark.parametrize("stale", [False, True])
def test_a_leader_holding_the_lock_reads_the_key_once_more_first(stale: bool) -> None:
    cache = Cache("memory://")
    store = JustReleased(cache.encode("theirs", ttl=60)[0])
    cache = Cache(store)
    if stale:
        MemoryStore.set(store, "k", cache.encode("old", ttl=0.05, stale=60)[0])
        time.sleep(0.1)
    assert cache.fetch("k", lambda: "mine") == "theirs"
    assert cache.stats().loads == 0
    assert store.get(lock_key("", "k")) is None, "released"
    acache = AsyncCache(JustReleased(cache.encode("theirs too", ttl=60)[0]))
    assert asyncio.run(acache.fetch("k", lambda: "mine")) == "theirs too"
    assert acache.stats().loads == 0


# --- release ------------------------------------------------------------------------------------------------------


class Interrupted(BaseException):
    """Stands for KeyboardInterrupt or SystemExit in a loader."""


@pytest.mark.parametrize("error", [ValueError, Interrupted])
@pytest.mark.parametrize("stale", [False, True])
def test_a_failing_loader_releases_the_lock(error: type[BaseException], stale: bool) -> None:
    cache = Cache("memory://")
    if stale:
        cache.set("k", "old", ttl=0.05, stale=60)
        time.sleep(0.1)

    def loader() -> str:
        assert cache.store.get(lock_key("", cache.store_key("k"))) is not None, "computed under the lock"
        raise error("boom")

    with pytest.raises(error):
        cache.fetch("k", loader)
    assert cache.store.get(lock_key("", cache.store_key("k"))) is None


@pytest.mark.parametrize("stale", [False, True])
def test_a_cancelled_async_loader_releases_the_lock(stale: bool) -> None:
    cache = AsyncCache("memory://")
    lock = lock_key("", cache.store_key("k"))

    async def main() -> None:
        if stale:
            await cache.set("k", "old", ttl=0.05, stale=60)
            await asyncio.sleep(0.1)
        started = asyncio.Event()

        async def loader() -> str:
            started.set()
            await asyncio.sleep(60)
            return "never"

        task = asyncio.create_task(cache.fetch("k", loader))
        await asyncio.wait_for(started.wait(), 5)
        assert cache.store.get(lock) is not None, "computing under the lock"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cache.store.get(lock) is None


class SlowAdd(MemoryStore):
    """A memory store whose `add` blocks until released, counting its calls: a lock being taken, slowly."""

    def __init__(self) -> None:
        super().__init__()
        self.adding = threading.Event()
        self.release = threading.Event()
        self.added = threading.Event()
        self.adds = 0

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        self.adds += 1
        self.adding.set()
        self.release.wait(10)
        try:
            return super().add(key, value, ttl)
        finally:
            self.added.set()


@pytest.mark.parametrize("stale", [False, True])
def test_an_async_fetch_cancelled_while_taking_the_lock_releases_it(stale: bool) -> None:
    store = SlowAdd()
    cache = AsyncCache(store)
    lock = lock_key("", cache.store_key("k"))

    async def main() -> None:
        if stale:
            store.set(cache.store_key("k"), cache.sync.encode("old", ttl=0.05, stale=60)[0])
            await asyncio.sleep(0.1)
        task = asyncio.create_task(cache.fetch("k", lambda: "never"))
        await asyncio.to_thread(store.adding.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        store.release.set()  # the add goes through: the lock is taken for a caller that is gone
        await asyncio.to_thread(store.added.wait, 5)

    asyncio.run(main())
    deadline = time.monotonic() + 5
    while store.get(lock) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.get(lock) is None, "released once taken"
    assert cache.stats().loads == 0


def test_tasks_of_one_loop_on_a_stale_entry_try_the_lock_once() -> None:
    store = SlowAdd()
    store.release.set()
    cache = AsyncCache(store)
    calls: list[int] = []

    async def loader() -> str:
        calls.append(1)
        await asyncio.sleep(0.2)
        return "new"

    async def main() -> list[str]:
        await cache.set("k", "old", ttl=0.05, stale=60)
        await asyncio.sleep(0.1)
        return list(await asyncio.gather(*(cache.fetch("k", loader) for _ in range(10))))

    assert sorted(asyncio.run(main())) == ["new"] + ["old"] * 9
    assert calls == [1]
    assert store.adds == 1, "the process's one leader takes the lock; the others are coalesced first"


class InterruptedAdd(MemoryStore):
    """A memory store whose first `add` is interrupted (as by Ctrl-C while the lock is being taken)."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupt = True

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        if self.interrupt:
            self.interrupt = False
            raise Interrupted
        return super().add(key, value, ttl)


@pytest.mark.parametrize("stale", [False, True])
def test_an_interrupt_while_taking_the_lock_leaves_no_caller_stuck(stale: bool) -> None:
    cache = Cache(InterruptedAdd())
    if stale:
        cache.set("k", "old", ttl=0.05, stale=60)
        time.sleep(0.1)
    with pytest.raises(Interrupted):
        cache.fetch("k", lambda: "never")
    assert cache.computing() == 0, "the interrupted leader's flight is over"
    results: list[str] = []
    again = threading.Thread(target=lambda: results.append(cache.fetch("k", lambda: "loaded")))
    again.start()
    again.join(5)
    assert results == ["loaded"], "the next caller leads and refreshes, neither waits forever nor serves stale"
