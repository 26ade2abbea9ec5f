"""`sqlite:///path/cache.db` and `postgres://user@host:5432/db` (spec/STORES.md §6), mirroring `larder-sql`.

One table after Rails' Solid Cache (`larder_entries`: key hash, key, value, sizes and times) and one tag index, the
same statements on both databases. SQLite comes from the standard library (`sqlite3`), in WAL mode with a 5 s busy
timeout so several processes share the file; one connection per thread. PostgreSQL uses psycopg 3 (the maintained
driver, binary wheels, real server-side parameters), with a small pool of `pool` connections and
`statement_timeout` set to the store's `timeout`.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar

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
    now_ms,
    parse_counter,
    refused_why,
    saturate,
)
from .url import StoreUrl

T = TypeVar("T")

SCHEMA_VERSION: Final = 1
SWEEP_EVERY: Final = 100
SWEEP_ROWS: Final = 1000
MAX_VALUE: Final = 512 << 20
_TABLE_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,50}")


def key_hash(key: str) -> int:
    """The first 8 bytes of SHA-256(key) as a big-endian signed integer (Solid Cache's key hash)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big", signed=True)


class SqlStore(Store):
    """SQLite or PostgreSQL. Thread-safe."""

    def __init__(
        self,
        dialect: str,
        target: str,
        *,
        prefix: str = "",
        table: str = "larder_entries",
        timeout_ms: int = 250,
        connect_timeout_ms: int = 500,
        pool: int = 8,
        failures: int = 2,
        retry_after_ms: int = 1000,
        server: str | None = None,
    ) -> None:
        if not _TABLE_NAME.fullmatch(table):
            raise ValueError(f"table={table!r}: lowercase letters, digits and _ only")
        self.backend = dialect
        self.dialect = dialect
        self.target = target
        self.server = server or target
        self.prefix = prefix
        self.entries, self.tags, self.schema = table, table + "_tags", table + "_schema"
        self.timeout_ms = timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.health = Health()
        self.policy = FailurePolicy(failures, retry_after_ms)
        self._local = threading.local()
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(pool)
        self._writes = 0
        self._schema_ready = False
        if dialect == "sqlite":
            self._ensure_schema()

    @classmethod
    def from_url(cls, url: StoreUrl) -> SqlStore:
        dialect = "sqlite" if url.scheme == "sqlite" else "postgres"
        prefix = url.take("prefix") or ""
        table = url.take("table") or "larder_entries"
        if not _TABLE_NAME.fullmatch(table):
            raise url.error(f"table={table!r}: lowercase letters, digits and _ only")
        if dialect == "postgres":
            timeout = url.take_duration_ms("timeout", 250)
            connect_timeout = url.take_duration_ms("connect_timeout", 500)
            pool = url.take_number("pool", 8, 1, 256)
            failures = url.take_number("failures", 2, 1, 1000)
            retry_after = url.take_duration_ms("retry_after", 1000)
            url.finish()
            hosts = url.require_hosts()
            if len(hosts) != 1:
                raise url.error("postgres:// takes one host")
            address = hosts[0].address(5432)
            params: dict[str, Any] = {
                "host": hosts[0].host,
                "port": hosts[0].port or 5432,
                "dbname": url.path.lstrip("/") or None,
                "user": url.username,
                "password": url.password,
            }
            store = cls(
                "postgres",
                "",
                prefix=prefix,
                table=table,
                timeout_ms=timeout,
                connect_timeout_ms=connect_timeout,
                pool=pool,
                failures=failures,
                retry_after_ms=retry_after,
                server=address,
            )
            store._pg_params = {k: v for k, v in params.items() if v is not None}
            return store
        url.finish()
        url.no_hosts()
        if len(url.path) < 2:
            raise url.error("sqlite:// needs a file: sqlite:///var/lib/larder/cache.db")
        try:
            return cls("sqlite", url.path, prefix=prefix, table=table, server=url.path)
        except sqlite3.Error as e:
            raise url.error(f"cannot open {url.path}: {e}") from None

    # ------------------------------------------------------------------------------------------ connections

    _pg_params: dict[str, Any]

    def _sqlite(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.target, timeout=5.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=5000")
            self._local.conn = conn
            with self._lock:
                self._idle.append(conn)  # remembered so that close() can close every thread's connection
        return conn

    def _pg_connect(self) -> Any:
        import psycopg

        # client_encoding UTF8 whatever PGCLIENTENCODING or the database's encoding says: a key goes on the wire as
        # the UTF-8 its check read (spec/STORES.md §2), never as latin1 (psycopg encodes text in the connection's
        # encoding) nor as SQL_ASCII's undecoded bytes (which read back as bytes, not the str that was written).
        return psycopg.connect(
            **self._pg_params,
            client_encoding="UTF8",
            connect_timeout=max(1, math.ceil(self.connect_timeout_ms / 1000)),
            options=f"-c statement_timeout={self.timeout_ms}",
            autocommit=True,
        )

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self.dialect == "sqlite":
            yield self._sqlite()
            return
        if not self._slots.acquire(timeout=self.connect_timeout_ms / 1000):
            raise StoreTimeout(self.backend, self.server, self.connect_timeout_ms)
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._pg_connect()
            try:
                yield conn
            except BaseException:
                conn.close()
                raise
            if conn.closed or conn.info.transaction_status != 0:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
        finally:
            self._slots.release()

    def _run(self, work: Callable[[Any], T]) -> T:
        """Runs `work(connection)`, naming the server in any error; a PostgreSQL server that fails `failures` times
        in a row is refused at once for `retry_after`."""
        if self.dialect == "sqlite":
            try:
                with self._connection() as conn:
                    return work(conn)
            except sqlite3.Error as e:
                raise ServerError(self.backend, str(e), self.server) from None
        import psycopg

        if not self.health.admits(now_ms(), self.policy):
            self.health.count_error()
            raise ServerError(self.backend, refused_why(self.health), self.server)
        try:
            if not self._schema_ready:
                self._ensure_schema_pg()
            with self._connection() as conn:
                result = work(conn)
        except psycopg.errors.QueryCanceled:
            self.health.record(False, self.policy, now_ms())
            raise StoreTimeout(self.backend, self.server, self.timeout_ms) from None
        except psycopg.OperationalError as e:
            self.health.record(False, self.policy, now_ms())
            raise ServerError(self.backend, str(e).strip() or type(e).__name__, self.server) from None
        except StoreTimeout:
            self.health.record(False, self.policy, now_ms())
            raise
        except psycopg.DatabaseError as e:
            self.health.record(True, self.policy)  # the server's error answer: it answered (a probe is back in)
            raise ServerError(self.backend, str(e).strip(), self.server) from None
        except psycopg.Error as e:
            raise ServerError(self.backend, str(e).strip(), self.server) from None
        self.health.record(True, self.policy)
        return result

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.dialect == "postgres" else text

    def _execute(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return conn.execute(self._sql(sql), tuple(params))

    def _fetch_all(self, conn: Any, *, sql: str, params: Sequence[Any]) -> list[Any]:
        rows: list[Any] = self._execute(conn, sql, params).fetchall()
        return rows

    def _rowcount(self, conn: Any, *, sql: str, params: Sequence[Any]) -> int:
        return int(self._execute(conn, sql, params).rowcount)

    @contextmanager
    def _transaction(self, conn: Any) -> Iterator[None]:
        if self.dialect == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        else:
            with conn.transaction():
                yield

    # -------------------------------------------------------------------------------------------- schema

    def _create_statements(self) -> list[str]:
        blob, text = ("BLOB", "TEXT") if self.dialect == "sqlite" else ("BYTEA", 'TEXT COLLATE "C"')
        e, t, s = self.entries, self.tags, self.schema
        return [
            f"CREATE TABLE IF NOT EXISTS {e} (key_hash BIGINT PRIMARY KEY, key {text} NOT NULL, value {blob} NOT NULL,"
            " byte_size INTEGER NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)",
            f"CREATE INDEX IF NOT EXISTS {e}_key ON {e} (key)",
            f"CREATE INDEX IF NOT EXISTS {e}_expires_at ON {e} (expires_at)",
            f"CREATE TABLE IF NOT EXISTS {t} (tag {text} NOT NULL, key_hash BIGINT NOT NULL,"
            " PRIMARY KEY (tag, key_hash))",
            f"CREATE INDEX IF NOT EXISTS {t}_key_hash ON {t} (key_hash)",
            f"CREATE TABLE IF NOT EXISTS {s} (version INTEGER NOT NULL)",
        ]

    def _schema_work(self, conn: Any) -> None:
        with self._transaction(conn):
            if self.dialect == "postgres":
                # Serialises table creation between processes opening one database at once.
                conn.execute("SELECT pg_advisory_xact_lock(4242424242)")
            for statement in self._create_statements():
                conn.execute(statement)
            row = conn.execute(f"SELECT CAST(MAX(version) AS BIGINT) FROM {self.schema}").fetchone()
            version = row[0] if row else None
            if version is None:
                self._execute(conn, f"INSERT INTO {self.schema} (version) VALUES (?)", [SCHEMA_VERSION])
            elif version > SCHEMA_VERSION:
                raise StoreError(
                    self.backend,
                    f"the database's larder schema is version {version}, newer than this larder's {SCHEMA_VERSION}",
                    self.server,
                )

    def _ensure_schema(self) -> None:
        with self._connection() as conn:
            self._schema_work(conn)
        self._schema_ready = True

    def _ensure_schema_pg(self) -> None:
        with self._lock:
            if self._schema_ready:
                return
        with self._connection() as conn:
            self._schema_work(conn)
        self._schema_ready = True

    # ------------------------------------------------------------------------------------------ internals

    def _key(self, key: str) -> str:
        return checked_key(self.backend, self.prefix, key)

    def _get_stored(self, stored: Sequence[str]) -> list[bytes | None]:
        now = now_ms()
        values: list[bytes | None] = []
        for at in range(0, len(stored), 500):
            chunk = stored[at : at + 500]
            hashes = [key_hash(k) for k in chunk]
            marks = ",".join("?" * len(hashes))
            sql = f"SELECT key, value, expires_at FROM {self.entries} WHERE key_hash IN ({marks})"
            rows = self._run(functools.partial(self._fetch_all, sql=sql, params=hashes))
            found = {key: bytes(value) for key, value, expires in rows if expires is None or expires > now}
            values.extend(found.get(k) for k in chunk)
        return values

    def _write(self, items: Sequence[tuple[str, bytes]], ttl: float | None, only_if_absent: bool) -> bool:
        now = now_ms()
        e = self.entries
        upsert = (
            f"INSERT INTO {e} (key_hash, key, value, byte_size, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (key_hash) DO UPDATE SET key = excluded.key, value = excluded.value,"
            " byte_size = excluded.byte_size, created_at = excluded.created_at, expires_at = excluded.expires_at"
        )
        if only_if_absent:
            upsert += f" WHERE {e}.expires_at IS NOT NULL AND {e}.expires_at <= ?"

        def work(conn: Any) -> bool:
            stored_all = True
            with self._transaction(conn):
                for key, value in items:
                    h = key_hash(key)
                    expiry = expires_at_ms(value, ttl, now)
                    if expiry is not None and expiry <= now:
                        if only_if_absent:
                            stored_all = False
                            continue
                        self._execute(conn, f"DELETE FROM {e} WHERE key_hash = ?", [h])
                        self._execute(conn, f"DELETE FROM {self.tags} WHERE key_hash = ?", [h])
                        continue
                    params: list[Any] = [h, key, bytes(value), len(key.encode()) + len(value), now, expiry]
                    if only_if_absent:
                        params.append(now)
                    written = self._execute(conn, upsert, params).rowcount == 1
                    stored_all &= written
                    if not written:
                        continue
                    self._execute(conn, f"DELETE FROM {self.tags} WHERE key_hash = ?", [h])
                    for tag in entry_tags(value):
                        self._execute(
                            conn,
                            f"INSERT INTO {self.tags} (tag, key_hash) VALUES (?, ?) ON CONFLICT DO NOTHING",
                            [tag, h],
                        )
            return stored_all

        stored = self._run(work)
        self._writes += 1
        if self._writes % SWEEP_EVERY == 0:
            sweep = (
                f"DELETE FROM {e} WHERE key_hash IN (SELECT key_hash FROM {e} WHERE expires_at IS NOT NULL"
                " AND expires_at <= ? LIMIT ?)"
            )
            self._run(lambda conn: self._execute(conn, sweep, [now_ms(), SWEEP_ROWS]))
        return stored

    def _delete_hashes(self, hashes: Sequence[int]) -> int:
        deleted = 0
        for at in range(0, len(hashes), 500):
            chunk = list(hashes[at : at + 500])
            marks = ",".join("?" * len(chunk))

            def work(conn: Any, c: list[int] = chunk, m: str = marks) -> int:
                with self._transaction(conn):
                    n = int(self._execute(conn, f"DELETE FROM {self.entries} WHERE key_hash IN ({m})", c).rowcount)
                    self._execute(conn, f"DELETE FROM {self.tags} WHERE key_hash IN ({m})", c)
                return n

            deleted += self._run(work)
        return deleted

    def _check(self, key: str, value: bytes) -> None:
        if len(value) > MAX_VALUE:
            raise TooLarge(self.backend, key, len(value), MAX_VALUE)

    # ----------------------------------------------------------------------------------------------- Store

    def max_value_bytes(self) -> int:
        return MAX_VALUE

    def server_errors(self) -> list[tuple[str, int]]:
        return [(self.server, self.health.errors)] if self.dialect == "postgres" else []

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return self._get_stored([self._key(k) for k in keys]) if keys else []

    def set_many(self, items: Sequence[tuple[str, bytes]], ttl: float | None = None) -> None:
        batch = [(self._key(k), v) for k, v in items]
        for key, value in items:
            self._check(key, value)
        if batch:
            self._write(batch, ttl, False)

    def add(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        stored = self._key(key)
        self._check(key, value)
        return self._write([(stored, value)], ttl, True)

    def incr(self, key: str, delta: int, ttl: float | None = None, create: bool = True) -> int | None:
        stored = self._key(key)
        h = key_hash(stored)
        select = f"SELECT value, expires_at FROM {self.entries} WHERE key_hash = ? AND key = ?"
        update = f"UPDATE {self.entries} SET value = ?, byte_size = ? WHERE key_hash = ? AND value = ?"
        for _ in range(100):
            row = self._run(lambda conn: self._execute(conn, select, [h, stored]).fetchone())
            now = now_ms()
            live = bytes(row[0]) if row is not None and (row[1] is None or row[1] > now) else None
            if live is None:
                if not create:
                    return None
                number = saturate(delta)
                if self._write([(stored, str(number).encode())], ttl, True):
                    return number
                continue
            old = parse_counter(live)
            if old is None:
                raise NotACounter(self.backend, key)
            number = saturate(old + delta)
            text = str(number).encode()
            params = [text, len(stored.encode()) + len(text), h, live]
            if self._run(functools.partial(self._rowcount, sql=update, params=params)) == 1:
                return number
        raise ServerError(self.backend, f"counter {key!r} kept changing under 100 attempts to update it", self.server)

    def delete_if(self, key: str, expected: bytes) -> bool:
        stored = self._key(key)
        sql = f"DELETE FROM {self.entries} WHERE key_hash = ? AND key = ? AND value = ?"
        params = [key_hash(stored), stored, bytes(expected)]
        return int(self._run(lambda conn: self._execute(conn, sql, params).rowcount)) == 1

    def delete_many(self, keys: Sequence[str]) -> int:
        stored = [self._key(k) for k in keys]
        live = self._get_stored(stored)
        return self._delete_hashes([key_hash(k) for k, v in zip(stored, live, strict=True) if v is not None])

    def clear(self) -> None:
        if self.prefix:
            self.purge_prefix("")
            return

        def work(conn: Any) -> None:
            with self._transaction(conn):
                conn.execute(f"DELETE FROM {self.entries}")
                conn.execute(f"DELETE FROM {self.tags}")

        self._run(work)

    def purge_prefix(self, prefix: str) -> int:
        stored = checked_prefix(self.backend, self.prefix, prefix)
        # The prefix's length in characters as the database counts them (spec/STORES.md §6): on a PostgreSQL
        # database in SQL_ASCII a character is a byte, so Python's count of the prefix would cut a key short.
        sql = f"SELECT key_hash FROM {self.entries} WHERE substr(key, 1, length(?)) = ?"
        hashes = self._run(lambda conn: [r[0] for r in self._execute(conn, sql, [stored, stored]).fetchall()])
        return self._delete_hashes(hashes)

    def purge_tag(self, tag: str) -> int:
        check_tag(self.backend, tag)
        sql = f"SELECT key_hash FROM {self.tags} WHERE tag = ?"
        hashes = self._run(lambda conn: [r[0] for r in self._execute(conn, sql, [tag]).fetchall()])
        deleted = self._delete_hashes(hashes)
        self._run(lambda conn: self._execute(conn, f"DELETE FROM {self.tags} WHERE tag = ?", [tag]))
        return deleted

    def stats(self) -> StoreStats:
        sql = f"SELECT CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM(byte_size), 0) AS BIGINT) FROM {self.entries}"
        entries, size = self._run(lambda conn: self._execute(conn, sql).fetchone())
        return StoreStats(entries=int(entries), bytes=int(size))

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        self._local = threading.local()
