"""`memory://?capacity=256M&max_entries=N`: the process's own store (spec/STORES.md §8).

Bounded by bytes (keys + values + a fixed per-entry overhead) and optionally by a number of entries; the least
recently used entries are evicted first. One lock guards an `OrderedDict`: Python's GIL serialises the work anyway,
and a single lock keeps every operation (add, incr, delete_if) atomic. Not shared between processes. Purges are
exact. The largest entry is 1/16 of the capacity, as in the Rust memory store.

Notes: a reader (`larder.Cache`) may leave a note on an entry it decoded (`note`), which `read` hands back with the
bytes, so the next read of the same bytes skips decoding them (the cache keeps an immutable value itself, and for a
container only what spares it the header). A note belongs to the bytes it was made from: a write, a delete or an
eviction drops it with them. Notes weigh in the capacity: one is left only where it fits without evicting anything,
and all go before any entry does when a write needs room, so they never cost an entry its place.

Parts: the common write of an ASCII str or of bytes (`put_parts`, from `larder.Cache`) is held as its entry's head
(header and MessagePack head) and the value itself, not joined: such a write does not copy the value, where a joined
entry copies it twice (UTF-8, then the join). Every way out of the store as bytes (`get`, `get_many`, `incr`,
`delete_if`) gives the entry's exact bytes, joined once and then held joined; a `larder.Cache` reads the value from
the note the write left, which the store never drops (it is the value held, not a copy).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from time import time_ns
from typing import Any, Final

from .base import (
    NotACounter,
    Store,
    StoreStats,
    TooLarge,
    check_key,
    check_keys,
    check_prefix,
    check_tag,
    entry_tags,
    expires_at_ms,
    now_ms,
    parse_counter,
    saturate,
)
from .url import StoreUrl

#: Bytes counted per entry beyond its key and value (the dict slot, the tuple, the bytes objects' headers).
ENTRY_OVERHEAD: Final = 96
DEFAULT_CAPACITY: Final = 256 << 20

#: Bytes counted for an entry held as `Parts` beyond its entry's length: the parts tuple, the head's bytes object
#: and the note tuple, less the one bytes object a joined entry would be.
PARTS_OVERHEAD: Final = 200

#: An entry held in two parts (`put_parts`): its head (the header and MessagePack's str or bin head) and its body,
#: the value's bytes or an ASCII str (one byte per character: its own UTF-8). A tuple: a write makes one, and a
#: class costs more to make.
Parts = tuple[bytes, str | bytes]


def joined(value: bytes | Parts) -> bytes:
    """The entry's bytes, exactly as if it had been written joined (`value` itself when it is bytes)."""
    if isinstance(value, bytes):
        return value
    head, body = value
    return head + (body.encode() if isinstance(body, str) else body)


def _held(value: bytes | Parts) -> int:
    """What an entry counts for in the store beyond its key and `ENTRY_OVERHEAD`."""
    if isinstance(value, bytes):
        return len(value)
    return len(value[0]) + len(value[1]) + PARTS_OVERHEAD


#: An entry as held: its bytes (or `Parts`), its expiry (ms, or None), a reader's note on it (or None) and the note's
#: weight (0 for the note a `Parts` entry carries from its write, which is never dropped).
_Record = tuple[bytes | Parts, int | None, Any, int]


