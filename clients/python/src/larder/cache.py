"""`larder.Cache`: what a program calls. Values in the shared entry format (spec/FORMAT.md) over any store.

Mirrors the Rust crate `larder-cache` (cache.rs, fetch.rs, locks.rs):
- `fetch(key, loader, ttl=…)`: a miss is computed by exactly one thread of this process; the others wait for its
  result (or its exception) instead of running the loader again.
- Across processes, the one leader per process takes a lock in the store first (`add` of a random token under
  `internal_key("lock", key)`, released with `delete_if`: spec/STORES.md §3, one lock policy): on a cold miss a
  leader that finds it held polls the store for the other process's value instead of loading it too; within an
  entry's stale window, one caller recomputes while every other caller, in every process, is served the stale value
  at once.
- Reads absorb store failures (a miss, counted in `stats().store_errors`): a cache that is down must not take the
  program down. `fetch` also absorbs failed writes, since the computed value is good. Plain writes (`set`, `add`,
  `delete`, `incr`, purges) raise `StoreError`, which names the backend and server.
- Counters (`incr`/`decr`) are the stores' ASCII decimal counters, shared with every language; `get` reads them as
  ints.

Values are MessagePack by default. With `pickle=True` and a `signing_secret` (the Django backend's choice, with
Django's SECRET_KEY), a value MessagePack cannot hold exactly (a tuple, a set, a datetime, a model instance…) is
stored as a MessagePack ext of type 80 holding its pickle, signed with the secret (signing.py, spec/FORMAT.md §2):
still a valid larder entry, which other languages decode as an opaque extension value and never misread. A pickle
is unpickled only when its signature is this application's; anything else at ext 80 is a miss.
"""

from __future__ import annotations

import pickle
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, TypeVar

import msgpack

from .compressors import DEFAULT_MAX_SIZE
from .entry import DEFAULT_THRESHOLD, _build, decode, now_ms
from .errors import InvalidEntry
from .keys import namespaced_key
from .serializers import serialize
from .signing import Refused, Secret, Signer, log_refusal
from .stores import Store, StoreError, open_store
from .stores.base import lock_key, parse_counter

T = TypeVar("T")

#: The MessagePack extension type that holds a Python pickle (Python-only values; see the module's doc).
PICKLE_EXT: Final = 80
#: How long a recompute lock lives if its holder dies.
DEFAULT_LOCK_TTL: Final = 10.0
#: Polling for a value another process computes under the lock: the first pause, and the longest (spec/STORES.md §3).
LOCK_POLL_FIRST: Final = 0.005
LOCK_POLL_MOST: Final = 0.05

_MISSING: Final = object()
#: What waiting for another process's value can end in, besides the value (spec/STORES.md §3, step 4).
LOCK_GONE: Final = object()
WAITED_LOCK_TTL: Final = object()


