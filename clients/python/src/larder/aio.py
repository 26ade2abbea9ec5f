"""`larder.AsyncCache`: the asyncio twin of `larder.Cache`.

The stores are blocking and thread-safe, so each store request runs in the default thread pool
(`asyncio.to_thread`) and never blocks the event loop; encoding, decoding and the policy are `Cache`'s own, the
outage memory included (what was loaded while the store failed answers the reads it fails, spec/STORES.md §3).
`fetch` coalesces across tasks: on a miss one task runs the loader (a coroutine function or a plain function) and
the others await its result or its exception, in memory, whether or not the store answers. Across processes it
follows the one lock policy as `Cache` does: the leading task takes the store lock, on a cold miss or a refresh,
and releases it however it ends (a cancellation included, even one that comes while the lock is being taken).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .cache import (
    _MISSING,
    LOCK_GONE,
    LOCK_POLL_FIRST,
    LOCK_POLL_MOST,
    WAITED_LOCK_TTL,
    Cache,
    CacheStats,
    _Lookup,
)
from .stores import Store

T = TypeVar("T")


class AsyncCache:
    """`Cache`'s verbs as coroutines. Make it with the same arguments as `Cache`, or wrap one: `AsyncCache(cache)`."""

    def __init__(self, store: Store | str | Cache = "memory://", **options: Any) -> None:
        self.sync = store if isinstance(store, Cache) else Cache(store, **options)
        self._flights: dict[str, asyncio.Future[Any]] = {}

    @property
    def store(self) -> Store:
        return self.sync.store

    def store_key(self, key: str) -> str:
        return self.sync.store_key(key)

    def stats(self) -> CacheStats:
        return self.sync.stats()

    def with_namespace(self, namespace: str) -> AsyncCache:
        return AsyncCache(self.sync.with_namespace(namespace))

    async def get(self, key: str, default: Any = None, *, version: str | None = None) -> Any:
        return await asyncio.to_thread(self.sync.get, key, default, version=version)

    async def get_many(self, keys: Iterable[str], *, version: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_many, list(keys), version=version)

    async def exists(self, key: str, *, version: str | None = None) -> bool:
        return await asyncio.to_thread(self.sync.exists, key, version=version)

    async def set(self, key: str, value: Any, ttl: float | None = None, **options: Any) -> None:
        await asyncio.to_thread(self.sync.set, key, value, ttl, **options)

    async def set_many(self, items: Mapping[str, Any], ttl: float | None = None, **options: Any) -> None:
        await asyncio.to_thread(self.sync.set_many, dict(items), ttl, **options)

    async def add(self, key: str, value: Any, ttl: float | None = None, **options: Any) -> bool:
        return await asyncio.to_thread(self.sync.add, key, value, ttl, **options)

    async def delete(self, key: str) -> bool:
        return await asyncio.to_thread(self.sync.delete, key)

    async def delete_many(self, keys: Iterable[str]) -> int:
        return await asyncio.to_thread(self.sync.delete_many, list(keys))

    async def incr(self, key: str, delta: int = 1, *, ttl: float | None = None, create: bool = True) -> int | None:
        return await asyncio.to_thread(self.sync.incr, key, delta, ttl=ttl, create=create)

    async def decr(self, key: str, delta: int = 1, *, ttl: float | None = None, create: bool = True) -> int | None:
        return await self.incr(key, -delta, ttl=ttl, create=create)

    async def purge(self, *, tag: str | None = None, prefix: str | None = None) -> int | None:
        return await asyncio.to_thread(self.sync.purge, tag=tag, prefix=prefix)

    async def clear(self) -> None:
        await asyncio.to_thread(self.sync.clear)

    async def fetch(
        self,
        key: str,
        loader: Callable[[], Awaitable[T]] | Callable[[], T],
        ttl: float | None = None,
        *,
        stale: float | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
    ) -> T:
        """As `Cache.fetch`, coalescing across the tasks of this event loop first: one task leads (spec/STORES.md
        §3), the others await its result, or are served the stale value at once while it refreshes one."""
        sync = self.sync
        store_key = sync.store_key(key)
        stats = sync._shared.stats
        while True:
            found: _Lookup = await asyncio.to_thread(sync._lookup, store_key, version)
            if found[0] == "fresh":
                return found[1]  # type: ignore[no-any-return]
            waiting = self._flights.get(store_key)
            if waiting is None:
                return await self._lead(store_key, found, loader, ttl, stale, version, tags)
            if found[0] == "stale":
                stats.bump("stale_served")
                return found[1]  # type: ignore[no-any-return]
            stats.bump("coalesced_waits")
            try:
                return await asyncio.shield(waiting)
            except asyncio.CancelledError:
                if waiting.cancelled():
                    continue  # the leader was cancelled: start over, perhaps as the leader
                raise

    async def _lead(
        self,
        store_key: str,
        found: _Lookup,
        loader: Callable[[], Awaitable[T]] | Callable[[], T],
        ttl: float | None,
        stale: float | None,
        version: str | None,
        tags: Sequence[str],
    ) -> T:
        """Leads this loop's tasks for `store_key` (registered before anything is awaited, so the others wait or
        serve stale instead of trying the lock too) through the one lock policy, as `Cache._lead` does
        (spec/STORES.md §3). The lock is released however this ends."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._flights[store_key] = future
        lock: tuple[str, bytes] | bool = True
        sync = self.sync
        waited_since: float | None = None
        try:
            while True:
                lock = await self._take_lock(store_key)
                if isinstance(lock, tuple):
                    value = await asyncio.to_thread(sync._peek, store_key, version)
                    if value is not _MISSING:
                        sync._shared.stats.bump("coalesced_across_processes")
                        future.set_result(value)
                        return value  # type: ignore[no-any-return]
                elif lock is True:  # the store failed: what this process loaded meanwhile, if anything
                    value = await asyncio.to_thread(sync._outage_value, store_key, version)
                    if value is not _MISSING:
                        future.set_result(value)
                        return value  # type: ignore[no-any-return]
                if lock is not False:
                    break
                if found[0] == "stale":
                    sync._shared.stats.bump("stale_served")
                    future.set_result(found[1])
                    return found[1]  # type: ignore[no-any-return]
                if waited_since is None:
                    waited_since = time.monotonic()
                value = await self._await_other_process(store_key, version, waited_since + sync.lock_ttl)
                if value is WAITED_LOCK_TTL:
                    break
                if value is not LOCK_GONE:
                    sync._shared.stats.bump("coalesced_across_processes")
                    future.set_result(value)
                    return value  # type: ignore[no-any-return]
            sync._shared.stats.bump("loads")
            result = loader()
            loaded: T = await result if inspect.isawaitable(result) else result
            await asyncio.to_thread(sync._store_quietly, store_key, loaded, ttl, stale, version, tags)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waited
            raise
        else:
            future.set_result(loaded)
            return loaded
        finally:
            if self._flights.get(store_key) is future:
                del self._flights[store_key]
            if isinstance(lock, tuple):
                await asyncio.to_thread(sync._unlock, *lock)

    async def _take_lock(self, store_key: str) -> tuple[str, bytes] | bool:
        """`Cache._try_lock` in a thread. A caller cancelled while the thread takes the lock (or the event loop
        shutting down) is gone before it could release it, so the lock is released for it: by the thread when it
        takes the lock after the caller left, else here, in a thread of its own, when the caller left after."""
        attempt = _LockAttempt()
        sync = self.sync

        def take() -> tuple[str, bytes] | bool:
            lock = sync._try_lock(store_key)
            with attempt.mutex:
                attempt.taken = lock
                abandoned = attempt.abandoned
            if abandoned and isinstance(lock, tuple):
                sync._unlock(*lock)
            return lock

        try:
            return await asyncio.to_thread(take)
        except asyncio.CancelledError:
            with attempt.mutex:
                attempt.abandoned = True
                taken = attempt.taken
            if isinstance(taken, tuple):
                threading.Thread(target=sync._unlock, args=taken, name="larder-unlock").start()
            raise

    async def _await_other_process(self, store_key: str, version: str | None, deadline: float) -> Any:
        """`Cache._await_other_process` without blocking the loop: the store polled after 5 ms, doubling to 50 ms."""
        pause = LOCK_POLL_FIRST
        while True:
            await asyncio.sleep(pause)
            pause = min(pause * 2, LOCK_POLL_MOST)
            found = await asyncio.to_thread(self.sync._peek, store_key, version)
            if found is not _MISSING:
                return found
            if time.monotonic() >= deadline:
                return WAITED_LOCK_TTL
            if not await asyncio.to_thread(self.sync._locked, store_key):
                return LOCK_GONE


class _LockAttempt:
    """A lock being taken in a thread for a task that may be cancelled meanwhile: who releases it."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.abandoned = False
        self.taken: tuple[str, bytes] | bool | None = None


__all__ = ["AsyncCache"]