class MemoryStore(Store):
    """A bounded, thread-safe LRU of entry bytes."""

    backend = "memory"

    def __init__(self, capacity: int = DEFAULT_CAPACITY, max_entries: int = 0) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.max_entries = max_entries
        self._max_weight = max(capacity // 16, 1)
        self._lock = threading.Lock()
        # key -> (value, expiry ms or None, a reader's note or None, the note's weight)
        self._items: OrderedDict[str, _Record] = OrderedDict()
        # keys whose records carry a note, and what the notes weigh together (part of `_bytes`)
        self._noted: set[str] = set()
        self._note_bytes = 0
        self._bytes = 0
        self._stats = StoreStats(capacity_bytes=capacity)

    @classmethod
    def from_url(cls, url: StoreUrl) -> MemoryStore:
        url.no_hosts()
        if url.path not in ("", "/"):
            raise url.error("memory:// takes no path")
        capacity = url.take_size("capacity", DEFAULT_CAPACITY)
        max_entries = url.take_number("max_entries", 0, 0, 2**32 - 1)
        url.finish()
        if capacity == 0:
            raise url.error("capacity must be more than 0")
        return cls(capacity, max_entries)

    def max_value_bytes(self) -> int:
        return max(self._max_weight - ENTRY_OVERHEAD - 250, 0)

    # -- internals (called with the lock held) --

    def _live(self, key: str, now: int) -> _Record | None:
        found = self._items.get(key)
        if found is None:
            return None
        expiry = found[1]
        if expiry is not None and expiry <= now:
            self._remove(key)
            self._stats.expirations += 1
            return None
        self._items.move_to_end(key)
        return found

    def _joined(self, key: str, found: _Record) -> bytes:
        """The bytes of the entry `found` under `key`: a `Parts` entry is joined, and held joined from now on (its
        note goes with the parts: the next reader notes the bytes anew)."""
        value = found[0]
        if type(value) is bytes:
            return value
        entry = joined(value)
        self._items[key] = (entry, found[1], None, 0)  # (assigning an existing key keeps its place in the order)
        self._bytes -= PARTS_OVERHEAD
        return entry

    def _remove(self, key: str) -> bool:
        found = self._items.pop(key, None)
        if found is None:
            return False
        value = found[0]
        self._bytes -= len(key) + _held(value) + ENTRY_OVERHEAD + found[3]
        if found[3]:
            self._noted.discard(key)
            self._note_bytes -= found[3]
        return True

    def _put(self, key: str, value: bytes, expiry: int | None) -> None:
        self._insert(key, (value, expiry, None, 0), len(key) + len(value) + ENTRY_OVERHEAD)

    def _insert(self, key: str, record: _Record, weight: int) -> None:
        """Holds `record` under `key` in place of what was there, counting `weight` bytes (key, entry, overhead),
        and makes room. (`_remove`'s work inline: this is every write's path.)"""
        old = self._items.pop(key, None)
        if old is not None:
            value = old[0]
            held = len(value) if isinstance(value, bytes) else len(value[0]) + len(value[1]) + PARTS_OVERHEAD  # _held
            self._bytes -= len(key) + held + ENTRY_OVERHEAD + old[3]
            if old[3]:
                self._noted.discard(key)
                self._note_bytes -= old[3]
        self._items[key] = record
        self._bytes += weight
        self._stats.inserts += 1
        if self._bytes > self.capacity or (self.max_entries and len(self._items) > self.max_entries):
            self._evict()

    def _evict(self) -> None:
        """Makes room: first the readers' notes go (they are only copies), then the least recently used entries
        while the store holds more than it may."""
        if self._bytes > self.capacity and self._noted:
            items = self._items
            for key in self._noted:
                value, expiry, _, _ = items[key]
                items[key] = (value, expiry, None, 0)  # (assigning an existing key keeps its place in the order)
            self._bytes -= self._note_bytes
            self._noted.clear()
            self._note_bytes = 0
        while self._bytes > self.capacity or (self.max_entries and len(self._items) > self.max_entries):
            oldest = next(iter(self._items))
            self._remove(oldest)
            self._stats.evictions += 1

    def _check(self, key: str, value: bytes) -> None:
        if len(key) + len(value) + ENTRY_OVERHEAD > self._max_weight:
            self._stats.rejections += 1
            raise TooLarge(self.backend, key, len(value), self.max_value_bytes())

    # -- Store --

    def get(self, key: str) -> bytes | None:
        """`get_many([key])[0]`, the one lookup a hit makes."""
        check_key(self.backend, key)
        now = time_ns() // 1_000_000
        with self._lock:
            found = self._live(key, now)
            if found is None:
                self._stats.misses += 1
                return None
            self._stats.hits += 1
            return self._joined(key, found)

    def read(self, key: str) -> _Record | None:
        """What `get` finds, as held: (value (bytes, or `Parts`: `joined(value)` is the entry), expiry, the note a
        reader left on it (`note`) or None, its weight); or None."""
        check_key(self.backend, key)
        return self.read_checked(key)

    def read_checked(self, key: str) -> _Record | None:
        """`read`, for a key known to be one a store may take (a non-empty result of `safe_key`)."""
        now = time_ns() // 1_000_000
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                if found[1] is None or found[1] > now:
                    self._items.move_to_end(key)
                    self._stats.hits += 1
                    return found
                self._remove(key)
                self._stats.expirations += 1
            self._stats.misses += 1
            return None

    def read_many(self, keys: Sequence[str]) -> list[_Record | None]:
        """What `get_many` finds, each as `read` finds it."""
        check_keys(self.backend, keys)
        now = time_ns() // 1_000_000
        found: list[_Record | None] = []
        with self._lock:
            for key in keys:
                found.append(self._live(key, now))
            hits = sum(v is not None for v in found)
            self._stats.hits += hits
            self._stats.misses += len(found) - hits
        return found

    def note(self, key: str, value: bytes, note: object, weight: int) -> bool:
        """Leaves `note` (what a reader made of `value`: the decoded value, say) on the entry at `key`, if that
        entry still holds `value` itself and has no note yet; `read` hands it to the next reader with the value.
        The note's `weight` (bytes) counts toward the capacity: a note is left only where it fits without evicting
        anything, and notes are the first to go when a write needs room. True if it was left."""
        with self._lock:
            found = self._items.get(key)
            if (
                found is None
                or found[0] is not value
                or found[2] is not None
                or weight <= 0
                or self._bytes + weight > self.capacity
            ):
                return False
            self._items[key] = (value, found[1], note, weight)
            self._noted.add(key)
            self._note_bytes += weight
            self._bytes += weight
            return True

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        check_keys(self.backend, keys)
        now = now_ms()
        with self._lock:
            values = []
            for key in keys:
                found = self._live(key, now)
                values.append(None if found is None else self._joined(key, found))
            hits = sum(v is not None for v in values)
            self._stats.hits += hits
            self._stats.misses += len(values) - hits
            return values

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """`set_many([(key, value)], ttl)`, without the batch."""
        check_key(self.backend, key)
        weight = len(key) + len(value) + ENTRY_OVERHEAD
        if weight > self._max_weight:
            self._check(key, value)
        now = time_ns() // 1_000_000
        expiry = expires_at_ms(value, ttl, now)
        if type(value) is not bytes:
            value = bytes(value)
        if expiry is not None and expiry <= now:
            with self._lock:
                self._remove(key)
            return
        self.put(key, value, expiry)

    def put(self, key: str, value: bytes, expiry: int | None) -> None:
        """`set`, for a writer that knows what it stores: a key `safe_key` made (not empty), entry bytes, and the
        moment (ms) they may no longer be returned, which `set` reads from the entry's header and its ttl (None =
        never). A `larder.Cache` writing an entry it just built."""
        weight = len(key) + len(value) + ENTRY_OVERHEAD
        if weight > self._max_weight:
            self._check(key, value)
        with self._lock:
            self._insert(key, (value, expiry, None, 0), weight)

    def put_parts(self, key: str, head: bytes, body: str | bytes, expiry: int | None, note: object) -> bool:
        """`put(key, head + body, expiry)` without joining them: `body` is bytes, or a str of ASCII characters only
        (its own UTF-8); the entry is held as `Parts`. `note` is a reader's note on it (`note`), left with it at
        once and kept as long as the parts are (a note of the value held, not a copy: counted in
        `PARTS_OVERHEAD`). False, and nothing done, where the parts would weigh more than an entry may: the writer's
        `put` of the joined bytes then takes or refuses them."""
        weight = len(key) + len(head) + len(body) + PARTS_OVERHEAD + ENTRY_OVERHEAD
        if weight > self._max_weight:
            return False
        with self._lock:
            self._insert(key, ((head, body), expiry, note, 0), weight)
        return True

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        now = now_ms()
        for key, value in items:
            check_key(self.backend, key)
            self._check(key, value)
        with self._lock:
            for key, value in items:
                expiry = expires_at_ms(value, ttl, now)
                if expiry is not None and expiry <= now:
                    self._remove(key)
                else:
                    self._put(key, bytes(value), expiry)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        check_key(self.backend, key)
        self._check(key, value)
        now = now_ms()
        expiry = expires_at_ms(value, ttl, now)
        with self._lock:
            if self._live(key, now) is not None or (expiry is not None and expiry <= now):
                return False
            self._put(key, bytes(value), expiry)
            return True

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        check_key(self.backend, key)
        now = now_ms()
        with self._lock:
            live = self._live(key, now)
            if live is None:
                if not create:
                    return None
                number = saturate(delta)
                self._put(key, str(number).encode(), None if ttl is None else now + max(1, round(ttl * 1000)))
                return number
            old = parse_counter(self._joined(key, live))
            if old is None:
                raise NotACounter(self.backend, key)
            number = saturate(old + delta)
            expiry = self._items[key][1]
            self._put(key, str(number).encode(), expiry)
            return number

    def delete_if(self, key: str, expected: bytes) -> bool:
        check_key(self.backend, key)
        with self._lock:
            found = self._live(key, now_ms())
            if found is not None and self._joined(key, found) == bytes(expected):
                return self._remove(key)
            return False

    def delete_many(self, keys: Sequence[str]) -> int:
        check_keys(self.backend, keys)
        now = now_ms()
        with self._lock:
            return sum(self._live(key, now) is not None and self._remove(key) for key in keys)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._noted.clear()
            self._note_bytes = 0
            self._bytes = 0

    def purge_prefix(self, prefix: str) -> int:
        check_prefix(self.backend, prefix)
        with self._lock:
            doomed = [key for key in self._items if key.startswith(prefix)]
            for key in doomed:
                self._remove(key)
            return len(doomed)

    def purge_tag(self, tag: str) -> int:
        check_tag(self.backend, tag)
        with self._lock:
            # (an entry held as Parts is the common write's: it has no tags)
            doomed = [
                key for key, record in self._items.items() if type(record[0]) is bytes and tag in entry_tags(record[0])
            ]
            for key in doomed:
                self._remove(key)
            return len(doomed)

    def __len__(self) -> int:
        """Entries held, expired ones not yet noticed included (as Django's LocMemCache counts them)."""
        return len(self._items)

    def cull(self, frequency: int) -> int:
        """Django's LocMemCache culling, for the Django backend's MAX_ENTRIES/CULL_FREQUENCY: everything when
        `frequency` is 0, else the least recently used `len // frequency` entries. How many went."""
        with self._lock:
            count = len(self._items) if frequency == 0 else len(self._items) // frequency
            for _ in range(count):
                self._remove(next(iter(self._items)))
                self._stats.evictions += 1
            return count

    def stats(self) -> StoreStats:
        with self._lock:
            stats = StoreStats(**vars(self._stats))
            stats.entries = len(self._items)
            stats.bytes = self._bytes
            return stats