@dataclass
class CacheStats:
    """What a cache has seen since it was made (shared by its namespaced views)."""

    hits: int = 0
    misses: int = 0
    loads: int = 0
    coalesced_waits: int = 0
    coalesced_across_processes: int = 0
    stale_served: int = 0
    store_errors: int = 0
    corrupt_entries: int = 0
    refused_pickles: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> CacheStats:
        with self._lock:
            return CacheStats(**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"})


class _Flight:
    """One computation in progress; waiters block on `done` and read `value` or `error`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class _InFlight:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}

    def join_or_lead(self, key: str) -> tuple[bool, _Flight]:
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None:
                return False, flight
            flight = self._flights[key] = _Flight()
            return True, flight

    def try_lead(self, key: str) -> _Flight | None:
        with self._lock:
            if key in self._flights:
                return None
            flight = self._flights[key] = _Flight()
            return flight

    def finish(self, key: str, flight: _Flight, value: Any = None, error: BaseException | None = None) -> None:
        flight.value, flight.error = value, error
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
        flight.done.set()

    def __len__(self) -> int:
        return len(self._flights)


@dataclass(frozen=True)
class _Lookup:
    state: str  # "fresh", "stale" or "miss"
    value: Any = None


MISS: Final = _Lookup("miss")


class _Shared:
    """What a cache and its namespaced views share."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.inflight = _InFlight()
        self.stats = CacheStats()


class Cache:
    """A cache over a store (a `Store`, or a store URL such as `"memcached://127.0.0.1:11211"`). Thread-safe.

    TTLs and stale windows are seconds (floats); `ttl=None` uses `default_ttl` (None = never expires), `ttl=0`
    never expires.
    """

    def __init__(
        self,
        store: Store | str = "memory://",
        *,
        namespace: str = "",
        serializer: str = "msgpack",
        compressor: str = "lz4",
        compress_threshold: int = DEFAULT_THRESHOLD,
        max_value_size: int = DEFAULT_MAX_SIZE,
        default_ttl: float | None = None,
        default_stale: float = 0.0,
        lock_ttl: float = DEFAULT_LOCK_TTL,
        pickle: bool = False,
        signing_secret: Secret | None = None,
        signing_fallbacks: Sequence[Secret] = (),
        _shared: _Shared | None = None,
        _signer: Signer | None = None,
    ) -> None:
        if _signer is None and signing_secret is not None:
            _signer = Signer(signing_secret, signing_fallbacks)
        if pickle and _signer is None:
            raise ValueError(
                "pickle=True needs signing_secret=<the application's secret>: pickles are signed with it and only"
                " pickles it signed are unpickled (spec/FORMAT.md §2)"
            )
        if _shared is None:
            _shared = _Shared(open_store(store) if isinstance(store, str) else store)
        self._shared = _shared
        self.namespace = namespace
        self.serializer = serializer
        self.compressor = compressor
        self.compress_threshold = compress_threshold
        self.max_value_size = max_value_size
        self.default_ttl = default_ttl
        self.default_stale = default_stale
        self.lock_ttl = lock_ttl
        self.pickle = pickle
        self._signer = _signer

    # -------------------------------------------------------------------------------------------- handles

    @property
    def store(self) -> Store:
        return self._shared.store

    def with_namespace(self, namespace: str) -> Cache:
        """The same cache (store, coalescing, counters) under a nested namespace `outer:inner`."""
        full = f"{self.namespace}:{namespace}" if self.namespace else namespace
        return Cache(
            namespace=full,
            serializer=self.serializer,
            compressor=self.compressor,
            compress_threshold=self.compress_threshold,
            max_value_size=self.max_value_size,
            default_ttl=self.default_ttl,
            default_stale=self.default_stale,
            lock_ttl=self.lock_ttl,
            pickle=self.pickle,
            _shared=self._shared,
            _signer=self._signer,
        )

    def stats(self) -> CacheStats:
        return self._shared.stats.snapshot()

    def computing(self) -> int:
        """How many keys this process is computing right now."""
        return len(self._shared.inflight)

    def store_key(self, key: str) -> str:
        """The key the store sees for `key` in this cache's namespace (spec/FORMAT.md §5.1, §5.2)."""
        return namespaced_key(self.namespace, key)

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------------------------------------ encoding

    def _payload(self, value: Any) -> tuple[str, bytes]:
        if self.serializer != "msgpack" or not self.pickle or self._signer is None:
            try:
                return self.serializer, serialize(self.serializer, value)
            except TypeError as e:
                if self.serializer != "msgpack":
                    raise
                raise TypeError(
                    f"{e}: MessagePack cannot hold a {type(value).__name__}; Python objects are stored as signed"
                    " pickles only with pickle=True and signing_secret=<the application's secret>"
                    " (larder.Cache(..., pickle=True, signing_secret=...); Django: SECRET_KEY, or"
                    " OPTIONS['signing_secret'])"
                ) from None
        if _plain(value, 0):
            try:
                return "msgpack", bytes(msgpack.packb(value, use_bin_type=True))
            except (OverflowError, ValueError, TypeError):
                pass
        data = self._signer.sign(PICKLE_EXT, pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
        return "msgpack", bytes(msgpack.packb(msgpack.ExtType(PICKLE_EXT, data)))

    def encode(
        self,
        value: Any,
        *,
        ttl: float | None = None,
        stale: float | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
    ) -> tuple[bytes, float | None]:
        """The entry bytes for `value`, and the store-side TTL matching its hard expiry."""
        ttl = self.default_ttl if ttl is None else ttl
        if ttl is not None and ttl <= 0:
            ttl = None
        stale_s = self.default_stale if stale is None else stale
        serializer, payload = self._payload(value)
        now = now_ms()
        ttl_ms = 0 if ttl is None else max(1, round(ttl * 1000))
        stale_ms = round(stale_s * 1000) if ttl is not None else 0
        data = _build(
            "value",
            serializer,
            payload,
            compressor=self.compressor,
            threshold=self.compress_threshold,
            level=None,
            created_at=now,
            ttl_ms=ttl_ms,
            expires_at=None,
            stale_ms=stale_ms,
            version=version,
            tags=tuple(tags),
        )
        return data, None if ttl is None else ttl + stale_s

    def _decode(self, data: bytes, version: str | None) -> _Lookup:
        try:
            entry = decode(data, max_size=self.max_value_size)
        except InvalidEntry:
            # memcached pads a counter that shrank in place with trailing spaces ("11" - 2 reads "9 ").
            counter = parse_counter(bytes(data).rstrip(b" "))
            if counter is not None and version is None:
                return _Lookup("fresh", counter)
            self._shared.stats.bump("corrupt_entries")
            return MISS
        if entry.kind != "value":
            self._shared.stats.bump("corrupt_entries")
            return MISS
        if version is not None and entry.version != version:
            return MISS
        now = now_ms()
        fresh = entry.expires_at == 0 or now < entry.expires_at
        hard = entry.hard_expiry
        if not fresh and not (hard is not None and now < hard):
            return MISS
        value = entry.value
        if isinstance(value, msgpack.ExtType) and value.code == PICKLE_EXT:
            value = self._unpickle(value.data)
            if value is _MISSING:
                return MISS
        return _Lookup("fresh" if fresh else "stale", value)

    def _unpickle(self, data: bytes) -> Any:
        """The object a signed pickle holds; `_MISSING` (a miss, counted) when this cache does not unpickle, the
        data is not signed by this application (logged once per reason), or the pickle fails."""
        stats = self._shared.stats
        if not self.pickle or self._signer is None:
            stats.bump("corrupt_entries")
            log_refusal(Refused("no_secret", "pickling is off (pickle=True and a signing_secret turn it on)"))
            return _MISSING
        try:
            payload = self._signer.verify(PICKLE_EXT, data)
        except Refused as refused:
            stats.bump("refused_pickles")
            log_refusal(refused)
            return _MISSING
        try:
            return pickle.loads(payload)  # signed by this application's secret: its own bytes
        except Exception:
            stats.bump("corrupt_entries")
            return _MISSING

    # ----------------------------------------------------------------------------------- absorbed reads

    def _get_raw(self, store_key: str) -> bytes | None:
        try:
            return self.store.get(store_key)
        except StoreError:
            self._shared.stats.bump("store_errors")
            return None

    def _lookup(self, store_key: str, version: str | None) -> _Lookup:
        raw = self._get_raw(store_key)
        found = MISS if raw is None else self._decode(raw, version)
        self._shared.stats.bump("hits" if found.state == "fresh" else "misses")
        return found

    # ------------------------------------------------------------------------------------------ the verbs

    def get(self, key: str, default: Any = None, *, version: str | None = None) -> Any:
        """The fresh value for `key` (of `version`, if given), else `default`. A store failure reads as a miss."""
        found = self._lookup(self.store_key(key), version)
        return found.value if found.state == "fresh" else default

    def get_many(self, keys: Iterable[str], *, version: str | None = None) -> dict[str, Any]:
        """The fresh values among `keys`, in one store request."""
        keys = list(keys)
        if not keys:
            return {}
        try:
            raws = self.store.get_many([self.store_key(k) for k in keys])
        except StoreError:
            self._shared.stats.bump("store_errors")
            raws = [None] * len(keys)
        found: dict[str, Any] = {}
        for key, raw in zip(keys, raws, strict=True):
            lookup = MISS if raw is None else self._decode(raw, version)
            self._shared.stats.bump("hits" if lookup.state == "fresh" else "misses")
            if lookup.state == "fresh":
                found[key] = lookup.value
        return found

    def exists(self, key: str, *, version: str | None = None) -> bool:
        return self.get(key, _MISSING, version=version) is not _MISSING

    def set(
        self,
        key: str,
        value: Any,
        ttl: float | None = None,
        *,
        stale: float | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        """Stores `value`; raises `StoreError` (naming the server) if the store fails."""
        data, store_ttl = self.encode(value, ttl=ttl, stale=stale, version=version, tags=tags)
        self.store.set(self.store_key(key), data, store_ttl)

    def set_many(
        self,
        items: Mapping[str, Any],
        ttl: float | None = None,
        *,
        stale: float | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        """Stores several values with the same options, in as few store requests as the store allows."""
        batch = []
        store_ttl: float | None = None
        for key, value in items.items():
            data, store_ttl = self.encode(value, ttl=ttl, stale=stale, version=version, tags=tags)
            batch.append((self.store_key(key), data))
        if batch:
            self.store.set_many(batch, store_ttl)

    def add(
        self,
        key: str,
        value: Any,
        ttl: float | None = None,
        *,
        stale: float | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
    ) -> bool:
        """Stores `value` only if `key` holds nothing; True if it stored."""
        data, store_ttl = self.encode(value, ttl=ttl, stale=stale, version=version, tags=tags)
        return self.store.add(self.store_key(key), data, store_ttl)

    def delete(self, key: str) -> bool:
        return self.store.delete(self.store_key(key))

    def delete_many(self, keys: Iterable[str]) -> int:
        return self.store.delete_many([self.store_key(k) for k in keys])

    def incr(self, key: str, delta: int = 1, *, ttl: float | None = None, create: bool = True) -> int | None:
        """Adds `delta` to the counter at `key` (created holding `delta` when missing and `create`); the new
        value, or None when missing and not `create`. Raises `NotACounter` for a value that is not a counter."""
        return self.store.incr(self.store_key(key), delta, ttl, create)

    def decr(self, key: str, delta: int = 1, *, ttl: float | None = None, create: bool = True) -> int | None:
        return self.incr(key, -delta, ttl=ttl, create=create)

    def purge(self, *, tag: str | None = None, prefix: str | None = None) -> int | None:
        """Removes every entry tagged `tag`, or whose key (in this namespace) starts with `prefix`; how many, or
        None on a store that records purges instead of counting (memcached, spec/STORES.md §4.4). A prefix that
        is not a safe key prefix (a space, a control byte, over 250 bytes) is the store's `InvalidKey`."""
        if (tag is None) == (prefix is None):
            raise ValueError("give exactly one of tag= or prefix=")
        if tag is not None:
            return self.store.purge_tag(tag)
        assert prefix is not None
        full = f"{self.namespace}:{prefix}" if self.namespace else prefix
        return self.store.purge_prefix(full)

    def clear(self) -> None:
        """Removes everything in this namespace (the whole store without one)."""
        if self.namespace:
            self.store.purge_prefix(self.namespace + ":")
        else:
            self.store.clear()

    # ------------------------------------------------------------------------------------------------ fetch

    def fetch(
        self,
        key: str,
        loader: Callable[[], T],
        ttl: float | None = None,
        *,
        stale: float | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
    ) -> T:
        """The value for `key`; on a miss `loader()` computes it (once per process, however many threads ask) and
        it is stored. Within the stale window one caller recomputes while the others get the stale value. The
        loader's exception reaches every waiting caller and nothing is cached; store failures are absorbed."""
        store_key = self.store_key(key)
        inflight = self._shared.inflight
        found = self._lookup(store_key, version)
        if found.state == "fresh":
            return found.value  # type: ignore[no-any-return]
        if found.state == "stale":
            flight = inflight.try_lead(store_key)
            if flight is None:  # another thread of this process refreshes it
                self._shared.stats.bump("stale_served")
                return found.value  # type: ignore[no-any-return]
        else:
            lead, flight = inflight.join_or_lead(store_key)
            if not lead:
                self._shared.stats.bump("coalesced_waits")
                flight.done.wait()
                if flight.error is not None:
                    raise flight.error
                return flight.value  # type: ignore[no-any-return]
        return self._lead(store_key, flight, found, loader, ttl, stale, version, tags)

    def _lead(
        self,
        store_key: str,
        flight: _Flight,
        found: _Lookup,
        loader: Callable[[], T],
        ttl: float | None,
        stale: float | None,
        version: str | None,
        tags: Sequence[str],
    ) -> T:
        """Leads this process's callers of `store_key` through the one lock policy (spec/STORES.md §3). Holding the
        lock, it reads the key once more (a holder that released just before may have written it), else loads and
        stores. When another process holds it: a refresh serves `found`'s stale value; a cold miss waits for that
        process's value, and when the lock goes without one tries to take it again, so that one waiter loads, not
        all; after `lock_ttl` of waiting it loads without the lock. The waiting threads get what this gets (or its
        exception, whatever raised it), and the lock is released however this ends."""
        inflight = self._shared.inflight
        lock: tuple[str, bytes] | bool = True
        waited_since: float | None = None
        try:
            while True:
                lock = self._try_lock(store_key)
                if isinstance(lock, tuple):
                    value = self._peek(store_key, version)
                    if value is not _MISSING:
                        self._shared.stats.bump("coalesced_across_processes")
                        inflight.finish(store_key, flight, value)
                        return value  # type: ignore[no-any-return]
                if lock is not False:
                    break
                if found.state == "stale":
                    self._shared.stats.bump("stale_served")
                    inflight.finish(store_key, flight, found.value)
                    return found.value  # type: ignore[no-any-return]
                if waited_since is None:
                    waited_since = time.monotonic()
                value = self._await_other_process(store_key, version, waited_since + self.lock_ttl)
                if value is WAITED_LOCK_TTL:
                    break
                if value is not LOCK_GONE:
                    self._shared.stats.bump("coalesced_across_processes")
                    inflight.finish(store_key, flight, value)
                    return value  # type: ignore[no-any-return]
            self._shared.stats.bump("loads")
            loaded = loader()
            self._store_quietly(store_key, loaded, ttl, stale, version, tags)
            inflight.finish(store_key, flight, loaded)
            return loaded
        except BaseException as error:  # the loader's, or an interrupt: the waiting threads hear of it
            inflight.finish(store_key, flight, error=error)
            raise
        finally:
            if isinstance(lock, tuple):
                self._unlock(*lock)

    def _store_quietly(
        self,
        store_key: str,
        value: Any,
        ttl: float | None,
        stale: float | None,
        version: str | None,
        tags: Sequence[str],
    ) -> None:
        """Stores a computed value: an unencodable value is the caller's error, a failing store is absorbed."""
        data, store_ttl = self.encode(value, ttl=ttl, stale=stale, version=version, tags=tags)
        try:
            self.store.set(store_key, data, store_ttl)
        except StoreError:
            self._shared.stats.bump("store_errors")

    # ------------------------------------------------------------------------------------------------ locks

    def _try_lock(self, store_key: str) -> tuple[str, bytes] | bool:
        """(lock key, token) when taken; False when another process holds it; True when the store did not answer
        (go ahead without a lock: a lock is an optimisation, never a reason to fail)."""
        key = lock_key("", store_key)
        token = secrets.token_hex(8).encode()
        try:
            if self.store.add(key, token, self.lock_ttl):
                return key, token
            return False
        except StoreError:
            self._shared.stats.bump("store_errors")
            return True

    def _peek(self, store_key: str, version: str | None) -> Any:
        """The fresh value under `store_key`, or `_MISSING`, without counting a hit or a miss."""
        raw = self._get_raw(store_key)
        found = MISS if raw is None else self._decode(raw, version)
        return found.value if found.state == "fresh" else _MISSING

    def _locked(self, store_key: str) -> bool:
        """Whether the store lock of `store_key` is held (a store that does not answer: not held)."""
        return self._get_raw(lock_key("", store_key)) is not None

    def _await_other_process(self, store_key: str, version: str | None, deadline: float) -> Any:
        """The value another process computes under the lock: the store polled after 5 ms, each pause doubling up to
        50 ms; `LOCK_GONE` when the lock goes away without a value, `WAITED_LOCK_TTL` once `deadline` (monotonic)
        has passed."""
        pause = LOCK_POLL_FIRST
        while True:
            time.sleep(pause)
            pause = min(pause * 2, LOCK_POLL_MOST)
            value = self._peek(store_key, version)
            if value is not _MISSING:
                return value
            if time.monotonic() >= deadline:
                return WAITED_LOCK_TTL
            if not self._locked(store_key):
                return LOCK_GONE

    def _unlock(self, key: str, token: bytes) -> None:
        try:
            self.store.delete_if(key, token)
        except StoreError:
            self._shared.stats.bump("store_errors")


def _plain(value: Any, depth: int) -> bool:
    """Whether MessagePack round-trips `value` exactly: None, bool, int, float, str, bytes, and lists and dicts
    (str keys) of those, at most `MAX_NESTING` deep. Tuples, sets and other objects are not."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return True
    if depth >= 100:
        return False
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


__all__ = ["PICKLE_EXT", "Cache", "CacheStats"]
