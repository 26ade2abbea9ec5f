"""`memcached://h1:11211,h2:11211?…`: a pool of memcached servers (spec/STORES.md §4), mirroring `larder-memcached`.

- Protocol: memcached's meta commands (`mg`, `ms`, `md`, `ma`, `mn`), pipelined: a request (a multi-get is one
  batch per server) ends with `mn`, so that a reply with more in it than the request can get is refused. Written
  here over plain sockets rather than pymemcache, because pymemcache speaks the text protocol (no `ma` with
  autovivify and TTL, no `ms` mode flags) and picks servers by rendezvous hashing; the meta protocol is a few dozen
  lines and lets every language send the same commands.
- Servers: the ketama ring of ring.py; a server that fails `failures` times in a row is ejected for `retry_after`
  and its keys move to the others (the failing request is retried once on the key's new server).
- Purges: records checked on read (§4.4): a tag's purge time, and the prefix list read in the same round trip.

Each server keeps up to `pool` idle connections (wire.py); a request takes one (or opens one within `connect_timeout`),
sends its batch and reads every reply, all within `timeout`: a total deadline, connecting included, not a limit per
read. Replies are bounded as spec/STORES.md §2 says: a line of 8 KiB, a value of `max_item` (refused when its length
is announced), no more replies than the batch can get, and the whole reply to a request, lines included, at most one
`max_item` per key asked plus 64 KiB (`stats`: 64 KiB and 1,024 lines). A reply that breaks a bound or does not
parse is a failure of the server (it counts toward ejection) and closes the connection; a connection that errs is
never reused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from time import monotonic, time_ns
from typing import Final

from ..errors import InvalidEntry
from ..header import FLAG_TAGS, parse_header
from .base import (
    FailurePolicy,
    Health,
    NotACounter,
    ServerError,
    Store,
    StoreError,
    StoreStats,
    StoreTimeout,
    TooLarge,
    Unsupported,
    check_tag,
    checked_key,
    checked_prefix,
    expires_at_ms,
    internal_key,
    memcached_exptime,
    now_ms,
    refused_why,
    ttl_ms,
)
from .ring import Ring, RingServer
from .url import StoreUrl
from .wire import Pool, Wire, WireFailure, connect_tcp

BACKEND: Final = "memcached"
#: memcached's per-item overhead (48-byte header + CAS) that counts against its item size.
ITEM_OVERHEAD: Final = 56
MAX_PREFIX_LINES: Final = 1000
#: The most `STAT` lines a `stats` reply may have (memcached 1.6 sends about 90).
MAX_STAT_LINES: Final = 1024
#: What a whole reply may hold on the wire beyond one `max_item` per key asked: its lines (spec/STORES.md §2 allows
#: at most 64 KiB), and all of a reply that holds no value (`stats`, `flush_all`).
ALLOWANCE: Final = 64 * 1024
#: The replies each command can get (spec/STORES.md §2: any other is malformed); error answers aside.
_GET_REPLIES: Final = frozenset({"VA", "EN"})
_SET_REPLIES: Final = frozenset({"HD", "NS", "NF", "EX"})
_DELETE_REPLIES: Final = frozenset({"HD", "NF", "EX"})
_INCR_REPLIES: Final = frozenset({"VA", "NF", "EN", "NS", "EX"})


class Reply:
    """One meta reply: `code` is VA, HD, NS, EX, NF, EN, MN, OK, END, STAT or ERROR; `size` its bytes on the wire."""

    __slots__ = ("code", "data", "flags", "message", "size")

    def __init__(
        self, code: str, data: bytes = b"", flags: tuple[str, ...] = (), message: str = "", size: int = 0
    ) -> None:
        self.code = code
        self.data = data
        self.flags = flags
        self.message = message
        self.size = size

    def __repr__(self) -> str:
        return f"Reply({self.code!r}, {self.data[:40]!r}, {self.flags!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Reply):
            return NotImplemented
        return (self.code, self.data, self.flags, self.message) == (other.code, other.data, other.flags, other.message)

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the dataclass it replaces)

    def flag(self, letter: str) -> str | None:
        for f in self.flags:
            if f.startswith(letter):
                return f[1:]
        return None


#: The meta no-op that ends every request of a known number of replies; its reply is `MN`.
_NOOP: Final = b"mn\r\n"
_STATUS: Final = frozenset({"HD", "NS", "EX", "NF", "EN", "MN", "OK", "END"})
_ERRORS: Final = frozenset({"ERROR", "CLIENT_ERROR", "SERVER_ERROR"})
#: Where an entry's flags byte is (spec/FORMAT.md §1).
_FLAGS_AT: Final = 6
#: The most digits a value length can have (max_item is far below 10^12).
_MAX_LENGTH_DIGITS: Final = 12


def read_reply(wire: Wire, deadline: float, max_value: int, room: int = 1 << 62) -> Reply:
    """One reply, within the deadline; a value longer than `max_value` is refused when its length is announced, and
    a reply of more than `room` bytes on the wire (what is left of the whole reply's bound) when its line is read."""
    raw = wire.line(deadline)
    size = len(raw) + 2
    if size > room:
        raise WireFailure("reply refused: more bytes than the request can get (the whole reply's bound)")
    line = raw.decode("utf-8", "replace")
    tokens = line.split(" ")
    code = tokens[0]
    if code == "VA":
        if len(tokens) < 2 or not tokens[1].isascii() or not tokens[1].isdigit():
            raise WireFailure(f"malformed reply: {line[:100]!r}")
        if len(tokens[1]) > _MAX_LENGTH_DIGITS or int(tokens[1]) > max_value:
            raise WireFailure(f"malformed reply: a value of {tokens[1][:20]} bytes (max_item is {max_value})")
        length = int(tokens[1])
        size += length + 2
        if size > room:
            raise WireFailure("reply refused: more bytes than the request can get (the whole reply's bound)")
        return Reply("VA", wire.exact(length, deadline), tuple(tokens[2:]), size=size)
    if code in _STATUS or code == "STAT":
        return Reply(code, flags=tuple(tokens[1:]), size=size)
    if code in _ERRORS:
        return Reply("ERROR", message=line, size=size)
    raise WireFailure(f"malformed reply: {line[:100]!r}")


class _Server:
    def __init__(
        self, name: str, host: str, port: int, pool: int, max_value: int, connect_timeout: float, timeout: float
    ) -> None:
        self.name = name
        self.host = host
        self.port = port
        self.max_value = max_value
        self.connect_timeout = connect_timeout
        #: A reply is awaited in the kernel while half the request's deadline remains (wire.py: no `poll` then).
        self.block_limit = timeout / 2
        self.health = Health()
        self.pool = Pool(self._connect, pool)

    def _connect(self, deadline: float) -> Wire:
        return Wire(connect_tcp(self.host, self.port, deadline, self.connect_timeout), self.block_limit)

    def exchange(
        self, request: bytes | list[bytes], expect: int | None, timeout: float, allowed: frozenset[str], most: int = 1
    ) -> list[Reply]:
        """Sends `request` and reads its replies, all within `timeout` (connecting included): `expect` replies, or
        with `expect` None until `END`/`OK`, refusing more than `most` replies before it. A reply whose code is not
        `allowed` (nor an error answer) is malformed: a failure of the server. The replies together hold at most
        one `max_value` per reply expected, plus `ALLOWANCE` bytes (the whole reply's bound).

        Every request ends with the meta no-op `mn`, whose `MN` must come right after its replies (spec/STORES.md
        §4.1): a server that answers more than was asked (a second value after a get's, issue 32's wide reply) is
        out of step, and is refused at the first reply too many, not read to its end nor left in the connection for
        the next caller."""
        deadline = monotonic() + timeout
        room = (expect or 0) * self.max_value + ALLOWANCE
        request = [*request, _NOOP] if isinstance(request, list) else request + _NOOP
        wire = self.pool.take(deadline)
        try:
            wire.send(request, deadline)
            replies: list[Reply] = []
            while True:
                reply = read_reply(wire, deadline, self.max_value, room)
                room -= reply.size
                if reply.code not in allowed and reply.code != "ERROR":
                    raise WireFailure(f"malformed reply: {reply.code} is not an answer to this request")
                replies.append(reply)
                if expect is not None:
                    if len(replies) == expect:
                        break
                elif reply.code in ("END", "OK") or (reply.code == "ERROR" and not replies[:-1]):
                    break
                elif len(replies) > most:
                    raise WireFailure(f"malformed reply: more than {most} lines")
            end = wire.line(deadline)
            if end != b"MN":
                raise WireFailure(
                    f"malformed reply: {end[:40]!r} where MN ends the replies: more replies than the request can get"
                )
        except BaseException:
            self.pool.discard(wire)
            raise
        self.pool.give_back(wire)
        return replies

    def close(self) -> None:
        self.pool.close()


def _get(key: str, flags: str) -> bytes:
    return f"mg {key} {flags}\r\n".encode()


def _set(key: str, value: bytes, exptime: int, mode: str) -> list[bytes]:
    """An `ms` command as its parts (head, value, CRLF): sent gathered, the value is not copied into the request."""
    head = f"ms {key} {len(value)} T{exptime} F0{' ' + mode if mode else ''}\r\n".encode()
    return [head, bytes(value), b"\r\n"]


def _delete(key: str, flags: str = "") -> bytes:
    return f"md {key}{' ' + flags if flags else ''}\r\n".encode()


class MemcachedStore(Store):
    """A pool of memcached servers over the ketama ring. Thread-safe."""

    backend = BACKEND

    def __init__(
        self,
        hosts: Sequence[tuple[str, int]],
        *,
        weights: Sequence[int] | None = None,
        prefix: str = "",
        timeout_ms: int = 250,
        connect_timeout_ms: int = 500,
        pool: int = 2,
        failures: int = 2,
        retry_after_ms: int = 5000,
        max_item: int = 1 << 20,
        prefix_purge: bool = True,
        purge_skew_ms: int = 1000,
        purge_retention_ms: int = 30 * 86_400_000,
    ) -> None:
        if not hosts:
            raise ValueError("memcached needs at least one server")
        weights = list(weights) if weights is not None else [1] * len(hosts)
        if max_item <= ITEM_OVERHEAD + 250:
            raise ValueError("max_item is too small")
        self.prefix = prefix
        #: The prefix list's key, read with every get (computed once: it is a SHA-256).
        self._prefixes_key = internal_key(prefix, "prefixes", "")
        self.timeout = timeout_ms / 1000
        self.timeout_ms = timeout_ms
        self.connect_timeout = connect_timeout_ms / 1000
        self.policy = FailurePolicy(failures, retry_after_ms)
        self.max_item = max_item
        self.prefix_purge = prefix_purge
        self.purge_skew_ms = purge_skew_ms
        self.purge_retention_ms = purge_retention_ms
        self.ring_servers = [
            RingServer(f"[{h}]" if ":" in h else h, p, w) for (h, p), w in zip(hosts, weights, strict=True)
        ]
        self.servers = [
            _Server(
                f"[{h}]:{p}" if ":" in h else f"{h}:{p}", h, p, pool, max_item, connect_timeout_ms / 1000, self.timeout
            )
            for h, p in hosts
        ]
        self._ring = Ring(self.ring_servers)
        self._ring_lock = threading.Lock()
        self._next_readmit_check = 0

    @classmethod
    def from_url(cls, url: StoreUrl) -> MemcachedStore:
        if url.path not in ("", "/"):
            raise url.error("memcached:// takes no path")
        hosts = url.require_hosts()
        prefix = url.take("prefix") or ""
        timeout = url.take_duration_ms("timeout", 250)
        connect_timeout = url.take_duration_ms("connect_timeout", 500)
        pool = url.take_number("pool", 2, 1, 64)
        failures = url.take_number("failures", 2, 1, 1000)
        retry_after = url.take_duration_ms("retry_after", 5000)
        max_item = url.take_size("max_item", 1 << 20)
        prefix_purge = url.take_bool("prefix_purge", True)
        purge_skew = url.take_duration_ms("purge_skew", 1000)
        purge_retention = url.take_duration_ms("purge_retention", 30 * 86_400_000)
        weights_text = url.take("weights")
        weights = [1] * len(hosts)
        if weights_text is not None:
            parts = [w.strip() for w in weights_text.split(",")]
            if len(parts) != len(hosts) or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise url.error(f"weights={weights_text!r}: one whole number > 0 per host, in order")
            weights = [int(p) for p in parts]
        url.finish()
        if max_item <= ITEM_OVERHEAD + 250:
            raise url.error("max_item is too small")
        return cls(
            [(h.host, h.port if h.port is not None else 11211) for h in hosts],
            weights=weights,
            prefix=prefix,
            timeout_ms=timeout,
            connect_timeout_ms=connect_timeout,
            pool=pool,
            failures=failures,
            retry_after_ms=retry_after,
            max_item=max_item,
            prefix_purge=prefix_purge,
            purge_skew_ms=purge_skew,
            purge_retention_ms=purge_retention,
        )

    # ---------------------------------------------------------------------------------------------- routing

    def _rebuild(self) -> None:
        with self._ring_lock:
            self._ring = Ring(self.ring_servers, lambda i: not self.servers[i].health.is_ejected())

    def _route(self, stored: str) -> int:
        now = time_ns() // 1_000_000
        if now >= self._next_readmit_check:
            self._next_readmit_check = now + 100
            changed = False
            for server in self.servers:
                changed |= server.health.readmit_if_due(now)
            if changed:
                self._rebuild()
        index = self._ring.server_for(stored)
        if index is None:
            for server in self.servers:
                server.health.count_error()
            raise ServerError(
                BACKEND,
                "every server is ejected after failures; retrying after retry_after",
                ",".join(s.name for s in self.servers),
            )
        return index

    def server_of(self, key: str) -> str:
        """The server (`host:port`) a caller's key goes to now."""
        return self.servers[self._route(checked_key(BACKEND, self.prefix, key))].name

    def _error(self, server: _Server, failure: WireFailure) -> StoreError:
        if failure.timeout:
            return StoreTimeout(BACKEND, server.name, self.timeout_ms)
        return ServerError(BACKEND, str(failure), server.name)

    def _exchange(self, route_key: str, request: bytes | list[bytes], allowed: frozenset[str]) -> tuple[_Server, Reply]:
        """A request about one key to its server, and its one reply: `_batched`'s rule for a batch of one (a failure
        that ejects the server is retried once on the key's new server)."""
        ((_, reply, server),) = self._batched([route_key], lambda _: request, allowed)
        return server, reply

    @staticmethod
    def _reply_error(server: _Server, message: str) -> StoreError:
        return ServerError(BACKEND, message, server.name)

    def _groups(self, keys: Sequence[str], indexes: Sequence[int] | None = None) -> dict[int, list[int]]:
        """The indexes of `keys` (all, or those of `indexes`) grouped by the server each key routes to."""
        items = range(len(keys)) if indexes is None else indexes
        if len(self.servers) == 1 and items:  # one server takes every key (routing still checks it is not ejected)
            return {self._route(keys[items[0]]): list(items)}
        groups: dict[int, list[int]] = {}
        for i in items:
            groups.setdefault(self._route(keys[i]), []).append(i)
        return groups

    def _batched(
        self,
        keys: Sequence[str],
        request_for: Callable[[list[int]], bytes | list[bytes]],
        allowed: frozenset[str],
    ) -> list[tuple[int, Reply, _Server]]:
        """Several keys in one round trip per server: each key's reply (and the server that gave it), for the
        commands `request_for` writes for a group of indexes of `keys`, one reply each. A batch whose failure ejects
        its server is retried once, its keys regrouped on the rebuilt ring (STORES.md §4.3: on each key's new
        server; the keys of one ejected server move to several servers, so sending them all to the first key's new
        server would read false misses and leave writes and deletes where no reader looks)."""
        results: list[tuple[int, Reply, _Server]] = []
        groups = self._groups(keys)
        for attempt in (0, 1):
            retry: list[int] = []
            for index, items in groups.items():
                server = self.servers[index]
                health = server.health
                if health.on_probation() and not health.admits(now_ms(), self.policy):
                    health.count_error()  # its probe is out: every other request fails at once (STORES.md §1)
                    raise ServerError(BACKEND, refused_why(health), server.name)
                try:
                    replies = server.exchange(request_for(items), len(items), self.timeout, allowed)
                except WireFailure as failure:
                    ejected = server.health.record(False, self.policy, now_ms())
                    if ejected:
                        self._rebuild()
                    if not ejected or attempt > 0:
                        raise self._error(server, failure) from None
                    retry += items
                    continue
                server.health.record(True, self.policy)
                results += [(i, reply, server) for i, reply in zip(items, replies, strict=True)]
            if not retry:
                break
            groups = self._groups(keys, retry)
        return results

    # ----------------------------------------------------------------------------------------- stored keys

    def _get_stored(self, keys: Sequence[str]) -> list[bytes | None]:
        values: list[bytes | None] = [None] * len(keys)
        # One `mg <key> v` per key, its reply (VA or EN) paired with the key by position: a server that says nothing
        # is a timeout, never a row of misses.
        replies = self._batched(keys, lambda items: b"".join(_get(keys[i], "v") for i in items), _GET_REPLIES)
        for i, reply, server in replies:
            if reply.code == "ERROR":
                raise self._reply_error(server, reply.message)
            values[i] = reply.data if reply.code == "VA" else None
        return values

    def _set_stored(self, items: Sequence[tuple[str, bytes, int]], mode: str) -> list[bool]:
        results = [False] * len(items)

        def request_for(indexes: list[int]) -> bytes | list[bytes]:
            parts: list[bytes] = []
            for i in indexes:
                if items[i][2] < 0:
                    parts.append(_delete(items[i][0]))
                else:
                    parts += _set(items[i][0], items[i][1], items[i][2], mode)
            return parts if len(parts) <= 64 else b"".join(parts)

        for i, reply, server in self._batched([k for k, _, _ in items], request_for, _SET_REPLIES):
            if reply.code == "ERROR":
                raise self._reply_error(server, reply.message)
            if reply.code not in ("HD", "NS", "NF", "EX"):
                raise self._reply_error(server, f"unexpected reply {reply.code}")
            results[i] = reply.code == "HD" and items[i][2] >= 0
        return results

    def _get_with_cas(self, stored: str) -> tuple[bytes, int] | None:
        server, reply = self._exchange(stored, _get(stored, "v c"), _GET_REPLIES)
        if reply.code == "VA" and (cas := reply.flag("c")) is not None and cas.isdigit():
            return reply.data, int(cas)
        if reply.code == "EN":
            return None
        raise self._reply_error(server, reply.message or f"unexpected reply {reply.code}")

    def _set_with(self, stored: str, value: bytes, exptime: int, mode: str) -> bool:
        server, reply = self._exchange(stored, _set(stored, value, exptime, mode), _SET_REPLIES)
        if reply.code == "HD":
            return True
        if reply.code in ("NS", "EX", "NF"):
            return False
        raise self._reply_error(server, reply.message or f"unexpected reply {reply.code}")

    def _check_size(self, stored: str, value: bytes) -> None:
        if len(value) + len(stored.encode()) + ITEM_OVERHEAD > self.max_item:
            raise TooLarge(BACKEND, stored, len(value), self.max_value_bytes())

    def _on_every_server(self, request: bytes, allowed: frozenset[str]) -> list[list[Reply]]:
        results = []
        for server in self.servers:
            if server.health.is_ejected():
                continue
            if server.health.on_probation() and not server.health.admits(now_ms(), self.policy):
                server.health.count_error()
                raise ServerError(BACKEND, refused_why(server.health), server.name)
            try:
                replies = server.exchange(request, None, self.timeout, allowed, MAX_STAT_LINES)
            except WireFailure as failure:
                if server.health.record(False, self.policy, now_ms()):
                    self._rebuild()
                raise self._error(server, failure) from None
            server.health.record(True, self.policy)
            results.append(replies)
        return results

    # ------------------------------------------------------------------------------------- purge records

    def _prefix_list_key(self) -> str:
        return self._prefixes_key

    def _tag_key(self, tag: str) -> str:
        return internal_key(self.prefix, "tag", tag)

    def _drop_purged(
        self, keys: Sequence[str], values: list[bytes | None], prefix_list: bytes | None
    ) -> list[bytes | None]:
        prefixes = _parse_prefix_list(prefix_list) if prefix_list else []
        tagged: list[tuple[int, int, tuple[str, ...]]] = []
        for i, value in enumerate(values):
            if value is None:
                continue
            if not prefixes and len(value) > _FLAGS_AT and not value[_FLAGS_AT] & FLAG_TAGS:
                continue  # no purge record can touch it: no prefix purged, no tags (a non-entry is let through too)
            try:
                _, _, _, created, _, _, _, its_tags, _ = parse_header(value)
            except InvalidEntry:
                continue
            if any(keys[i].startswith(p) and created <= at + self.purge_skew_ms for at, p in prefixes):
                values[i] = None
            elif its_tags:
                tagged.append((i, created, its_tags))
        if not tagged:
            return values
        tags = sorted({t for _, _, ts in tagged for t in ts})
        records = self._get_stored([self._tag_key(t) for t in tags])
        purged_at: dict[str, int] = {}
        for tag, record in zip(tags, records, strict=True):
            if record is not None and record.strip().isdigit():
                purged_at[tag] = int(record.strip())
        for i, created, entry_tags_ in tagged:
            if any(t in purged_at and created <= purged_at[t] + self.purge_skew_ms for t in entry_tags_):
                values[i] = None
        return values

    def _record_prefix_purge(self, prefix: str) -> None:
        if not self.prefix_purge:
            raise Unsupported(BACKEND, "purge by prefix with prefix_purge=false")
        key = self._prefix_list_key()
        for _ in range(50):
            now = now_ms()
            current = self._get_with_cas(key)
            lines = _parse_prefix_list(current[0]) if current else []
            lines = [(at, p) for at, p in lines if now - at <= self.purge_retention_ms and p != prefix]
            lines.append((now, prefix))
            lines = lines[-MAX_PREFIX_LINES:]
            text = "".join(f"{at} {p}\n" for at, p in lines).encode()
            mode = f"C{current[1]}" if current else "ME"
            if self._set_with(key, text, 0, mode):
                return
        raise ServerError(BACKEND, "the prefix list kept changing under 50 attempts to update it", key)

    # ------------------------------------------------------------------------------------------------ Store

    def max_value_bytes(self) -> int:
        return self.max_item - ITEM_OVERHEAD - 250

    def server_errors(self) -> list[tuple[str, int]]:
        return [(s.name, s.health.errors) for s in self.servers]

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        stored = [checked_key(BACKEND, self.prefix, k) for k in keys]
        asked = [*stored, self._prefix_list_key()] if self.prefix_purge else stored
        values = self._get_stored(asked)
        prefix_list = values.pop() if self.prefix_purge else None
        return self._drop_purged(keys, values, prefix_list)

    def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """`set_many([(key, value)], ttl)`, without the batch."""
        stored = checked_key(BACKEND, self.prefix, key)
        self._check_size(stored, value)
        now = time_ns() // 1_000_000
        exptime = memcached_exptime(expires_at_ms(value, ttl, now), now)
        request = _delete(stored) if exptime < 0 else _set(stored, value, exptime, "")
        server, reply = self._exchange(stored, request, _SET_REPLIES)
        if reply.code == "ERROR":
            raise self._reply_error(server, reply.message)
        if reply.code not in ("HD", "NS", "NF", "EX"):
            raise self._reply_error(server, f"unexpected reply {reply.code}")

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        if not items:
            return
        now = now_ms()
        batch = []
        for key, value in items:
            stored = checked_key(BACKEND, self.prefix, key)
            self._check_size(stored, value)
            batch.append((stored, value, memcached_exptime(expires_at_ms(value, ttl, now), now)))
        self._set_stored(batch, "")

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        stored = checked_key(BACKEND, self.prefix, key)
        self._check_size(stored, value)
        now = now_ms()
        exptime = memcached_exptime(expires_at_ms(value, ttl, now), now)
        if exptime < 0:
            return False
        return self._set_with(stored, value, exptime, "ME")

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        stored = checked_key(BACKEND, self.prefix, key)
        mode = "MD" if delta < 0 else "MI"
        request = f"ma {stored} v D{abs(delta)} {mode}"
        if create:
            now = now_ms()
            ms = ttl_ms(ttl)
            exptime = max(memcached_exptime(None if ms is None else now + ms, now), 0)
            request += f" N{exptime} J{max(delta, 0)}"
        server, reply = self._exchange(stored, (request + "\r\n").encode(), _INCR_REPLIES)
        if reply.code == "VA":
            text = reply.data.decode("ascii", "replace").strip()
            if not text.isdigit():
                raise self._reply_error(server, f"counter {text!r}")
            return min(int(text), (1 << 63) - 1)
        if reply.code in ("NF", "EN"):
            return None
        if reply.code == "ERROR" and "non-numeric" in reply.message:
            raise NotACounter(BACKEND, key)
        raise self._reply_error(server, reply.message or f"unexpected reply {reply.code}")

    def delete_if(self, key: str, expected: bytes) -> bool:
        stored = checked_key(BACKEND, self.prefix, key)
        current = self._get_with_cas(stored)
        if current is None or current[0] != bytes(expected):
            return False
        _, reply = self._exchange(stored, _delete(stored, f"C{current[1]}"), _DELETE_REPLIES)
        return reply.code == "HD"

    def delete_many(self, keys: Sequence[str]) -> int:
        stored = [checked_key(BACKEND, self.prefix, k) for k in keys]
        replies = self._batched(stored, lambda items: b"".join(_delete(stored[i]) for i in items), _DELETE_REPLIES)
        return sum(reply.code == "HD" for _, reply, _ in replies)

    def clear(self) -> None:
        if self.prefix:
            self.purge_prefix("")
        else:
            self._on_every_server(b"flush_all\r\n", frozenset({"OK"}))

    def purge_prefix(self, prefix: str) -> None:
        """Records the purge (spec/STORES.md §4.4); records cannot count what they hide, so the answer is None."""
        self._record_prefix_purge(checked_prefix(BACKEND, "", prefix))

    def purge_tag(self, tag: str) -> None:
        """Records the purge of `tag`; None, as for prefixes."""
        self._set_with(self._tag_key(check_tag(BACKEND, tag)), str(now_ms()).encode(), 0, "")

    def stats(self) -> StoreStats:
        stats = StoreStats()
        names = {
            "get_hits": "hits",
            "get_misses": "misses",
            "total_items": "inserts",
            "evictions": "evictions",
            "expired_unfetched": "expirations",
            "curr_items": "entries",
            "bytes": "bytes",
            "limit_maxbytes": "capacity_bytes",
        }
        for replies in self._on_every_server(b"stats\r\n", frozenset({"STAT", "END"})):
            for reply in replies:
                if reply.code == "STAT" and len(reply.flags) >= 2 and reply.flags[0] in names:
                    field = names[reply.flags[0]]
                    value = int(reply.flags[1]) if reply.flags[1].isdigit() else 0
                    setattr(stats, field, getattr(stats, field) + value)
        return stats

    def close(self) -> None:
        for server in self.servers:
            server.close()


def _parse_prefix_list(data: bytes) -> list[tuple[int, str]]:
    """`<ms> <prefix>\\n` lines; malformed lines are skipped."""
    lines = []
    for line in data.decode("utf-8", "replace").splitlines():
        at, sep, prefix = line.partition(" ")
        if sep and at.isdigit():
            lines.append((int(at), prefix))
    return lines
