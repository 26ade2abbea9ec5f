"""Every store through one behaviour suite, on real servers (spec/STORES.md §2, §3): reads and writes, expiry from
the entry header, add, counters, delete_if, purge by tag and prefix, prefixes, and errors that name the server."""

from __future__ import annotations

import itertools
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import larder
from larder.stores import NotACounter, Store, StoreError, open_store
from servers import Memcached, Postgres, Redis, RedisCluster

BACKENDS = ["memory", "memcached", "redis", "redis-cluster", "sqlite", "postgres", "file"]
_counter = itertools.count()


def store_url(backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A URL for `backend`, on the session's server, under a fresh prefix so that tests do not see each other."""
    prefix = f"t{next(_counter)}-{uuid.uuid4().hex[:6]}:"
    if backend == "memory":
        return "memory://?capacity=16M"
    if backend == "memcached":
        server: Memcached = request.getfixturevalue("memcached_server")
        return f"memcached://{server.address}?prefix={prefix}"
    if backend == "redis":
        redis: Redis = request.getfixturevalue("redis_server")
        return f"{redis.url}?prefix={prefix}"
    if backend == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        return f"{cluster.url}?prefix={prefix}&timeout=2s"
    if backend == "sqlite":
        return f"sqlite://{tmp_path_factory.mktemp('sqlite') / 'cache.db'}?prefix={prefix}"
    if backend == "postgres":
        pg: Postgres = request.getfixturevalue("postgres_server")
        return f"{pg.url}?prefix={prefix}&timeout=5s"
    if backend == "file":
        return f"file://{tmp_path_factory.mktemp('files')}?prefix={prefix}"
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    opened = open_store(store_url(request.param, request, tmp_path_factory))
    yield opened
    opened.close()


def entry(value: object, **options: object) -> bytes:
    return larder.encode(value, **options)  # type: ignore[arg-type]


def test_get_set_delete_and_batches(store: Store) -> None:
    assert store.get("missing") is None
    store.set("a", entry("A"))
    assert larder.decode(store.get("a") or b"").value == "A"
    store.set_many([("b", b"raw bytes"), ("c", entry([1, 2]))])
    assert store.get_many(["a", "nope", "b", "c"]) == [
        entry("A")[:0] + (store.get("a") or b""),
        None,
        b"raw bytes",
        store.get("c"),
    ]
    assert store.get("b") == b"raw bytes"
    assert store.delete("b") is True
    assert store.delete("b") is False
    assert store.delete_many(["a", "c", "zzz"]) == 2
    assert store.get_many(["a", "c"]) == [None, None]


def test_unsafe_and_unicode_keys(store: Store) -> None:
    key = larder.safe_key("日本 語 " + "x" * 300)
    store.set(key, b"1")
    store.set("ключ", b"2")
    assert store.get_many([key, "ключ"]) == [b"1", b"2"]


def short_wait(store: Store) -> tuple[float, float]:
    """A short TTL and how long to wait for it to pass (memcached rounds expiry up to whole seconds)."""
    return (1.0, 2.1) if store.backend == "memcached" else (1.0, 1.2)


def test_expiry_from_ttl_and_from_the_entry(store: Store) -> None:
    ttl, wait = short_wait(store)
    started = time.monotonic()
    store.set("ttl", b"v", ttl=ttl)
    now = larder.now_ms()
    store.set("hard", entry(1, expires_at=now + int(ttl * 1000)))
    store.set("stale", entry(1, expires_at=now + int(ttl * 1000), stale_ms=5000))
    store.set("past", entry(1, expires_at=now - 1))
    found = store.get("ttl"), store.get("hard")
    # Both must still be there unless a loaded machine took the whole TTL (a second) to write and read them.
    if time.monotonic() - started < ttl * 0.9:
        assert found[0] == b"v"
        assert found[1] is not None
    assert store.get("past") is None
    time.sleep(wait)
    assert store.get("ttl") is None
    assert store.get("hard") is None
    assert store.get("stale") is not None, "an entry is kept through its stale window"


def test_a_write_already_expired_replaces_and_stores_nothing(store: Store) -> None:
    store.set("k", b"old")
    store.set("k", entry(1, expires_at=larder.now_ms() - 10))
    assert store.get("k") is None
    assert store.add("k2", entry(1, expires_at=larder.now_ms() - 10)) is False
    assert store.get("k2") is None


def test_add_only_when_absent(store: Store) -> None:
    assert store.add("lock", b"token-1", ttl=5) is True
    assert store.add("lock", b"token-2", ttl=5) is False
    assert store.get("lock") == b"token-1"


def test_delete_if_only_deletes_the_expected_value(store: Store) -> None:
    store.set("lock", b"mine")
    assert store.delete_if("lock", b"theirs") is False
    assert store.get("lock") == b"mine"
    assert store.delete_if("lock", b"mine") is True
    assert store.get("lock") is None
    assert store.delete_if("lock", b"mine") is False


def test_counters(store: Store) -> None:
    assert store.incr("n", 5, create=False) is None
    assert store.get("n") is None
    assert store.incr("n", 5) == 5
    assert store.incr("n", 3) == 8
    assert store.incr("n", -2) == 6
    assert store.get("n") == b"6", "counters are ASCII decimal (spec/STORES.md §3)"
    store.set("text", b"not a number")
    with pytest.raises(NotACounter) as caught:
        store.incr("text", 1)
    assert caught.value.backend == store.backend
    assert store.get("text") == b"not a number"


def test_counter_created_with_ttl_keeps_it(store: Store) -> None:
    ttl, wait = short_wait(store)
    assert store.incr("short", 1, ttl=ttl) == 1
    assert store.incr("short", 1, ttl=100) == 2
    time.sleep(wait)
    assert store.get("short") is None


def test_negative_counters_except_on_memcached(store: Store) -> None:
    if store.backend == "memcached":
        assert store.incr("neg", -3) == 0, "memcached's counters are unsigned: created at 0"
        assert store.incr("neg", -1) == 0
    else:
        assert store.incr("neg", -3) == -3
        store.set("max", str(2**63 - 2).encode())
        if store.backend.startswith("redis"):
            return  # Redis refuses to overflow instead of saturating (its own rule, as in larder-redis)
        assert store.incr("max", 10) == 2**63 - 1


def test_purge_by_tag(store: Store) -> None:
    old = larder.now_ms() - 5000
    store.set("p1", entry(1, tags=["product:1", "all"], created_at=old))
    store.set("p2", entry(2, tags=["product:2", "all"], created_at=old))
    store.set("plain", entry(3, created_at=old))
    store.set("counter", b"7")
    store.purge_tag("product:1")
    assert store.get_many(["p1", "p2", "plain", "counter"])[1:] == [store.get("p2"), store.get("plain"), b"7"]
    assert store.get("p1") is None
    assert store.get("p2") is not None
    store.purge_tag("all")
    assert store.get_many(["p1", "p2", "plain", "counter"]) == [None, None, store.get("plain"), b"7"]
    assert store.get("plain") is not None


def test_purge_by_prefix(store: Store) -> None:
    old = larder.now_ms() - 5000
    store.set("GET:http://a/1", entry(1, created_at=old))
    store.set("GET:http://a/2", entry(2, created_at=old))
    store.set("GET:http://b/1", entry(3, created_at=old))
    store.purge_prefix("GET:http://a/")
    assert store.get_many(["GET:http://a/1", "GET:http://a/2"]) == [None, None]
    assert store.get("GET:http://b/1") is not None


def test_entries_written_after_a_purge_are_seen(store: Store) -> None:
    store.purge_tag("t")
    store.purge_prefix("x/")
    if store.backend == "memcached":
        time.sleep(1.1)  # memcached's records treat entries within purge_skew (1 s) of the purge as purged
    store.set("x/1", entry(1, tags=["t"]))
    assert store.get("x/1") is not None


def test_clear_under_a_prefix(store: Store) -> None:
    store.set("k1", entry(1, created_at=larder.now_ms() - 5000))
    store.clear()
    assert store.get("k1") is None


def test_stats(store: Store) -> None:
    store.set("s", b"1")
    stats = store.stats()
    assert stats.entries >= 1


def test_two_instances_share_a_shared_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for backend in ["memcached", "redis", "sqlite", "file"]:
        url = store_url(backend, request, tmp_path_factory)
        one, two = open_store(url), open_store(url)
        one.set("shared", b"v")
        assert two.get("shared") == b"v", backend
        assert two.add("shared", b"w") is False
        one.close()
        two.close()


def test_sqlite_schema_newer_than_known_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "c.db"
    open_store(f"sqlite://{path}").close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE larder_entries_schema SET version = 2")
    with pytest.raises(StoreError, match="version 2"):
        open_store(f"sqlite://{path}")


def test_file_layout_is_the_spec_s(tmp_path: Path) -> None:
    import hashlib
    import struct

    store = open_store(f"file://{tmp_path}")
    store.set("user:42", b"value", ttl=60)
    h = hashlib.sha256(b"user:42").hexdigest()
    data = (tmp_path / h[:2] / h[2:4] / h).read_bytes()
    magic, expires, key_len = struct.unpack_from("<4sQH", data)
    assert (magic, key_len, data[14 : 14 + key_len], data[14 + key_len :]) == (b"LDR1", 7, b"user:42", b"value")
    assert abs(expires - (larder.now_ms() + 60_000)) < 5000


def test_file_capacity_evicts_the_oldest(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}?capacity=10K")
    for i in range(30):
        store.set(f"k{i}", b"x" * 1000)
        time.sleep(0.002)
    assert store.stats().bytes <= 10 * 1024
    assert store.get("k29") is not None
    assert store.get("k0") is None


def test_memory_is_bounded() -> None:
    store = open_store("memory://?capacity=64K")
    for i in range(500):
        store.set(f"k{i}", b"x" * 500)
    stats = store.stats()
    assert stats.bytes <= 64 * 1024
    assert stats.evictions > 0
    assert store.get("k499") == b"x" * 500
    store = open_store("memory://?max_entries=3")
    for i in range(5):
        store.set(f"k{i}", b"v")
    assert store.stats().entries == 3


def redis_error_reply(port: int, *command: bytes) -> str:
    """The error the redis-server on `port` answers `command` with, sent on a fresh connection (without its `-`)."""
    request = b"*%d\r\n" % len(command) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in command)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        line = connection.makefile("rb").readline()
    assert line.startswith(b"-"), f"{command!r} was not refused: {line!r}"
    return line[1:].rstrip(b"\r\n").decode()


