"""`redis://[user:pass@]host:6379/0` and `redis+cluster://h1:7000,h2:7001` (spec/STORES.md §5), on redis-py.

redis-py is the ecosystem's maintained client: connection pooling with socket timeouts, a Cluster client that
follows slot moves and failovers, and Lua scripts by SHA (EVALSHA with a fallback to EVAL). What larder adds is the
same as `larder-redis`: PXAT expiry from the entry header, tag sets kept as long as their longest-lived member, the
same three scripts, SCAN purges on every master, and a standalone server's ejection after `failures`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import redis
import redis.cluster
import redis.exceptions

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
    entry_tags,
    expires_at_ms,
    internal_key,
    now_ms,
    stored_key,
    ttl_ms,
)
from .url import StoreUrl

T = TypeVar("T")

DELETE_IF: Final = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
INCR: Final = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[2] == '0' then return false end
  redis.call('SET', KEYS[1], ARGV[1])
  if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  return tonumber(ARGV[1])
end
return redis.call('INCRBY', KEYS[1], ARGV[1])"""
TAG: Final = """
redis.call('SADD', KEYS[1], ARGV[1])
local at = tonumber(ARGV[2])
if at == 0 then redis.call('PERSIST', KEYS[1]) return 1 end
local current = redis.call('PEXPIRETIME', KEYS[1])
if current == -1 and redis.call('SCARD', KEYS[1]) > 1 then return 1 end
if current == -1 or current < at then redis.call('PEXPIREAT', KEYS[1], at) end
return 1"""
DELETE_BATCH: Final = 500
MAX_VALUE: Final = 512 << 20


