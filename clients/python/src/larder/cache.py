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
- When the store fails (spec/STORES.md §3): the callers of one key in this process share one load and get its
  value in memory, whatever the store does; and the *outage memory* (`outage_memory`, default 16M) keeps what
  was written while the store failed (a server failure: `ServerError`) and answers the reads the store fails,
  until the store's first good answer once no failure has been seen for a second drops it all (nothing is written
  back).
- Counters (`incr`/`decr`) are the stores' ASCII decimal counters, shared with every language; `get` reads them as
  ints.

Values are MessagePack by default. With `pickle=True` and a `signing_secret` (the Django backend's choice, with
Django's SECRET_KEY), a value MessagePack cannot hold exactly (a tuple, a set, a datetime, a model instance…) is
stored as a MessagePack ext of type 80 holding its pickle, signed with the secret (signing.py, spec/FORMAT.md §2):
still a valid larder entry, which other languages decode as an opaque extension value and never misread. A pickle
is unpickled only when its signature is this application's; anything else at ext 80 is a miss.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import secrets
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from time import time_ns
from typing import Any, Final, TypeVar

import msgpack
from msgpack import ExtType as _ExtType
from msgpack import unpackb

from .compressors import DEFAULT_MAX_SIZE
from .entry import (
    DEFAULT_THRESHOLD,
    _as_bytes,
    _build,
    _check_max_size,
    build_plain,
    build_plain_msgpack,
    lz4_plain,
    payload_of,
    plain_head,
)
from .errors import InvalidEntry
from .header import COMPRESSORS, FIXED_HEADER_LEN, FORMAT_VERSION, MAGIC, SERIALIZERS, U64_MAX, parse_header
from .keys import namespaced_key, safe_key
from .plain import pack_plain
from .plain_read import NOT_READ, unpack_container
from .serializers import deserialize, msgpack_value, pack_msgpack, serialize
from .signing import Refused, Secret, Signer, log_refusal
from .stores import ServerError, Store, StoreError, open_store
from .stores.base import lock_key, parse_counter
from .stores.memory import MemoryStore, Parts, joined
from .stores.url import parse_size

T = TypeVar("T")

#: The MessagePack extension type that holds a Python pickle (Python-only values; see the module's doc).
PICKLE_EXT: Final = 80
#: How long a recompute lock lives if its holder dies.
DEFAULT_LOCK_TTL: Final = 10.0
#: Polling for a value another process computes under the lock: the first pause, and the longest (spec/STORES.md §3).
LOCK_POLL_FIRST: Final = 0.005
LOCK_POLL_MOST: Final = 0.05

_MISSING: Final = object()
#: The plain scalars (exact types: not a subclass, not a container; plain.py).
_SCALARS: Final = frozenset({type(None), bool, int, float, str, bytes})
#: The scalars MessagePack packs into at most 9 bytes.
_NUMBERS: Final = frozenset({type(None), bool, int, float})
#: The fixed fields of a header: magic, format, kind, serializer, compressor, flags, created_at, expires_at.
_FIXED_HEADER: Final = struct.Struct("<2sBBBBBQQ")
_SERIALIZERS: Final = len(SERIALIZERS)
_COMPRESSORS: Final = len(COMPRESSORS)
#: What a note weighs in the memory store beyond an immutable value it keeps: the tuple and its fields.
_NOTE_WEIGHT: Final = 120
#: The shortest str (characters) or bytes whose LZ4 attempt is made on the entry in place (`entry.lz4_plain`):
#: below it, the saved copy costs less than the view (bench/RESULTS.md, third pass).
_LZ4_IN_PLACE: Final = 8192
#: An uncompressed payload shorter than this is copied out of its entry; a longer one is read in place (entry.py).
_SMALL_PAYLOAD: Final = 4096
#: What waiting for another process's value can end in, besides the value (spec/STORES.md §3, step 4).
LOCK_GONE: Final = object()
WAITED_LOCK_TTL: Final = object()
#: The outage memory's size unless a cache is given one (spec/STORES.md §3 "When the store fails").
DEFAULT_OUTAGE_MEMORY: Final = "16M"

#: How long, in seconds, the store must go without a failure before a good answer empties the outage memory
#: (spec/STORES.md §3 rule 4): with several servers, the others answer while one fails.
OUTAGE_QUIET: Final = 1.0


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


#: What a read finds: its state ("fresh", "stale" or "miss") and the value (None on a miss). A plain tuple: a hit
#: makes one, and a class of its own costs more than the rest of a hit in memory.
_Lookup = tuple[str, Any]


MISS: Final[_Lookup] = ("miss", None)


class _Outage:
    """A cache's *outage memory* (spec/STORES.md §3 "When the store fails"): a bounded memory store (larder's own,
    `MemoryStore`) holding only values whose write to the store failed with a server failure (no connection, a
    timeout, a broken or malformed reply, a request refused at once while the server is ejected: `ServerError`;
    never `invalid_key`, `too_large` or `not_a_counter`), kept with the expiry the store would have given them. A
    read the store fails is answered from it; deletes and purges apply to it; the first good answer from the store
    once no failure has been seen for `OUTAGE_QUIET` (a second) empties it (with several servers, a memcached pool
    losing one or a Redis Cluster failing a master over, the others answer while one fails, and their answers must
    not drop what the failing one's keys need), and nothing in it is ever written back (other processes may have
    written newer values meanwhile, and a purge sent during the outage may have been lost).

    `failing` says the store failed since the good answer that last emptied the memory: the one thing a good answer
    checks (an attribute read), so a hit pays nothing more while the store is well. `failed_at` is when the last
    failure was seen (`clock`, monotonic seconds; replaceable in tests). A failure records `failed_at` first and
    sets `failing` last, and a writer keeps its value in between, so a good answer that comes meanwhile finds the
    failure too recent and leaves the memory alone."""

    __slots__ = ("clock", "failed_at", "failing", "memory")

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.memory = MemoryStore(capacity) if capacity > 0 else None
        self.clock = clock
        self.failed_at = float("-inf")
        self.failing = False

    def failed(self) -> None:
        """The store failed (a server failure): the outage memory stays until a second passes without another."""
        self.failed_at = self.clock()
        self.failing = True

    def answered(self) -> None:
        """The store gave a good answer, while `failing`: the outage is over, and what was kept for it goes, once no
        failure has been seen for `OUTAGE_QUIET`; until then it stays (another server may still be failing)."""
        failed_at = self.failed_at
        if self.clock() - failed_at < OUTAGE_QUIET:
            return
        self.failing = False
        if self.failed_at != failed_at:  # a failure came meanwhile (another thread): still failing
            self.failing = True
            return
        memory = self.memory
        if memory is not None and len(memory):
            memory.clear()

    def keep(self, error: StoreError, store_key: str, data: bytes, ttl: float | None, add: bool = False) -> None:
        """After a write of `data` under `store_key` failed with `error`: kept when the store failed (a server
        failure), with the expiry the store would have given it (`ttl`, and the entry's own hard expiry)."""
        if not isinstance(error, ServerError):
            return
        self.failed_at = self.clock()
        memory = self.memory
        if memory is not None:
            try:
                if add:
                    memory.add(store_key, data, ttl)
                else:
                    memory.set(store_key, data, ttl)
            except StoreError:  # a value larger than the outage memory takes: not kept, and no older one either
                with contextlib.suppress(StoreError):
                    memory.delete(store_key)
        self.failed()

    def read(self, error: StoreError, store_key: str) -> bytes | None:
        """What a read the store failed with `error` answers: the value kept for `store_key`, if the store failed."""
        if not isinstance(error, ServerError):
            return None
        self.failed()
        memory = self.memory
        if memory is None or not len(memory):
            return None
        try:
            return memory.get(store_key)
        except StoreError:
            return None

    def forget(self, action: Callable[[MemoryStore], object]) -> None:
        """A delete or a purge, applied to what is kept too."""
        memory = self.memory
        if memory is not None and len(memory):
            with contextlib.suppress(StoreError):  # (a prefix or key the store refuses too: its own call says so)
                action(memory)


def _outage_capacity(size: int | str) -> int:
    """The outage memory's size in bytes: a number of bytes, or a size as store URLs write them (`16M`)."""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f"outage_memory is a size (bytes, or text such as '16M'), not {size!r}")
    if isinstance(size, str):
        try:
            return parse_size(size)
        except ValueError as e:
            raise ValueError(f"outage_memory: {e}") from None
    if size < 0:
        raise ValueError(f"outage_memory cannot be negative: {size!r}")
    return size


