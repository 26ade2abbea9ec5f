"""`redis://[user:pass@]host:6379/0` and `redis+cluster://h1:7000,h2:7001` (spec/STORES.md §5), on larder's own
RESP client (resp.py, redis_cluster.py, wire.py).

Why not redis-py, the ecosystem's client: spec/STORES.md §2 asks every remote store to bound what a server sends,
and redis-py cannot be bounded from outside. Its `timeout` is a limit per socket read (a server dripping a byte
every 100 ms held a get for 202 s), it retries and reconnects on its own, its Cluster client sleeps and reinitialises
between attempts, and its reply parser reads any announced bulk length (a 1 GiB reply took the process to 2.1 GB),
any line length, and recurses once per array level (a deeply nested reply ends in a RecursionError, not in the
store's error). Bounding it would mean replacing its parser and socket buffer (private modules) and disabling its
retries, leaving little of the library but its connection bookkeeping. The store needs a small part of Redis (GET,
MGET, SET, DEL, EVALSHA, SCAN, SSCAN, FLUSHDB, DBSIZE, INFO, AUTH, SELECT, CLUSTER SLOTS), so the client is written
here: a total deadline for every request (connecting and the handshake included), bulk strings refused above
`max_value` when announced, arrays nested at most 8 deep and no longer than the command can answer, lines of 8 KiB;
anything else is a failure of the server (toward ejection), its connection closed, raised as the store's
`ServerError`/`StoreTimeout`. Cluster: slot map from CLUSTER SLOTS, MOVED/ASK followed, per-master pipelines.

What larder adds on top is the same as `larder-redis`: PXAT expiry from the entry header, tag sets kept as long as
their longest-lived member, the three scripts of spec/redis loaded as they are (scripts.py; by SHA, EVAL when the
server lacks them), SCAN purges on every master, and a standalone server's ejection after `failures`.
"""

from __future__ import annotations

from collections.abc import Sequence
from time import monotonic
from typing import Any, Final

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
    check_tag,
    checked_key,
    checked_prefix,
    entry_tags,
    expires_at_ms,
    internal_key,
    now_ms,
    refused_why,
    ttl_ms,
)
from .redis_cluster import Cluster, Request, Standalone
from .resp import ErrorReply, Limits, Node, pack
from .scripts import Script, load
from .url import StoreUrl
from .wire import MAX_LINE, WireFailure

DELETE_BATCH: Final = 500
SCAN_COUNT: Final = 1000
#: The default `max_value`: the longest value read back (the format's default max_size).
DEFAULT_MAX_VALUE: Final = 64 << 20
#: A reply that is a status, an integer or nil.
_SMALL: Final = Limits(max_bulk=1024, max_bytes=1024, max_elements=0)
#: INFO's text.
_INFO: Final = Limits(max_bulk=1 << 20, max_bytes=1 << 20, max_elements=0)
#: A SCAN/SSCAN page, elements of nested arrays counted: a cursor and up to about COUNT keys (a little more while the
#: server rehashes; a small set comes whole, and is at most 512 members): COUNT + 1,024 (spec/STORES.md §2).
_SCAN_ELEMENTS: Final = SCAN_COUNT + 1024
#: A SCAN/SSCAN page's keys: larder's are at most 250 bytes (a page of 1,000 is about 270 KB); the rest is room for
#: keys other programs wrote under the pattern, each at most a line's length.
_SCAN: Final = Limits(max_bulk=MAX_LINE, max_bytes=4 << 20, max_elements=_SCAN_ELEMENTS)
_GET: Final = b"*2\r\n$3\r\nGET\r\n"


