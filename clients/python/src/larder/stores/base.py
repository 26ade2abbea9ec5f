"""What every store shares (spec/STORES.md §2, §3): the `Store` interface, its errors, the keys a store writes,
the expiry rule, counters and a remote server's health.

A store knows bytes: it never deserializes a value, but may read an entry's header (expiry, tags). Mirrors the Rust
crate `larder-store` (store.rs, error.rs, keys.rs, expiry.rs, counter.rs, health.rs), one concept per section.
"""

from __future__ import annotations

import math
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ..errors import InvalidEntry
from ..header import entry_hard_expiry, parse_header
from ..keys import MAX_KEY_LEN, safe_key

# ---------------------------------------------------------------------------------------------------------- errors


class StoreError(Exception):
    """A store operation that failed. `backend` names the backend ("memcached", "redis", …); `server` the server
    (`host:port`) for remote stores, else None. `str(error)` always names both. `kind` is the spec's name for the
    error (spec/STORES.md §2): `server`, `timeout`, `too_large`, `not_a_counter`, `unsupported`, `invalid_key`."""

    kind: str = "store"
    backend: str
    server: str | None

    def __init__(self, backend: str, message: str, server: str | None = None) -> None:
        where = f"{backend} server {server}" if server else backend
        super().__init__(f"{where}: {message}")
        self.backend = backend
        self.server = server
        self.message = message


class ServerError(StoreError):
    """A server could not be reached, refused, lost the connection, answered with an error, or sent a reply that
    broke a bound (too long, too deep, malformed: spec/STORES.md §2 "Replies are hostile too")."""

    kind = "server"


class StoreTimeout(ServerError):
    """A server did not answer within the store's `timeout`, a total deadline for the whole operation."""

    kind = "timeout"

    def __init__(self, backend: str, server: str, timeout_ms: int) -> None:
        super().__init__(backend, f"no answer within {timeout_ms} ms", server)
        self.timeout_ms = timeout_ms


class TooLarge(StoreError):
    """A value larger than the store accepts; nothing was stored (spec/STORES.md §2 `too_large`)."""

    kind = "too_large"

    def __init__(self, backend: str, key: str, size: int, limit: int) -> None:
        super().__init__(backend, f"value of {size} bytes for key {key!r} exceeds the {limit}-byte entry limit")
        self.key, self.size, self.limit = key, size, limit


class NotACounter(StoreError):
    """`incr` found a value that is not a decimal integer; it was left as it was (`not_a_counter`)."""

    kind = "not_a_counter"

    def __init__(self, backend: str, key: str) -> None:
        super().__init__(backend, f"the value at key {key!r} is not a counter")
        self.key = key


class Unsupported(StoreError):
    """The backend cannot do this operation."""

    kind = "unsupported"

    def __init__(self, backend: str, operation: str) -> None:
        super().__init__(backend, f"{operation} is not supported")


class InvalidKey(StoreError):
    """A key (or purge prefix, or purge tag) that is not a safe key, or an empty key: refused before anything was sent
    (spec/STORES.md §2 `invalid_key`). `key` is the refused key as given; the message shows it escaped and cut."""

    kind = "invalid_key"

    def __init__(self, backend: str, key: object, reason: str) -> None:
        shown = repr(key[:80]) + ("…" if len(key) > 80 else "") if isinstance(key, str) else repr(key)[:90]
        super().__init__(backend, f"invalid key {shown}: {reason}")
        self.key = key
        self.reason = reason