class _Shared:
    """What a cache and its namespaced views share."""

    def __init__(self, store: Store, outage_memory: int | str = DEFAULT_OUTAGE_MEMORY) -> None:
        self.store = store
        self.inflight = _InFlight()
        self.stats = CacheStats()
        #: The store, when it is larder's own memory store: reads there leave notes of what they decoded (`_note`).
        self.memory = store if type(store) is MemoryStore else None
        #: What was loaded while the store failed; none over larder's memory store, which cannot fail so.
        self.outage = _Outage(0 if self.memory is not None else _outage_capacity(outage_memory))


class Cache:
    """A cache over a store (a `Store`, or a store URL such as `"memcached://127.0.0.1:11211"`). Thread-safe.

    TTLs and stale windows are seconds (floats); `ttl=None` uses `default_ttl` (None = never expires), `ttl=0`
    never expires.

    `outage_memory` (a size: bytes, or `"16M"` as store URLs write sizes; 0 turns it off) bounds the outage memory
    (spec/STORES.md §3 "When the store fails"): what `fetch` loaded, or `set` wrote, while the store failed is kept
    in the process's memory and answers the reads the store fails, until the store answers again (then it is
    dropped, never written back). None over larder's memory store, which cannot fail so.
    """

    def __init__(
        self,
        store: Store | str = "memory://",
        *,
        namespace: str = "",
        serializer: str = "msgpack",
        compressor: str | None = None,
        compress_threshold: int = DEFAULT_THRESHOLD,
        max_value_size: int = DEFAULT_MAX_SIZE,
        default_ttl: float | None = None,
        default_stale: float = 0.0,
        lock_ttl: float = DEFAULT_LOCK_TTL,
        pickle: bool = False,
        signing_secret: Secret | None = None,
        signing_fallbacks: Sequence[Secret] = (),
        outage_memory: int | str = DEFAULT_OUTAGE_MEMORY,
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
            _shared = _Shared(open_store(store) if isinstance(store, str) else store, outage_memory)
        self._shared = _shared
        self.namespace = namespace
        self.serializer = serializer
        if compressor is None:
            # lz4 (spec/FORMAT.md §3), but not on larder's memory store, whose bytes never leave the process
            # (spec/STORES.md §8): there it would cost more than it saves, as for Django's LocMemCache.
            compressor = "none" if _shared.memory is not None else "lz4"
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
                packed = pack_plain(value) if self.serializer == "msgpack" else None
                return self.serializer, serialize(self.serializer, value) if packed is None else packed
            except TypeError as e:
                if self.serializer != "msgpack":
                    raise
                raise TypeError(
                    f"{e}: MessagePack cannot hold a {type(value).__name__}; Python objects are stored as signed"
                    " pickles only with pickle=True and signing_secret=<the application's secret>"
                    " (larder.Cache(..., pickle=True, signing_secret=...); Django: SECRET_KEY, or"
                    " OPTIONS['signing_secret'])"
                ) from None
        packed = pack_plain(value)
        if packed is not None:
            return "msgpack", packed
        data = self._signer.sign(PICKLE_EXT, pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
        return "msgpack", pack_msgpack(msgpack.ExtType(PICKLE_EXT, data))

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
        return self._encode(value, ttl, stale, version, tags)

    def _encode(
        self, value: Any, ttl: float | None, stale: float | None, version: str | None, tags: Sequence[str]
    ) -> tuple[bytes, float | None]:
        if ttl is None:
            ttl = self.default_ttl
        if ttl is not None and ttl <= 0:
            ttl = None
        stale_s = self.default_stale if stale is None else stale
        if type(value) in _SCALARS and self.serializer == "msgpack":
            try:  # a plain scalar, as _payload packs it (which raises, or pickles, what fails here)
                serializer, payload = "msgpack", pack_msgpack(value)
            except (OverflowError, ValueError, TypeError):
                serializer, payload = self._payload(value)
        else:
            serializer, payload = self._payload(value)
        now = time_ns() // 1_000_000
        if ttl is None:
            ttl_ms = stale_ms = 0
        else:
            ttl_ms = round(ttl * 1000) or 1
            stale_ms = round(stale_s * 1000)
        if not stale_ms and version is None and type(tags) in (tuple, list) and not tags:
            data = build_plain(serializer, payload, self.compressor, self.compress_threshold, now, ttl_ms)
            return data, None if ttl is None else ttl + stale_s
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

    def _plain_entry(self, value: Any, now: int, expires_at: int) -> bytes | None:
        """What `_encode(value, ttl, None, None, ())` returns as its entry, created `now` and expiring at `expires_at`
        (0 = never; `Cache.set` computes both), for the common write: MessagePack of a value it holds as it is
        (plain.py) and no stale window. None where that would fail, which `_encode` then says."""
        if self.serializer != "msgpack":
            return None
        kind = type(value)
        compressor = self.compressor
        if kind is str or kind is bytes or kind in _NUMBERS:
            if compressor == "none":
                return build_plain_msgpack(value, now, expires_at)
            threshold = self.compress_threshold
            if (
                compressor == "lz4"
                and (kind is str or kind is bytes)
                and len(value) >= _LZ4_IN_PLACE
                and type(threshold) is int
                and threshold >= 0
            ):
                # a large str or bytes: its UTF-8 joined behind the header, then the LZ4 attempt on that payload in
                # place (two copies of the value where packing it first makes three)
                data = build_plain_msgpack(value, now, expires_at)
                return None if data is None else lz4_plain(data, threshold)
            try:
                payload = pack_msgpack(value)
            except (OverflowError, ValueError, TypeError):
                return None
        else:
            packed = pack_plain(value)  # a list or dict of plain values, in one native pass; else None
            if packed is None:
                return None
            payload = packed
        return build_plain(
            "msgpack", payload, compressor, self.compress_threshold, now, expires_at - now if expires_at else 0
        )

    def _put_parts(self, memory: MemoryStore, store_key: str, value: str | bytes, now: int, expires_at: int) -> bool:
        """The common write of an ASCII str or of bytes to larder's memory store, uncompressed MessagePack: the
        entry's head and the value itself go to the store unjoined (`MemoryStore.put_parts`; the bytes it gives out
        are those `_plain_entry` builds), with the note a read would leave (`_note`), so the value is not copied at
        all (an ASCII str is its own UTF-8) where joining copies it twice. (A str of other characters is encoded
        and joined: its UTF-8 would be a copy to hold beside it, and what the str weighs costs more to learn
        (`sys.getsizeof`, 0.3 µs) than a join of a small one.) False, and nothing written, for a value the store
        would rather take joined (near its largest) or of 4 GiB or more: `_plain_entry`'s way writes it or says
        why not."""
        head = plain_head(type(value) is str, len(value), now, expires_at)
        if head is None:
            return False
        note = (len(head) - FIXED_HEADER_LEN + len(value), value, expires_at, 0, None, None, None)
        return memory.put_parts(store_key, head, value, expires_at or None, note)

    def _decode(self, data: bytes, version: str | None, noting: str | None = None) -> _Lookup:
        """What a read makes of the bytes a store returned: header, payload and value are decoded whatever the
        entry's expiry (so a corrupt entry is counted as one, fresh or not), then its kind, version and expiry
        decide. Everything the hit needs, without building an `Entry`. `noting`: the key under which the memory
        store holds `data`, to leave it a note of what was decoded (`_note`)."""
        max_size = self.max_value_size
        if type(max_size) is not int or max_size < 0:
            _check_max_size(max_size)
        try:
            if type(data) is not bytes:
                data = _as_bytes(data)
            try:  # the common header (a value, no optional field) at once; parse_header reads any other
                magic, fmt, kind, serializer, compressor, flags, _, expires_at = _FIXED_HEADER.unpack_from(data)
            except struct.error:
                flags = -1
            if (
                flags == 0
                and magic == MAGIC
                and fmt == FORMAT_VERSION
                and kind == 0
                and serializer < _SERIALIZERS
                and compressor < _COMPRESSORS
            ):
                stale_ms, entry_version, size = 0, None, FIXED_HEADER_LEN
            else:
                kind, serializer, compressor, _, expires_at, stale_ms, entry_version, _, size = parse_header(data)
            if kind:  # an HTTP response (the page cache's) is not a value, whatever its payload holds
                self._shared.stats.bump("corrupt_entries")
                return MISS
            value, payload_size = _payload_value(data, serializer, compressor, size, max_size)
        except InvalidEntry:
            # memcached pads a counter that shrank in place with trailing spaces ("11" - 2 reads "9 ").
            counter = parse_counter(bytes(data).rstrip(b" "))
            if counter is not None and version is None:
                return ("fresh", counter)
            self._shared.stats.bump("corrupt_entries")
            return MISS
        if noting is not None:
            self._note(
                noting, data, value, payload_size, expires_at, stale_ms, entry_version, serializer, compressor, size
            )
        return self._judge(value, expires_at, stale_ms, entry_version, version)

    def _judge(
        self, value: Any, expires_at: int, stale_ms: int, entry_version: str | None, version: str | None
    ) -> _Lookup:
        """A decoded value entry's verdict: a miss for another version or past its hard expiry, else fresh or
        stale; a pickle is unpickled here (a miss unless this application signed it)."""
        if version is not None and entry_version != version:
            return MISS
        fresh = True
        if expires_at:
            now = time_ns() // 1_000_000
            if now >= expires_at:
                if now >= min(expires_at + stale_ms, U64_MAX):
                    return MISS
                fresh = False
        if type(value) is msgpack.ExtType and value.code == PICKLE_EXT:
            value = self._unpickle(value.data)
            if value is _MISSING:
                return MISS
        return ("fresh" if fresh else "stale", value)

    def _note(
        self,
        key: str,
        data: bytes,
        value: Any,
        payload_size: int,
        expires_at: int,
        stale_ms: int,
        entry_version: str | None,
        serializer: int,
        compressor: int,
        size: int,
    ) -> None:
        """Leaves the memory store a note on the entry `data` under `key`: its header's fields, and the value itself
        when it is immutable (None, bool, int, float, str, bytes), so that the next read of the same bytes skips
        the header and, for such a value, the payload too. A container (or a pickle) is decoded again on each read:
        each caller gets its own copy, as LocMemCache's unpickling gives. The note depends on the bytes alone,
        and `payload_size` lets a cache with a smaller `max_value_size` refuse it as it would refuse the bytes."""
        memory = self._shared.memory
        if memory is None:
            return
        weight = _NOTE_WEIGHT
        payload: bytes | None = None
        decoder: Callable[[], Any] | None = None
        copier = _copier(value) if type(value) in (list, dict) else None
        if type(value) in _SCALARS:
            weight += sys.getsizeof(value)
        elif copier is not None:  # a small list or dict of plain values, copied faster than msgpack decodes it
            decoder, copy_weight = copier
            weight += copy_weight
        elif serializer == 1 and compressor == 0 and len(data) - size < _SMALL_PAYLOAD:
            payload = data[size:]  # its own copy, small: read with msgpack at each hit
            weight += sys.getsizeof(payload)
        else:  # (any payload size is within max_size: this one is payload_size)
            decoder = functools.partial(_payload_only, data, serializer, compressor, size, payload_size)
        kept = value if payload is None and decoder is None else None
        note = (payload_size, kept, expires_at, stale_ms, entry_version, payload, decoder)
        memory.note(key, data, note, weight)

    def _from_note(self, data: bytes | Parts, note: Any, version: str | None) -> _Lookup:
        """`_decode(data, version)` for bytes the memory store holds with a note of an earlier decode (`_note`):
        (payload size, value, expires_at, stale_ms, version, payload, decoder). A value decoded anew on every read
        is kept as its small msgpack payload or as a decoder to call, instead of the value itself."""
        _, value, expires_at, stale_ms, entry_version, payload, decoder = note
        if payload is not None or decoder is not None:
            try:
                value = _unpack(payload) if payload is not None else decoder()
            except Exception:  # msgpack refusing a map key a dict cannot hold: _decode's way reads it
                return self._decode(joined(data), version)
        return self._judge(value, expires_at, stale_ms, entry_version, version)

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
        """The store's bytes for `store_key`; a read the store fails is answered from the outage memory."""
        shared = self._shared
        try:
            raw = shared.store.get(store_key)
        except StoreError as error:
            shared.stats.bump("store_errors")
            return shared.outage.read(error, store_key)
        if shared.outage.failing:
            shared.outage.answered()
        return raw

    def _lookup(self, store_key: str, version: str | None) -> _Lookup:
        shared = self._shared
        memory = shared.memory
        if memory is None:
            try:
                raw = shared.store.get(store_key)
            except StoreError as error:
                shared.stats.bump("store_errors")
                raw = shared.outage.read(error, store_key)
            else:
                if shared.outage.failing:  # a good answer, a miss included: it may end the outage (spec/STORES.md §3)
                    shared.outage.answered()
            found = MISS if raw is None else self._decode(raw, version)
        else:
            try:
                record = memory.read_checked(store_key) if store_key else memory.read(store_key)
            except StoreError:
                shared.stats.bump("store_errors")
                record = None
            if record is None:
                found = MISS
            else:
                note = record[2]
                max_size = self.max_value_size
                if note is not None and type(max_size) is int and note[0] <= max_size:
                    # a note of an earlier decode of these bytes (_note): the common hit, answered here
                    _, value, expires_at, stale_ms, entry_version, payload, decoder = note
                    try:
                        if payload is not None:
                            value = _unpack(payload)
                        elif decoder is not None:
                            value = decoder()
                    except Exception:  # msgpack refusing a map key a dict cannot hold: _decode's way reads it
                        found = self._decode(joined(record[0]), version)
                    else:
                        if not stale_ms and version is None and type(value) is not _ExtType:
                            # No stale window: the entry's hard expiry is expires_at, and the store, which keeps no
                            # entry past its hard expiry, just found it live. So it is fresh.
                            found = ("fresh", value)
                        else:
                            found = self._judge(value, expires_at, stale_ms, entry_version, version)
                else:  # (the bytes joined from `Parts` are not what the store holds: they get no note)
                    found = self._decode(joined(record[0]), version, store_key)
        stats = shared.stats
        lock = stats._lock
        lock.acquire()  # (what it guards cannot raise: no `with` needed, and a hit is the cheaper without it)
        if found[0] == "fresh":
            stats.hits += 1
        else:
            stats.misses += 1
        lock.release()
        return found

    # ------------------------------------------------------------------------------------------ the verbs

    def get(self, key: str, default: Any = None, *, version: str | None = None) -> Any:
        """The fresh value for `key` (of `version`, if given), else `default`. A store failure reads as a miss."""
        state, value = self._lookup(safe_key(f"{self.namespace}:{key}" if self.namespace else key), version)
        return value if state == "fresh" else default

    def get_many(self, keys: Iterable[str], *, version: str | None = None) -> dict[str, Any]:
        """The fresh values among `keys`, in one store request."""
        keys = list(keys)
        if not keys:
            return {}
        store_keys = [self.store_key(k) for k in keys]
        memory = self._shared.memory
        found: dict[str, Any] = {}
        if memory is not None:
            try:
                records = memory.read_many(store_keys)
            except StoreError:
                self._shared.stats.bump("store_errors")
                records = [None] * len(keys)
            max_size = self.max_value_size
            for key, store_key, record in zip(keys, store_keys, records, strict=True):
                if record is not None:
                    held, _, note, _ = record
                    if note is not None and type(max_size) is int and note[0] <= max_size:
                        state, value = self._from_note(held, note, version)
                    else:
                        state, value = self._decode(joined(held), version, store_key)
                    if state == "fresh":
                        found[key] = value
        else:
            outage = self._shared.outage
            try:
                raws = self.store.get_many(store_keys)
            except StoreError as error:
                self._shared.stats.bump("store_errors")
                raws = [outage.read(error, store_key) for store_key in store_keys]
            else:
                if outage.failing:
                    outage.answered()
            decode = self._decode
            for key, raw in zip(keys, raws, strict=True):
                if raw is not None:
                    state, value = decode(raw, version)
                    if state == "fresh":
                        found[key] = value
        stats = self._shared.stats
        with stats._lock:
            stats.hits += len(found)
            stats.misses += len(keys) - len(found)
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
        if stale is None and version is None and type(tags) in (tuple, list) and not tags and not self.default_stale:
            # the common write: the entry's times once, here (`_plain_entry`, `_put_parts`)
            plain_ttl = self.default_ttl if ttl is None else ttl
            if plain_ttl is not None and plain_ttl <= 0:
                plain_ttl = None
            now = time_ns() // 1_000_000
            ttl_ms = 0 if plain_ttl is None else round(plain_ttl * 1000) or 1
            expires_at = now + ttl_ms if ttl_ms else 0
            if expires_at > U64_MAX:
                expires_at = U64_MAX
            store_key = safe_key(f"{self.namespace}:{key}" if self.namespace else key)
            memory = self._shared.memory
            if memory is not None and store_key:
                # larder's memory store, told the entry's hard expiry: it need not read the header back
                kind = type(value)
                if (
                    (kind is bytes or (kind is str and value.isascii()))
                    and self.compressor == "none"
                    and self.serializer == "msgpack"
                    and self._put_parts(memory, store_key, value, now, expires_at)
                ):
                    return
                data = self._plain_entry(value, now, expires_at)
                if data is not None:
                    memory.put(store_key, data, expires_at or None)
                    return
            else:
                data = self._plain_entry(value, now, expires_at)
                if data is not None:
                    self._write(store_key, data, plain_ttl)
                    return
        data, store_ttl = self._encode(value, ttl, stale, version, tags)
        self._write(safe_key(f"{self.namespace}:{key}" if self.namespace else key), data, store_ttl)

    def _write(self, store_key: str, data: bytes, store_ttl: float | None) -> None:
        """`store.set`, with the outage memory: a good answer may end an outage; a write the store fails is kept there
        (then raised)."""
        shared = self._shared
        try:
            shared.store.set(store_key, data, store_ttl)
        except StoreError as error:
            shared.outage.keep(error, store_key, data, store_ttl)
            raise
        if shared.outage.failing:
            shared.outage.answered()

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
            data, store_ttl = self._encode(value, ttl, stale, version, tags)
            batch.append((self.store_key(key), data))
        if batch:
            outage = self._shared.outage
            try:
                self.store.set_many(batch, store_ttl)
            except StoreError as error:
                for store_key, data in batch:
                    outage.keep(error, store_key, data, store_ttl)
                raise
            if outage.failing:
                outage.answered()

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
        data, store_ttl = self._encode(value, ttl, stale, version, tags)
        store_key = self.store_key(key)
        outage = self._shared.outage
        try:
            added = self.store.add(store_key, data, store_ttl)
        except StoreError as error:
            outage.keep(error, store_key, data, store_ttl, add=True)
            raise
        if outage.failing:
            outage.answered()
        return added

    def delete(self, key: str) -> bool:
        store_key = self.store_key(key)
        outage = self._shared.outage
        outage.forget(lambda memory: memory.delete(store_key))
        deleted = self.store.delete(store_key)
        if outage.failing:
            outage.answered()
        return deleted

    def delete_many(self, keys: Iterable[str]) -> int:
        store_keys = [self.store_key(k) for k in keys]
        outage = self._shared.outage
        outage.forget(lambda memory: memory.delete_many(store_keys))
        deleted = self.store.delete_many(store_keys)
        if outage.failing:
            outage.answered()
        return deleted

    def incr(self, key: str, delta: int = 1, *, ttl: float | None = None, create: bool = True) -> int | None:
        """Adds `delta` to the counter at `key` (created holding `delta` when missing and `create`); the new
        value, or None when missing and not `create`. Raises `NotACounter` for a value that is not a counter."""
        counted = self.store.incr(self.store_key(key), delta, ttl, create)
        if self._shared.outage.failing:
            self._shared.outage.answered()
        return counted

    def decr(self, key: str, delta: int = 1, *, ttl: float | None = None, create: bool = True) -> int | None:
        return self.incr(key, -delta, ttl=ttl, create=create)

    def purge(self, *, tag: str | None = None, prefix: str | None = None) -> int | None:
        """Removes every entry tagged `tag`, or whose key (in this namespace) starts with `prefix`; how many, or
        None on a store that records purges instead of counting (memcached, spec/STORES.md §4.4). A prefix that
        is not a safe key prefix (a space, a control byte, over 250 bytes) is the store's `InvalidKey`."""
        if (tag is None) == (prefix is None):
            raise ValueError("give exactly one of tag= or prefix=")
        outage = self._shared.outage
        if tag is not None:
            outage.forget(lambda memory: memory.purge_tag(tag))
            purged = self.store.purge_tag(tag)
        else:
            full = f"{self.namespace}:{prefix}" if self.namespace else str(prefix)
            outage.forget(lambda memory: memory.purge_prefix(full))
            purged = self.store.purge_prefix(full)
        if outage.failing:
            outage.answered()
        return purged

    def clear(self) -> None:
        """Removes everything in this namespace (the whole store without one)."""
        outage = self._shared.outage
        if self.namespace:
            prefix = self.namespace + ":"
            outage.forget(lambda memory: memory.purge_prefix(prefix))
            self.store.purge_prefix(prefix)
        else:
            outage.forget(lambda memory: memory.clear())
            self.store.clear()
        if outage.failing:
            outage.answered()

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
        store_key = safe_key(f"{self.namespace}:{key}" if self.namespace else key)
        found = self._lookup(store_key, version)
        inflight = self._shared.inflight
        if found[0] == "fresh":
            return found[1]  # type: ignore[no-any-return]
        if found[0] == "stale":
            flight = inflight.try_lead(store_key)
            if flight is None:  # another thread of this process refreshes it
                self._shared.stats.bump("stale_served")
                return found[1]  # type: ignore[no-any-return]
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
                elif lock is True:  # the store failed: what this process loaded meanwhile, if anything
                    value = self._outage_value(store_key, version)
                    if value is not _MISSING:
                        inflight.finish(store_key, flight, value)
                        return value  # type: ignore[no-any-return]
                if lock is not False:
                    break
                if found[0] == "stale":
                    self._shared.stats.bump("stale_served")
                    inflight.finish(store_key, flight, found[1])
                    return found[1]  # type: ignore[no-any-return]
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
        data, store_ttl = self._encode(value, ttl, stale, version, tags)
        shared = self._shared
        try:
            shared.store.set(store_key, data, store_ttl)
        except StoreError as error:
            shared.stats.bump("store_errors")
            shared.outage.keep(error, store_key, data, store_ttl)
        else:
            if shared.outage.failing:
                shared.outage.answered()

    # ------------------------------------------------------------------------------------------------ locks

    def _try_lock(self, store_key: str) -> tuple[str, bytes] | bool:
        """(lock key, token) when taken; False when another process holds it; True when the store did not answer
        (go ahead without a lock: a lock is an optimisation, never a reason to fail)."""
        key = lock_key("", store_key)
        token = secrets.token_hex(8).encode()
        shared = self._shared
        try:
            taken = shared.store.add(key, token, self.lock_ttl)
        except StoreError as error:
            shared.stats.bump("store_errors")
            if isinstance(error, ServerError):
                shared.outage.failed()
            return True
        if shared.outage.failing:
            shared.outage.answered()
        return (key, token) if taken else False

    def _peek(self, store_key: str, version: str | None) -> Any:
        """The fresh value under `store_key`, or `_MISSING`, without counting a hit or a miss."""
        raw = self._get_raw(store_key)
        found = MISS if raw is None else self._decode(raw, version)
        return found[1] if found[0] == "fresh" else _MISSING

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
        else:
            if self._shared.outage.failing:
                self._shared.outage.answered()

    def _outage_value(self, store_key: str, version: str | None) -> Any:
        """The fresh value the outage memory holds for `store_key`, else `_MISSING`: what a leader that could not
        take the lock (the store failing) checks before it loads, since a caller of this process may have loaded it
        (and kept it there) between this caller's read and its turn to lead."""
        memory = self._shared.outage.memory
        if memory is None or not len(memory):
            return _MISSING
        try:
            raw = memory.get(store_key)
        except StoreError:
            return _MISSING
        found = MISS if raw is None else self._decode(raw, version)
        return found[1] if found[0] == "fresh" else _MISSING


__all__ = ["PICKLE_EXT", "Cache", "CacheStats"]


def _payload_value(data: bytes, serializer: int, compressor: int, size: int, max_size: int) -> tuple[Any, int]:
    """The value in the payload of the entry `data` (its header `size` bytes long, its serializer and compressor
    given by their ids), and the payload's size decompressed. Raises `InvalidEntry`."""
    n = len(data) - size
    if compressor or n >= _SMALL_PAYLOAD or n > max_size:
        payload: bytes | memoryview = payload_of(data, compressor, size, max_size)
    else:
        payload = data[size:]
    if serializer == 1:
        try:
            value = _unpack(payload)
        except Exception:
            value = msgpack_value(payload)  # the same again, for its error or a map with array keys
    else:
        value = deserialize(SERIALIZERS[serializer], payload)
    return value, len(payload)


def _unpack(payload: bytes | memoryview) -> Any:
    """`msgpack.unpackb(payload, raw=False, strict_map_key=False)`: the same value, the same errors; an array or map
    read by ormsgpack where it gives the same (plain_read.py)."""
    value = unpack_container(payload)
    if value is NOT_READ:
        value = unpackb(payload, raw=False, strict_map_key=False)
    return value


def _payload_only(data: bytes, serializer: int, compressor: int, size: int, max_size: int) -> Any:
    return _payload_value(data, serializer, compressor, size, max_size)[0]


#: The most elements a container may hold, its nested ones included, for `_copier` to copy it.
_COPY_MOST: Final = 256


def _copier(value: Any) -> tuple[Callable[[], Any], int] | None:
    """For a list, or a dict, of plain values (None, bool, int, float, str, bytes), and of lists and dicts of plain
    values (one level down): a function that makes a new copy of it at each call (its containers new, the plain
    values, which cannot change, shared), and what the copy it keeps as a template weighs; else None. The template is
    a copy of its own, made before `value` reaches anyone."""
    count = len(value)
    nested: list[Any] = []
    children = value if type(value) is list else value.values()
    weight = sys.getsizeof(value)
    for child in children:
        kind = type(child)
        if kind in _SCALARS:
            weight += sys.getsizeof(child)
            continue
        if kind is list:
            inner = child
        elif kind is dict and type(value) is dict:
            inner = child.values()
        else:
            return None
        count += len(child)
        if count > _COPY_MOST or not all(type(item) in _SCALARS for item in inner):
            return None
        weight += sys.getsizeof(child) + sum(sys.getsizeof(item) for item in inner)
        nested.append(child)
    if count > _COPY_MOST:
        return None
    if type(value) is dict:
        template: Any = value.copy()
        keys = tuple(key for key, child in template.items() if type(child) in (list, dict))
        for key in keys:
            template[key] = template[key].copy()
        if keys:
            return functools.partial(_copy_dict, template, keys), weight
        return template.copy, weight
    if nested:
        return None  # (a list of lists: decoded again instead)
    return list(value).copy, weight


def _copy_dict(template: dict[Any, Any], keys: tuple[Any, ...]) -> dict[Any, Any]:
    copy = template.copy()
    for key in keys:
        copy[key] = copy[key].copy()
    return copy