def glob_prefix(prefix: str) -> str:
    """`prefix` with SCAN's glob characters escaped, then `*`."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"


class RedisStore(Store):
    """One Redis server or a Redis Cluster. Thread-safe (redis-py's pools are)."""

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
    ) -> None:
        self.backend = "redis-cluster" if cluster else "redis"
        self.cluster = cluster
        self.prefix = prefix
        self.timeout_ms = timeout_ms
        self.server = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts)
        self.health = Health()
        self.policy = FailurePolicy(failures, retry_after_ms)
        common: dict[str, Any] = {
            "username": username,
            "password": password,
            "socket_timeout": timeout_ms / 1000,
            "socket_connect_timeout": connect_timeout_ms / 1000,
        }
        self.client: Any
        if cluster:
            nodes = [redis.cluster.ClusterNode(h, p) for h, p in hosts]  # type: ignore[no-untyped-call]
            self.client = redis.cluster.RedisCluster(
                startup_nodes=nodes, max_connections=pool * 16, require_full_coverage=True, **common
            )
        else:
            host, port = hosts[0]
            connection_pool = redis.BlockingConnectionPool(  # type: ignore[no-untyped-call]
                host=host, port=port, db=db, max_connections=pool, timeout=connect_timeout_ms / 1000, **common
            )
            self.client = redis.Redis(connection_pool=connection_pool)
        self._delete_if = self.client.register_script(DELETE_IF)
        self._incr = self.client.register_script(INCR)
        self._tag = self.client.register_script(TAG)

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
        url.finish()
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
        )

    # ------------------------------------------------------------------------------------------- plumbing

    def _call(self, f: Callable[[], T]) -> T:
        """Runs `f` within the store's bounds, naming the server in any error; a standalone server that fails
        `failures` times in a row is refused at once for `retry_after` (Cluster nodes are not ejected)."""
        if not self.cluster and not self.health.admits(now_ms()):
            self.health.count_error()
            raise ServerError(self.backend, "ejected after failures; retrying after retry_after", self.server)
        try:
            result = f()
        except redis.exceptions.TimeoutError:
            self._failed()
            raise StoreTimeout(self.backend, self.server, self.timeout_ms) from None
        except (redis.exceptions.ConnectionError, redis.exceptions.ClusterDownError, OSError) as e:
            self._failed()
            raise ServerError(self.backend, str(e) or type(e).__name__, self.server) from None
        except redis.exceptions.RedisError as e:
            # An error answer: the server is fine.
            self.health.record(True, self.policy, now_ms())
            raise ServerError(self.backend, str(e), self.server) from None
        self.health.record(True, self.policy, now_ms())
        return result

    def _failed(self) -> None:
        if self.cluster:
            self.health.count_error()
        else:
            self.health.record(False, self.policy, now_ms())

    def _key(self, key: str) -> str:
        return stored_key(self.prefix, key)

    def _write(self, items: Sequence[tuple[str, bytes]], ttl: float | None, nx: bool) -> bool:
        now = now_ms()
        commands: list[tuple[Any, ...]] = []
        tagged: list[tuple[str, int, tuple[str, ...]]] = []
        for key, value in items:
            if len(value) > MAX_VALUE:
                raise TooLarge(self.backend, key, len(value), MAX_VALUE)
            stored = self._key(key)
            expiry = expires_at_ms(value, ttl, now)
            if expiry is not None and expiry <= now:
                if nx:
                    return False
                commands.append(("DEL", stored))
                continue
            command: tuple[Any, ...] = ("SET", stored, bytes(value))
            if expiry is not None:
                command += ("PXAT", expiry)
            if nx:
                command += ("NX",)
            commands.append(command)
            tags = entry_tags(value)
            if tags:
                tagged.append((stored, expiry or 0, tags))
        replies = self._run_all(commands)
        stored_any = not nx or (bool(replies) and replies[0] is not None)
        if stored_any:
            for member, at, tags in tagged:
                for tag in tags:
                    tag_key = internal_key(self.prefix, "tag", tag)
                    self._call(functools.partial(self._tag, keys=[tag_key], args=[member, at]))
        return stored_any

    def _run_all(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        if not commands:
            return []
        if self.cluster:
            return [self._call(functools.partial(self.client.execute_command, *c)) for c in commands]

        def pipeline() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            result: list[Any] = pipe.execute()
            return result

        return self._call(pipeline)

    def _delete_stored(self, keys: Sequence[str | bytes]) -> int:
        deleted = 0
        for at in range(0, len(keys), DELETE_BATCH):
            chunk = keys[at : at + DELETE_BATCH]
            deleted += int(self._call(functools.partial(self.client.delete, *chunk)))
        return deleted

    def _scan(self, pattern: str) -> list[bytes]:
        if not self.cluster:
            return self._call(lambda: list(self.client.scan_iter(match=pattern, count=1000)))
        found: list[bytes] = []
        for node in self._call(lambda: self.client.get_primaries()):
            node_client = self.client.get_redis_connection(node)
            found.extend(self._call(functools.partial(_scan_all, node_client, pattern)))
        return found

    # --------------------------------------------------------------------------------------------- Store

    def max_value_bytes(self) -> int:
        return MAX_VALUE

    def server_errors(self) -> list[tuple[str, int]]:
        return [(self.server, self.health.errors)]

    def get(self, key: str) -> bytes | None:
        value: bytes | None = self._call(lambda: self.client.get(self._key(key)))
        return value

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        stored = [self._key(k) for k in keys]
        if self.cluster:
            return list(self._call(lambda: self.client.mget_nonatomic(stored)))
        return list(self._call(lambda: self.client.mget(stored)))

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        if items:
            self._write(items, ttl, False)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        return self._write([(key, value)], ttl, True)

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        stored = self._key(key)
        ms = ttl_ms(ttl)
        args = [delta, 1 if create else 0, 0 if ms is None else max(ms, 1)]
        try:
            result = self._call(lambda: self._incr(keys=[stored], args=args))
        except StoreError as e:
            if "not an integer" in str(e):
                raise NotACounter(self.backend, key) from None
            raise
        return None if result is None else int(result)

    def delete_if(self, key: str, expected: bytes) -> bool:
        stored = self._key(key)
        return int(self._call(lambda: self._delete_if(keys=[stored], args=[bytes(expected)]))) == 1

    def delete_many(self, keys: Sequence[str]) -> int:
        return self._delete_stored([self._key(k) for k in keys]) if keys else 0

    def clear(self) -> None:
        if self.prefix:
            self.purge_prefix("")
        elif self.cluster:
            for node in self._call(lambda: self.client.get_primaries()):
                node_client = self.client.get_redis_connection(node)
                self._call(node_client.flushdb)
        else:
            self._call(lambda: self.client.flushdb())

    def purge_prefix(self, prefix: str) -> int:
        return self._delete_stored(self._scan(glob_prefix(stored_key(self.prefix, prefix))))

    def purge_tag(self, tag: str) -> int:
        tag_key = internal_key(self.prefix, "tag", tag)
        members: list[bytes] = self._call(lambda: list(self.client.sscan_iter(tag_key, count=1000)))
        deleted = self._delete_stored(members)
        self._delete_stored([tag_key])
        return deleted

    def stats(self) -> StoreStats:
        stats = StoreStats()
        if self.cluster:
            sizes = self._call(lambda: self.client.dbsize(target_nodes=redis.cluster.RedisCluster.PRIMARIES))
            stats.entries = sum(sizes.values()) if isinstance(sizes, dict) else int(sizes)
            return stats
        stats.entries = int(self._call(lambda: self.client.dbsize()))
        info: dict[str, Any] = self._call(lambda: self.client.info())
        stats.hits = int(info.get("keyspace_hits", 0))
        stats.misses = int(info.get("keyspace_misses", 0))
        stats.evictions = int(info.get("evicted_keys", 0))
        stats.expirations = int(info.get("expired_keys", 0))
        stats.bytes = int(info.get("used_memory", 0))
        stats.capacity_bytes = int(info.get("maxmemory", 0))
        return stats

    def close(self) -> None:
        self.client.close()


def _scan_all(client: Any, pattern: str) -> list[bytes]:
    """Every key of one server matching `pattern`."""
    return list(client.scan_iter(match=pattern, count=1000))