class UrlError(ValueError):
    """A store URL that cannot be used (nothing was contacted). The password is never shown."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"store URL {url!r}: {message}")
        self.url = url
        self.message = message


# ------------------------------------------------------------------------------------------------------ statistics


@dataclass
class StoreStats:
    """Counters a store reports; remote backends report what their servers report, zeros where unknown."""

    hits: int = 0
    misses: int = 0
    inserts: int = 0
    evictions: int = 0
    expirations: int = 0
    rejections: int = 0
    entries: int = 0
    bytes: int = 0
    capacity_bytes: int = 0
    #: File stores: files under the root that the store did not write (left alone, spec/STORES.md §7).
    foreign_files: int = 0


# ------------------------------------------------------------------------------------------------------- interface


class Store(ABC):
    """Blocking operations on keys and entry bytes; every implementation is safe to share between threads.

    `ttl` (seconds, float; None = only the entry's own expiry) is a store-side expiry on top of the entry's own:
    a store never returns a value past `expiry(value, ttl)` (spec/STORES.md §2).
    """

    backend: str = "store"

    def max_value_bytes(self) -> int:
        """The largest value a write under a short key can store."""
        return 1 << 62

    def server_errors(self) -> list[tuple[str, int]]:
        """Failures counted per server (`host:port`, count) since the store was opened."""
        return []

    def get(self, key: str) -> bytes | None:
        return self.get_many([key])[0]

    @abstractmethod
    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """One result per key, in order."""

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self.set_many([(key, value)], ttl)

    @abstractmethod
    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        """Stores every item with one TTL; not atomic (after an error some may be stored)."""

    @abstractmethod
    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        """Stores only if the key is absent (or expired); True if it stored."""

    @abstractmethod
    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        """Adds `delta` to the counter at `key` (spec/STORES.md §3); None when missing and not `create`."""

    @abstractmethod
    def delete_if(self, key: str, expected: bytes) -> bool:
        """Deletes `key` only while it holds exactly `expected`; True if it deleted."""

    def delete(self, key: str) -> bool:
        return self.delete_many([key]) == 1

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> int:
        """How many of the keys were present."""

    @abstractmethod
    def clear(self) -> None: ...

    @abstractmethod
    def purge_prefix(self, prefix: str) -> int | None:
        """Removes every entry whose key starts with `prefix` (checked as keys are, the empty prefix allowed); how
        many, or None where the store records the purge instead of counting (memcached, spec/STORES.md §4.4)."""

    @abstractmethod
    def purge_tag(self, tag: str) -> int | None:
        """Removes every entry whose header carries `tag`; how many, or None where the store records the purge
        instead of counting (memcached)."""

    @abstractmethod
    def stats(self) -> StoreStats: ...

    def close(self) -> None:  # noqa: B027 - a no-op default; remote stores close their connections
        """Releases connections and files."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------------------ keys


_UNSAFE: Final = re.compile("[\x00-\x20\x7f]")


def prefix_problem(prefix: object) -> str | None:
    """Why `prefix` may not reach a store, if it may not: at most 250 bytes of UTF-8, none of them 0x00-0x20 or
    0x7F (spec/STORES.md §2). Characters from U+0080 up are UTF-8 bytes from 0x80 up, so only ASCII is checked."""
    if type(prefix) is not str:
        return f"a key is a str, not {type(prefix).__name__}"
    if prefix.isascii() and len(prefix) <= MAX_KEY_LEN and prefix.isprintable() and " " not in prefix:
        return None  # the common case at C speed: printable ASCII is 0x20-0x7E, and the space is refused
    if len(prefix) > MAX_KEY_LEN or not prefix.isascii():
        try:
            size = len(prefix.encode("utf-8"))
        except UnicodeEncodeError:
            return "not valid UTF-8 (it holds a lone surrogate)"
        if size > MAX_KEY_LEN:
            return f"longer than {MAX_KEY_LEN} bytes (apply safe_key, spec/FORMAT.md §5.1)"
    if _UNSAFE.search(prefix):
        return "holds a space or control byte (apply safe_key, spec/FORMAT.md §5.1)"
    return None


def key_problem(key: object) -> str | None:
    """Why `key` may not reach a store, if it may not: a caller's key is a non-empty safe key, so none of its bytes
    can become protocol (a CR LF in a memcached key would be a second command)."""
    if key == "":
        return "a key may not be empty"
    return prefix_problem(key)


def check_key(backend: str, key: str) -> str:
    """`key`, if a store may take it; else raises `InvalidKey` naming `backend`."""
    if type(key) is str and key and key.isascii() and len(key) <= MAX_KEY_LEN and key.isprintable() and " " not in key:
        return key
    problem = key_problem(key)
    if problem is not None:
        raise InvalidKey(backend, key, problem)
    return key


def check_keys(backend: str, keys: Sequence[str]) -> None:
    """Raises `InvalidKey` for the first key of `keys` a store may not take (so nothing of a batch is sent)."""
    for key in keys:
        check_key(backend, key)


def check_prefix(backend: str, prefix: str) -> str:
    """`prefix`, if a store may purge it (the empty prefix included); else raises `InvalidKey`."""
    problem = prefix_problem(prefix)
    if problem is not None:
        raise InvalidKey(backend, prefix, problem)
    return prefix


def tag_problem(tag: object) -> str | None:
    """Why `tag` may not reach a store's `purge_tag`, if it may not. Tags are free UTF-8 (spec/STORES.md §2), so only
    a tag that is not a str, or has no UTF-8 form (a lone surrogate, which an encoder would have to repair into
    another tag), is refused."""
    if type(tag) is not str:
        return f"a tag is a str, not {type(tag).__name__}"
    if not tag.isascii():
        try:
            tag.encode("utf-8")
        except UnicodeEncodeError:
            return "not valid UTF-8 (it holds a lone surrogate)"
    return None


def check_tag(backend: str, tag: str) -> str:
    """`tag`, if a store may purge it; else raises `InvalidKey` (kind `invalid_key`) naming `backend`."""
    problem = tag_problem(tag)
    if problem is not None:
        raise InvalidKey(backend, tag, problem)
    return tag


def stored_key(prefix: str, key: str) -> str:
    """The key as the server sees it: `safe_key(prefix + key)`, or `key` itself without a prefix. Pure: stores
    check the caller's key first (`checked_key`)."""
    return safe_key(prefix + key) if prefix else key


def checked_key(backend: str, prefix: str, key: str) -> str:
    """The stored key of a caller's `key`, once it is known to be one a store may take (else `InvalidKey`)."""
    check_key(backend, key)
    return safe_key(prefix + key) if prefix else key


def checked_prefix(backend: str, prefix: str, purge_prefix: str) -> str:
    """The stored form of a purge prefix (`prefix + purge_prefix`), once it is known to be one a store may purge."""
    check_prefix(backend, purge_prefix)
    return safe_key(prefix + purge_prefix) if prefix else purge_prefix


def internal_key(prefix: str, purpose: str, name: str) -> str:
    """A bookkeeping key (locks, purge records, tag indexes): `larder#<sha256>` after the prefix."""
    return stored_key(prefix, safe_key(f"larder\x00{purpose}:{name}"))


def lock_key(prefix: str, key: str) -> str:
    """The lock guarding `key`, taken with `add`, released with `delete_if` (spec/STORES.md §3)."""
    return internal_key(prefix, "lock", key)


# ---------------------------------------------------------------------------------------------------------- expiry


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def entry_tags(value: bytes) -> tuple[str, ...]:
    """The entry's tags; none for a value that is not an entry."""
    try:
        return parse_header(value if type(value) is bytes else bytes(value))[7]
    except InvalidEntry:
        return ()


def ttl_ms(ttl: float | None) -> int | None:
    """A TTL in seconds as whole milliseconds, rounded up (None stays None)."""
    if ttl is None:
        return None
    if ttl < 0:
        raise ValueError(f"a ttl cannot be negative: {ttl!r}")
    return math.ceil(ttl * 1000)


def expires_at_ms(value: bytes, ttl: float | None, now: int) -> int | None:
    """The moment (ms) past which `value` must not be returned: the earlier of now + ttl and the entry's hard
    expiry; None = never."""
    if ttl is None:
        return entry_hard_expiry(value)
    from_ttl = now + (ttl_ms(ttl) or 0)
    hard = entry_hard_expiry(value)
    return from_ttl if hard is None or from_ttl < hard else hard


THIRTY_DAYS_SECS: Final = 30 * 24 * 3600


def memcached_exptime(expires_at: int | None, now: int) -> int:
    """memcached's exptime: 0 = never; relative seconds up to 30 days, a Unix time beyond; -1 when already past."""
    if expires_at is None:
        return 0
    if expires_at <= now:
        return -1
    relative = -(-(expires_at - now) // 1000)
    if relative <= THIRTY_DAYS_SECS:
        return relative
    return -(-expires_at // 1000)


# -------------------------------------------------------------------------------------------------------- counters

I64_MIN: Final = -(1 << 63)
I64_MAX: Final = (1 << 63) - 1
_COUNTER: Final = re.compile(rb"-?[0-9]{1,20}")


def parse_counter(value: bytes) -> int | None:
    """The counter a stored value holds: an optional `-` and digits within signed 64 bits, nothing else."""
    if not _COUNTER.fullmatch(value):
        return None
    number = int(value)
    return number if I64_MIN <= number <= I64_MAX else None


def saturate(number: int) -> int:
    return max(I64_MIN, min(I64_MAX, number))


# ---------------------------------------------------------------------------------------------------------- health


@dataclass(frozen=True)
class FailurePolicy:
    """`failures` consecutive failures eject a server for `retry_after_ms`."""

    failures: int
    retry_after_ms: int


class Health:
    """A remote server's health (spec/STORES.md §1 "Failure and recovery"): consecutive failures, ejection,
    probation after it, and the errors counted since start. Thread-safe.

    Probation is one probe at a time: once `retry_after` has passed, the first request `admits` lets through is the
    *probe*; until it is recorded (a good answer puts the server back, a failure ejects it again), every other
    request is refused at once, so one request pays for a server that may still be frozen, not every request that
    arrives meanwhile. A probe that is never recorded (its caller gone without an outcome) is taken as lost after
    `retry_after`, and the next request probes instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._consecutive = 0
        self._ejected_until = 0
        #: Put back after an ejection and not answered yet: one failure ejects it again.
        self._probation = False
        #: When (ms) the probe of this probation was let through; 0 = no probe out.
        self._probe_since = 0
        self.errors = 0

    def record(self, ok: bool, policy: FailurePolicy, now: int = 0) -> bool:
        """Records one request's outcome; True when this failure ejects the server. `now` (ms) is read for a failure
        only: a success is recorded without it (callers skip reading the clock)."""
        if ok and not self._consecutive and not self._probation:
            return False  # a success on a healthy server changes nothing (as if it came just before a failure)
        with self._lock:
            if ok:
                self._consecutive = 0
                self._probation = False
                self._probe_since = 0
                return False
            self.errors += 1
            self._consecutive += 1
            if self._consecutive >= policy.failures or self._probation:
                self._ejected_until = now + policy.retry_after_ms
                self._consecutive = 0
                self._probation = False
                self._probe_since = 0
                return True
            return False

    def readmit_if_due(self, now: int) -> bool:
        """Puts the server back (on probation, no probe out yet) once its ejection is over; True if it changed."""
        if not self._ejected_until:
            return False
        with self._lock:
            if self._ejected_until and self._ejected_until <= now:
                self._ejected_until = 0
                self._probation = True
                self._probe_since = 0
                return True
            return False

    def admits(self, now: int, policy: FailurePolicy | None = None) -> bool:
        """Whether a request may go to the server now: a healthy one, yes (two attribute reads, no lock); an ejected
        one, no until `retry_after` has passed; on probation, only the one probe (the first request after the
        ejection; another once a probe has been out `policy.retry_after_ms` without an outcome). A refused request
        is the caller's to count (`count_error`)."""
        if not self._ejected_until and not self._probation:
            return True
        with self._lock:
            if self._ejected_until:
                if self._ejected_until > now:
                    return False
                self._ejected_until = 0
                self._probation = True
                self._probe_since = 0
            if not self._probation:
                return True  # (answered meanwhile)
            lost_after = policy.retry_after_ms if policy is not None else 5000
            if self._probe_since and now - self._probe_since < max(lost_after, 1):
                return False  # the probe is out: everyone else fails at once
            self._probe_since = now or 1
            return True

    def is_ejected(self) -> bool:
        return self._ejected_until != 0

    def on_probation(self) -> bool:
        return self._probation

    def count_error(self) -> None:
        with self._lock:
            self.errors += 1


def refused_why(health: Health) -> str:
    """Why a request `health` did not admit was refused without being sent (spec/STORES.md §1)."""
    if health.on_probation():
        return "on probation after failures: one probe at a time, and one is out"
    return "ejected after failures; retrying after retry_after"