def glob_prefix(prefix: str) -> str:
    """`prefix` with SCAN's glob characters escaped, then `*`."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"


class _Script:
    """A script of spec/redis (scripts.py) sent by SHA (EVALSHA), or whole (EVAL) to a server that lacks it."""

    def __init__(self, name: str) -> None:
        self.script = Script(name)

    def by_sha(self, key: bytes, *args: bytes | str | int) -> bytes:
        return pack("EVALSHA", self.script.sha, 1, key, *args)

    def whole(self, key: bytes, *args: bytes | str | int) -> bytes:
        return pack("EVAL", self.script.source, 1, key, *args)


_DELETE_IF: Final = _Script("delete_if")
_INCR: Final = _Script("incr")
_TAG: Final = _Script("tag")


class RedisStore(Store):
    """One Redis server or a Redis Cluster. Thread-safe."""

    def __init__(
        self,
        hosts: Sequence[tuple[str, int]],
        *,
        cluster: bool = False,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        prefix: str = "",
        timeout_ms: int = 250,
        connect_timeout_ms: int = 500,
        pool: int = 4,
        failures: int = 2,
        retry_after_ms: int = 1000,
        max_value: int = DEFAULT_MAX_VALUE,
    ) -> None:
        if not hosts:
            raise ValueError("redis needs a host")
        load("incr")  # the scripts, read now: an installation without them fails here, not on a first write
        self.backend = "redis-cluster" if cluster else "redis"
        self.cluster = cluster
        self.prefix = prefix
        self.timeout = timeout_ms / 1000
        self.timeout_ms = timeout_ms
        self.max_value = max_value
        self.server = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts)
        self.health = Health()
        self.policy = FailurePolicy(failures, retry_after_ms)
        self._value = Limits(max_bulk=max_value, max_bytes=max_value, max_elements=0)

        def make_node(host: str, port: int) -> Node:
            return Node(
                host,
                port,
                pool=pool,
                connect_timeout=connect_timeout_ms / 1000,
                username=username,
                password=password,
                db=0 if cluster else db,
            )

        self._router: Cluster | Standalone = Cluster(hosts, make_node) if cluster else Standalone(make_node(*hosts[0]))

    @classmethod
    def from_url(cls, url: StoreUrl) -> RedisStore:
        cluster = url.scheme == "redis+cluster"
        hosts = url.require_hosts()
        db_text = url.path.lstrip("/")
        if db_text and not (db_text.isdigit() and int(db_text) <= 1_000_000):
            raise url.error(f"the path {url.path!r} must be a database number (/0)")
        db = int(db_text or "0")
        if cluster and db != 0:
            raise url.error("a Redis Cluster has only database 0")
        if not cluster and len(hosts) != 1:
            raise url.error("redis:// takes one host; use redis+cluster:// for a Cluster")
        prefix = url.take("prefix") or ""
        timeout = url.take_duration_ms("timeout", 250)
        connect_timeout = url.take_duration_ms("connect_timeout", 500)
        pool = url.take_number("pool", 4, 1, 64)
        failures = url.take_number("failures", 2, 1, 1000)
        retry_after = url.take_duration_ms("retry_after", 1000)
        max_value = url.take_size("max_value", DEFAULT_MAX_VALUE)
        url.finish()
        if max_value < 1024:
            raise url.error("max_value must be at least 1K")
        return cls(
            [(h.host, h.port if h.port is not None else 6379) for h in hosts],
            cluster=cluster,
            db=db,
            username=url.username,
            password=url.password,
            prefix=prefix,
            timeout_ms=timeout,
            connect_timeout_ms=connect_timeout,
            pool=pool,
            failures=failures,
            retry_after_ms=retry_after,
            max_value=max_value,
        )

    # ------------------------------------------------------------------------------------------- plumbing

    def _admit(self) -> None:
        """A standalone server that failed `failures` times in a row is refused at once for `retry_after` (Cluster
        nodes are not ejected: the cluster fails over)."""
        if not self.cluster and not self.health.admits(now_ms(), self.policy):
            self.health.count_error()
            raise ServerError(self.backend, refused_why(self.health), self.server)

    def _failed(self, failure: WireFailure) -> StoreError:
        """Counts `failure` against the server and turns it into the store's error."""
        if self.cluster:
            self.health.count_error()
        else:
            self.health.record(False, self.policy, now_ms())
        server = failure.server or self.server
        if failure.timeout:
            return StoreTimeout(self.backend, server, self.timeout_ms)
        return ServerError(self.backend, str(failure), server)

    def _run(self, requests: Sequence[Request], fallbacks: Sequence[bytes | None] = ()) -> list[Any]:
        """One batch within `timeout`; scripts the server lacks (NOSCRIPT) are sent again whole (`fallbacks`)."""
        self._admit()
        try:
            replies = self._router.run(requests, monotonic() + self.timeout)
            missing = [
                i
                for i, reply in enumerate(replies)
                if isinstance(reply, ErrorReply)
                and reply.message.startswith("NOSCRIPT")
                and i < len(fallbacks)
                and fallbacks[i] is not None
            ]
            if missing:
                again = [(requests[i][0], fallbacks[i] or b"", requests[i][2]) for i in missing]
                for i, reply in zip(missing, self._router.run(again, monotonic() + self.timeout), strict=True):
                    replies[i] = reply
        except WireFailure as failure:
            raise self._failed(failure) from None
        self.health.record(True, self.policy)
        return replies

    def _run_on(self, node: Node, command: bytes, limits: Limits) -> Any:
        """One command to one server (SCAN, FLUSHDB, DBSIZE on each master)."""
        self._admit()
        try:
            reply = node.call([command], [limits], monotonic() + self.timeout)[0]
        except WireFailure as failure:
            raise self._failed(failure) from None
        self.health.record(True, self.policy)
        return self._answer(reply)

    def _masters(self) -> list[Node]:
        try:
            return self._router.masters(monotonic() + self.timeout)
        except WireFailure as failure:
            raise self._failed(failure) from None

    def _answer(self, reply: Any) -> Any:
        """`reply`, unless it is an error answer (raised as the store's error; the server is fine)."""
        if isinstance(reply, ErrorReply):
            raise ServerError(self.backend, reply.message[:500], self.server)
        return reply

    def _malformed(self, command: str, reply: Any) -> StoreError:
        """A reply of the wrong type for its command: a failure of the server."""
        failure = WireFailure(f"malformed reply to {command}: {type(reply).__name__}")
        return self._failed(failure)

    def _int(self, command: str, reply: Any) -> int:
        reply = self._answer(reply)
        if type(reply) is not int:
            raise self._malformed(command, reply)
        return reply

    def _key(self, key: str) -> bytes:
        return checked_key(self.backend, self.prefix, key).encode("utf-8")

    def _write(self, items: Sequence[tuple[str, bytes]], ttl: float | None, nx: bool) -> bool:
        now = now_ms()
        requests: list[Request] = []
        tagged: list[tuple[bytes, int, tuple[str, ...]]] = []
        for key, value in items:
            stored = self._key(key)
            if len(value) > self.max_value:
                raise TooLarge(self.backend, key, len(value), self.max_value)
            expiry = expires_at_ms(value, ttl, now)
            if expiry is not None and expiry <= now:
                if nx:
                    return False
                requests.append((stored, pack("DEL", stored), _SMALL))
                continue
            command: list[bytes | str | int] = ["SET", stored, bytes(value)]
            if expiry is not None:
                command += ["PXAT", expiry]
            if nx:
                command.append("NX")
            requests.append((stored, pack(*command), _SMALL))
            tags = entry_tags(value)
            if tags:
                tagged.append((stored, expiry or 0, tags))
        if not requests:
            return True
        tag_requests: list[Request] = []
        fallbacks: list[bytes | None] = [None] * len(requests)
        for member, at, tags in tagged:
            for tag in tags:
                tag_key = internal_key(self.prefix, "tag", tag).encode("utf-8")
                tag_requests.append((tag_key, _TAG.by_sha(tag_key, member, at), _SMALL))
                fallbacks.append(_TAG.whole(tag_key, member, at))
        if nx:
            reply = self._answer(self._run(requests)[0])
            if reply is None:
                return False
            if reply != b"OK":
                raise self._malformed("SET", reply)
            if tag_requests:
                for reply in self._run(tag_requests, fallbacks[len(requests) :]):
                    self._answer(reply)
            return True
        for reply in self._run(requests + tag_requests, fallbacks):
            self._answer(reply)
        return True

    def _delete_stored(self, keys: Sequence[bytes]) -> int:
        deleted = 0
        if self.cluster:
            for at in range(0, len(keys), DELETE_BATCH):
                chunk = keys[at : at + DELETE_BATCH]
                deleted += sum(self._int("DEL", r) for r in self._run([(k, pack("DEL", k), _SMALL) for k in chunk]))
            return deleted
        for at in range(0, len(keys), DELETE_BATCH):
            chunk = keys[at : at + DELETE_BATCH]
            deleted += self._int("DEL", self._run([(chunk[0], pack("DEL", *chunk), _SMALL)])[0])
        return deleted

    def _scan_pages(self, first: bytes, run: Any) -> list[bytes]:
        """Every key a SCAN-like command finds, page by page; `run(cursor)` sends one page's command."""
        found: list[bytes] = []
        cursor = b"0"
        while True:
            reply = self._answer(run(cursor))
            if not (
                isinstance(reply, list)
                and len(reply) == 2
                and isinstance(reply[0], bytes)
                and reply[0].isdigit()
                and isinstance(reply[1], list)
                and all(isinstance(k, bytes) for k in reply[1])
            ):
                raise self._malformed(first.decode(), reply)
            cursor = reply[0]
            found.extend(reply[1])
            if cursor == b"0":
                return found

    # --------------------------------------------------------------------------------------------- Store

    def max_value_bytes(self) -> int:
        return self.max_value

    def server_errors(self) -> list[tuple[str, int]]:
        return [(self.server, self.health.errors)]

    def get(self, key: str) -> bytes | None:
        stored = self._key(key)
        command = _GET + b"$%d\r\n%s\r\n" % (len(stored), stored)
        reply = self._answer(self._run([(stored, command, self._value)])[0])
        if reply is not None and type(reply) is not bytes:
            raise self._malformed("GET", reply)
        return reply

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        stored = [self._key(k) for k in keys]
        if self.cluster:
            replies = [self._answer(r) for r in self._run([(k, _GET + pack(k)[4:], self._value) for k in stored])]
        else:
            limits = Limits(self.max_value, self.max_value * len(stored), len(stored))
            reply = self._answer(self._run([(stored[0], pack("MGET", *stored), limits)])[0])
            if not isinstance(reply, list) or len(reply) != len(stored):
                raise self._malformed("MGET", reply)
            replies = reply
        if not all(r is None or type(r) is bytes for r in replies):
            raise self._malformed("GET", replies)
        return replies

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        if items:
            self._write(items, ttl, False)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        return self._write([(key, value)], ttl, True)

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        stored = self._key(key)
        ms = ttl_ms(ttl)
        args = (delta, 1 if create else 0, 0 if ms is None else max(ms, 1))
        reply = self._run([(stored, _INCR.by_sha(stored, *args), _SMALL)], [_INCR.whole(stored, *args)])[0]
        if isinstance(reply, ErrorReply) and "not an integer" in reply.message:
            raise NotACounter(self.backend, key)
        reply = self._answer(reply)
        if reply is not None and type(reply) is not int:
            raise self._malformed("INCR", reply)
        return reply

    def delete_if(self, key: str, expected: bytes) -> bool:
        stored = self._key(key)
        args = (stored, bytes(expected))
        reply = self._run([(stored, _DELETE_IF.by_sha(*args), _SMALL)], [_DELETE_IF.whole(*args)])[0]
        return self._int("EVAL", reply) == 1

    def delete_many(self, keys: Sequence[str]) -> int:
        return self._delete_stored([self._key(k) for k in keys]) if keys else 0

    def clear(self) -> None:
        if self.prefix:
            self.purge_prefix("")
            return
        for node in self._masters():
            self._run_on(node, pack("FLUSHDB"), _SMALL)

    def purge_prefix(self, prefix: str) -> int:
        pattern = glob_prefix(checked_prefix(self.backend, self.prefix, prefix))
        found: list[bytes] = []
        for node in self._masters():
            found.extend(
                self._scan_pages(
                    b"SCAN",
                    lambda cursor, n=node: self._run_on(
                        n, pack("SCAN", cursor, "MATCH", pattern, "COUNT", SCAN_COUNT), _SCAN
                    ),
                )
            )
        return self._delete_stored(list(dict.fromkeys(found)))

    def purge_tag(self, tag: str) -> int:
        tag_key = internal_key(self.prefix, "tag", check_tag(self.backend, tag)).encode("utf-8")
        members = self._scan_pages(
            b"SSCAN",
            lambda cursor: self._run([(tag_key, pack("SSCAN", tag_key, cursor, "COUNT", SCAN_COUNT), _SCAN)])[0],
        )
        deleted = self._delete_stored(list(dict.fromkeys(members)))
        self._delete_stored([tag_key])
        return deleted

    def stats(self) -> StoreStats:
        stats = StoreStats()
        for node in self._masters():
            stats.entries += self._int("DBSIZE", self._run_on(node, pack("DBSIZE"), _SMALL))
        if self.cluster:
            return stats
        info = self._run_on(self._masters()[0], pack("INFO"), _INFO)
        if not isinstance(info, bytes):
            raise self._malformed("INFO", info)
        fields = dict(line.split(":", 1) for line in info.decode("utf-8", "replace").splitlines() if ":" in line[:64])

        def number(name: str) -> int:
            text = fields.get(name, "0").strip()
            return int(text) if text.isdigit() and len(text) < 20 else 0

        stats.hits = number("keyspace_hits")
        stats.misses = number("keyspace_misses")
        stats.evictions = number("evicted_keys")
        stats.expirations = number("expired_keys")
        stats.bytes = number("used_memory")
        stats.capacity_bytes = number("maxmemory")
        return stats

    def close(self) -> None:
        self._router.close()
