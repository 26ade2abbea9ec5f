"""Keys at every store boundary (spec/STORES.md §2 "Keys"): every store refuses a key that is not a safe key, or is
empty, with `InvalidKey` (kind `invalid_key`) on every operation, before sending anything; the same for purge
prefixes (the empty prefix allowed). Hostile keys, generated, against the real servers: a key never reaches
another key (a CR LF in a memcached key would be a second command), and the store answers on the same connection
afterwards. `Cache` and the Django backend apply `safe_key`, so their callers may use any key."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import larder
from larder.stores import Store, StoreError, open_store
from larder.stores.base import InvalidKey, key_problem
from servers import Memcached, Postgres, Redis, RedisCluster, free_port
from support import configure_django, examples, load_vectors
from test_stores import BACKENDS, store_url
from vector_checks import raw

Operation = Callable[[Store, Any], object]

OPERATIONS: dict[str, Operation] = {
    "get": lambda s, k: s.get(k),
    "get_many": lambda s, k: s.get_many(["fine", k]),
    "set": lambda s, k: s.set(k, b"v"),
    "set_many": lambda s, k: s.set_many([("fine", b"v"), (k, b"v")]),
    "add": lambda s, k: s.add(k, b"v"),
    "incr": lambda s, k: s.incr(k, 1),
    "delete_if": lambda s, k: s.delete_if(k, b"v"),
    "delete": lambda s, k: s.delete(k),
    "delete_many": lambda s, k: s.delete_many(["fine", k]),
}

CASES = load_vectors("stores.json")["cases"]
REFUSED = [bytes.fromhex(c["key_hex"]).decode() for c in CASES if c["kind"] == "refused"]
ACCEPTED = [bytes.fromhex(c["key_hex"]).decode() for c in CASES if c["kind"] == "accepted"]
NOT_STR: list[Any] = [b"bytes-key", None, 7, ["a"]]
#: Keys an attacker would try: protocol on the key, near misses of the sentinel, edges of the length rule.
INJECTIONS = [
    "k\r\nflush_all",
    "k\r\nmg sentinel v",
    "k\r\nms sentinel 2 T0\r\nXX",
    "sentinel\r\n",
    "sentinel ",
    " sentinel",
    "*1\r\n$8\r\nFLUSHALL\r\n",
    "k\nFLUSHDB",
    "sentinel\x00",
    "../../etc/passwd",
    "%s%n{}*?[]\\",
    "x" * 250,
    "x" * 251,
    "é" * 125,
    "é" * 126,
    "\ud800",
    "",
]


def unreachable_url(backend: str, tmp_path: Path) -> str:
    """A store URL whose server is not there: any I/O would be a ServerError, so InvalidKey proves none happened."""
    port = free_port()
    return {
        "memory": "memory://",
        "memcached": f"memcached://127.0.0.1:{port}?timeout=2s",
        "redis": f"redis://127.0.0.1:{port}/0?timeout=2s",
        "redis-cluster": f"redis+cluster://127.0.0.1:{port}?timeout=2s",
        "sqlite": f"sqlite://{tmp_path / 'keys.db'}",
        "postgres": f"postgres://larder@127.0.0.1:{port}/none?timeout=2s",
        "file": f"file://{tmp_path / 'files'}",
    }[backend]


#: Strings without a UTF-8 form (a lone surrogate, or `surrogateescape`'s stand-ins for bytes that are not UTF-8):
#: no store may encode them with `surrogatepass` or `replace`, or repair them; each is an `invalid_key`.
NOT_UNICODE = [
    "\ud800",
    "\udfff",
    "a\udc80b",
    "ok\ud83d",
    "\ud83d\ude00\ud800",
    "\udcc0\udcaf",
    "\udcff",
    "x" * 249 + "\udc80",
]
#: Keys whose UTF-8 holds bytes that latin1, a replacement or a count of characters would turn into protocol:
#: U+010D U+010A are CR LF and U+0120 a space under latin1 (issue 32's smuggled `ms`), U+0085 is NEL, and the
#: 250-byte key is 125 characters.
WIRE_KEYS = [
    "\u010d\u010ams\u0120GET:http://victim.example/\u0120",
    "\u010d\u010aflush_all",
    "caf\u00e9\u0085\u00a0\u2028",
    "\u4e2d\u6587\U0001f600\u0100\u01ff",
    "\u00e9" * 121,
]


def unique(key: str) -> str:
    """`key` with 8 hex digits of its own (keys on the session's servers are not seen by other tests)."""
    return key + uuid.uuid4().hex[:8]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """Every store on the session's real servers, under a fresh prefix."""
    opened = open_store(store_url(request.param, request, tmp_path_factory))
    yield opened
    opened.close()


@pytest.fixture(params=BACKENDS)
def silent_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(unreachable_url(request.param, tmp_path))
    yield opened
    opened.close()


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_refuses_unsafe_keys_before_any_io(silent_store: Store, operation: str) -> None:
    for key in [*REFUSED, *NOT_STR]:
        with pytest.raises(InvalidKey) as caught:
            OPERATIONS[operation](silent_store, key)
        assert caught.value.kind == "invalid_key"
        assert caught.value.backend == silent_store.backend
        assert isinstance(caught.value, StoreError)
        assert caught.value.server is None, "refused before any server was chosen"
    if silent_store.backend in ("memory", "sqlite", "file"):
        assert silent_store.get("fine") is None, "nothing of a refused batch was written"
        assert silent_store.stats().entries == 0


@pytest.mark.parametrize("prefix", ["", "p:"], ids=["bare", "prefixed"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_key_without_a_utf8_form_is_an_invalid_key_on_every_operation(
    backend: str, prefix: str, tmp_path: Path
) -> None:
    """Spec/STORES.md §2 "Wire bytes are the checked bytes": a str with a lone surrogate is refused by every
    operation (purge prefixes and tags too) before anything is sent, never encoded with surrogatepass or replace;
    with a prefix too, where the store would otherwise hash prefix + key."""
    if prefix and backend == "memory":
        return  # memory:// takes no prefix
    url = unreachable_url(backend, tmp_path)
    store = open_store(url + ("&" if "?" in url else "?") + f"prefix={prefix}" if prefix else url)
    operations: dict[str, Operation] = {
        **OPERATIONS,
        "purge_prefix": lambda s, k: s.purge_prefix(k),
        "purge_tag": lambda s, k: s.purge_tag(k),
    }
    for key in NOT_UNICODE:
        for name, operation in operations.items():
            with pytest.raises(InvalidKey) as caught:
                operation(store, key)
            assert caught.value.kind == "invalid_key", name
            assert caught.value.server is None, f"{name}: refused before any server was chosen"
            assert "lone surrogate" in caught.value.reason, name
    for tag in [b"t", None, 7]:
        with pytest.raises(InvalidKey):
            store.purge_tag(tag)  # type: ignore[arg-type]
    if store.backend in ("memory", "sqlite", "file"):
        assert store.stats().entries == 0


def bare_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """`backend` on the session's server, without a prefix: the stored key is the caller's key itself."""
    if backend == "memory":
        return "memory://"
    if backend == "memcached":
        memcached: Memcached = request.getfixturevalue("memcached_server")
        return f"memcached://{memcached.address}"
    if backend == "redis":
        redis: Redis = request.getfixturevalue("redis_server")
        return redis.url
    if backend == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        return f"{cluster.url}?timeout=2s"
    if backend == "sqlite":
        return f"sqlite://{tmp_path / 'bare.db'}"
    if backend == "postgres":
        pg: Postgres = request.getfixturevalue("postgres_server")
        return f"{pg.url}?timeout=5s&table=bare_{uuid.uuid4().hex[:8]}"
    if backend == "file":
        return f"file://{tmp_path / 'files'}"
    raise AssertionError(backend)


def raw_read(backend: str, request: pytest.FixtureRequest, tmp_path: Path, url: str, wire: bytes) -> bytes | None:
    """What the server (or database, or directory) holds under exactly the bytes `wire`, read without larder."""
    if backend == "memcached":
        return raw.memcached_get(request.getfixturevalue("memcached_server").address, wire)
    if backend == "redis":
        return raw.redis_get(f"127.0.0.1:{request.getfixturevalue('redis_server').port}", wire)
    if backend == "redis-cluster":
        answers = []
        for node in request.getfixturevalue("redis_cluster").nodes:
            reply = raw.redis_call(f"127.0.0.1:{node.port}", b"GET", wire)
            if not (isinstance(reply, raw.RedisError) and reply.args[0].startswith("MOVED")):
                answers.append(reply)
        assert len(answers) == 1, f"one node owns the key's slot: {answers!r}"
        return answers[0]
    if backend == "sqlite":
        with sqlite3.connect(tmp_path / "bare.db") as conn:
            rows = conn.execute("SELECT value FROM larder_entries WHERE CAST(key AS BLOB) = ?", (wire,)).fetchall()
        return rows[0][0] if rows else None
    if backend == "postgres":
        return postgres_read(request.getfixturevalue("postgres_server"), url, wire)
    if backend == "file":
        found = raw.file_entry(tmp_path / "files", wire)
        if found is None:
            return None
        assert found[0] == wire, "the file's header holds the key's wire bytes"
        return found[1]
    raise AssertionError(backend)


def postgres_read(pg: Postgres, url: str, wire: bytes, dbname: str = "postgres") -> bytes | None:
    """The value under the key whose bytes in the database are `wire` (read in the database's own encoding)."""
    import psycopg

    table = url.partition("table=")[2] or "larder_entries"
    conninfo = f"host=127.0.0.1 port={pg.port} user=larder dbname={dbname}"
    with psycopg.connect(conninfo, client_encoding="SQL_ASCII") as conn:
        # SQL_ASCII: the server converts nothing, so textsend gives the bytes it holds.
        rows = conn.execute(f"SELECT value FROM {table} WHERE textsend(key) = %s", (wire,)).fetchall()
    return bytes(rows[0][0]) if rows else None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_key_goes_on_the_wire_as_the_utf8_its_check_read(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Spec/STORES.md §2: the bytes a store writes are the UTF-8 it checked. Read back without larder (raw
    memcached `mg`, Redis `GET`, SQL on the key's bytes, the file named by the bytes' SHA-256), each key is found
    under exactly its UTF-8 bytes, and nothing else was written (a latin1 encoder would have sent CR LF `ms` …)."""
    url = bare_url(backend, request, tmp_path)
    store = open_store(url)
    sentinel = unique("sentinel-")
    store.set(sentinel, b"kept")
    for text in WIRE_KEYS:
        key = unique(text)
        wire = key.encode("utf-8")
        assert len(wire) <= 250, "a safe key"
        value = b"value of " + wire
        store.set(key, value)
        assert store.get(key) == value
        if backend != "memory":
            assert raw_read(backend, request, tmp_path, url, wire) == value, f"{key!r} is under its UTF-8 bytes"
        assert store.delete(key) is True
        assert store.get(key) is None
        if backend != "memory":
            assert raw_read(backend, request, tmp_path, url, wire) is None
    assert store.get(sentinel) == b"kept"
    if backend not in ("memory", "redis", "redis-cluster", "memcached"):
        assert store.stats().entries == 1, "nothing but the sentinel is left"
    store.close()


def test_postgres_keys_are_utf8_whatever_the_client_or_database_encoding(
    postgres_server: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg encodes text in the connection's client encoding: with PGCLIENTENCODING=LATIN1 a key went out as
    latin1 (or failed with a UnicodeEncodeError for U+0100 and up), and on an SQL_ASCII database it read back as
    bytes, so a key that was written was never found. The store sets client_encoding UTF8 itself."""
    import psycopg

    database = f"ascii_{uuid.uuid4().hex[:8]}"
    admin = f"host=127.0.0.1 port={postgres_server.port} user=larder dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database} ENCODING 'SQL_ASCII' TEMPLATE template0")
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")
    for dbname in ("postgres", database):
        url = f"postgres://larder@127.0.0.1:{postgres_server.port}/{dbname}?timeout=5s&table=enc_{uuid.uuid4().hex[:8]}"
        store = open_store(url)
        for text in WIRE_KEYS:
            key = unique(text)
            wire = key.encode("utf-8")
            store.set(key, b"v")
            assert store.get(key) == b"v", (dbname, key)
            assert postgres_read(postgres_server, url, wire, dbname) == b"v", (dbname, key)
            assert store.purge_prefix(key[:3]) >= 1
            assert store.get(key) is None
        store.close()


def test_purge_prefixes_follow_the_key_rule(silent_store: Store) -> None:
    for prefix in [*(k for k in REFUSED if k), *NOT_STR]:
        with pytest.raises(InvalidKey):
            silent_store.purge_prefix(prefix)
    if silent_store.backend in ("memory", "sqlite", "file"):
        assert silent_store.purge_prefix("") == 0, "the empty prefix (everything) is allowed"


def test_the_error_shows_the_key_escaped_and_cut() -> None:
    with pytest.raises(InvalidKey) as caught:
        open_store("memory://").get("a\r\nflush_all" + "x" * 200)
    message = str(caught.value)
    assert "\r" not in message
    assert "\n" not in message
    assert "memory: invalid key 'a\\r\\nflush_all" in message
    assert "space or control byte" in message
    assert len(message) < 200


def test_accepted_keys_work_on_every_store(store: Store) -> None:
    for key in ACCEPTED:
        store.set(key, b"value")
        assert store.get(key) == b"value"
        assert store.delete(key) is True


keys_from_anywhere = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(max_size=300),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=20),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
    st.binary(max_size=12),
)


@settings(max_examples=examples(20), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(keys_from_anywhere, min_size=1, max_size=6))
def test_hostile_keys_never_reach_another_key(store: Store, keys: list[Any]) -> None:
    store.set("sentinel", b"kept")
    for key in keys:
        if key_problem(key) is not None:
            for operation in OPERATIONS.values():
                with pytest.raises(InvalidKey):
                    operation(store, key)
            continue
        if key in ("sentinel", "fine"):
            continue
        # A key the rule allows is an ordinary key: it holds its own value and nothing else.
        store.set(key, b"own")
        assert store.get_many([key, "sentinel"]) == [b"own", b"kept"]
        assert store.add(key, b"other") is False
        assert store.delete_if(key, b"other") is False
        assert store.delete_many([key]) == 1
        assert store.incr(key, 2) == 2
        assert store.delete(key) is True
        assert store.get(key) is None
    assert store.get("sentinel") == b"kept", "no key reached the sentinel"
    store.set("after", b"ok")
    assert store.get_many(["after", "sentinel"]) == [b"ok", b"kept"], "the store still answers on its connection"


def test_cache_and_django_apply_safe_key(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = store_url("memcached", request, tmp_path_factory)
    cache = larder.Cache(url)
    for key in [*INJECTIONS, *REFUSED]:
        if key in ("\ud800", ""):
            continue  # not UTF-8 (safe_key raises UnicodeEncodeError), or empty (below)
        cache.set(key, {"k": key})
        assert cache.get(key) == {"k": key}
        assert cache.incr(key + ":n") == 1
    assert cache.store.get("sentinel") is None
    # safe_key("") is "", which no store takes: a read is a miss (the store's error, absorbed), a write the error.
    assert cache.get("", "default") == "default"
    with pytest.raises(InvalidKey):
        cache.set("", 1)
    configure_django()
    from django.core.cache import CacheKeyWarning

    from larder.django import LarderCache

    django_cache = LarderCache(url, {"KEY_PREFIX": "keys"})
    # Django's own CacheKeyWarning says the key is not memcached-safe; larder makes it safe.
    with pytest.warns(CacheKeyWarning, match="memcached"):
        django_cache.set("user 7\r\nflush_all", 1)
    with pytest.warns(CacheKeyWarning, match="memcached"):
        assert django_cache.get("user 7\r\nflush_all") == 1
    cache.close()