def test_redis_authenticates_and_selects_its_database(tmp_path: Path) -> None:
    """larder's own RESP client sends AUTH (user and password, percent-decoded) and SELECT on every new connection."""
    from servers import Process, find_binary, free_port

    port = free_port()
    command = [find_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    server = Process("redis-server", [*command, "--requirepass", "p@ss word", "--dir", str(tmp_path)], port)
    try:
        in_db3 = open_store(f"redis://:p%40ss%20word@127.0.0.1:{port}/3")
        in_db3.set("k", b"v")
        assert in_db3.get_many(["k"]) == [b"v"]
        assert open_store(f"redis://default:p%40ss%20word@127.0.0.1:{port}/0").get("k") is None, "another database"
        # The refusal carries the server's own words, whatever this redis-server's version says to a wrong password.
        refusal = redis_error_reply(port, b"AUTH", b"wrong")
        with pytest.raises(StoreError, match=re.escape(f"the handshake was refused: {refusal[:200]}")):
            open_store(f"redis://:wrong@127.0.0.1:{port}/3").get("k")
    finally:
        server.stop()


def test_a_memcached_batch_that_ejects_its_server_is_retried_on_each_keys_new_server() -> None:
    """STORES.md §4.3: a batch whose failure ejects its server is retried once, each key on its own new server. The
    keys of one ejected server move to several servers, so sending the whole batch to the first key's new server
    would read false misses and leave writes and deletes where no reader looks. Each check reads one key at a time,
    which routes by that key alone."""
    servers = [Memcached(), Memcached(), Memcached()]
    try:
        url = "memcached://" + ",".join(s.address for s in servers)
        url += "?timeout=300ms&connect_timeout=300ms&failures=1&retry_after=60s"
        writer, reader, deleter = open_store(url), open_store(url), open_store(url)
        dead = servers[1].address
        moved = [k for k in (f"batch:{i}" for i in range(300)) if writer.server_of(k) == dead]  # type: ignore[attr-defined]
        assert len(moved) >= 10, moved
        servers[1].kill()

        writer.set_many([(k, b"written") for k in moved])  # ejects the server, then writes on each new owner
        owners = {writer.server_of(k) for k in moved}  # type: ignore[attr-defined]
        assert dead not in owners, owners
        assert len(owners) == 2, owners
        assert all(writer.get(k) == b"written" for k in moved)

        for key in moved:
            writer.set(key, b"one by one")
        assert reader.get_many(moved) == [b"one by one"] * len(moved)

        assert deleter.delete_many(moved) == len(moved)
        assert all(writer.get(k) is None for k in moved)
    finally:
        for server in servers:
            server.stop()
