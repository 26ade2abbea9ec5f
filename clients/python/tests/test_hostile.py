"""Replies are hostile too (spec/STORES.md §2): the memcached and Redis stores against `larder-hostile`, a server that
answers every data command with a dripping, huge, deeply nested, endless-line, garbage or missing reply.

Each read and write fails with the store's own error (never a parser's exception, a RecursionError or a MemoryError)
within `timeout` plus a margin (the deadline is total: a drip of one byte every 50 ms is cut off like silence),
counts as a failure of the server, and leaves no connection to reuse; `Cache`, `AsyncCache` and the Django backend
read it as a miss. A 1 GiB reply costs far less memory than the bound (in a subprocess, by its peak RSS), and a real
Redis value over `max_value` is refused when its length is announced."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import larder
from hostile import Hostile
from larder.stores import ServerError, Store, StoreError, open_store
from servers import Redis

TIMEOUT = 0.3
#: What a failing read may take beyond the store's timeout on this shared machine.
MARGIN = 1.0
BEHAVIOURS = {
    "memcached": ["drip", "huge", "endless-line", "garbage", "silent"],
    "redis": ["drip", "huge", "nested", "endless-line", "garbage", "silent"],
}
#: (URL scheme, hostile protocol, behaviour): a Cluster seed that misbehaves too.
CASES = [
    *((protocol, protocol, b) for protocol, behaviours in BEHAVIOURS.items() for b in behaviours),
    *(("redis+cluster", "redis", b) for b in BEHAVIOURS["redis"]),
]
OPERATIONS: dict[str, Callable[[Store], object]] = {
    "get": lambda s: s.get("k"),
    "get_many": lambda s: s.get_many(["a", "b", "c"]),
    "set": lambda s: s.set("k", b"value"),
}


@pytest.fixture
def hostile() -> Iterator[Callable[..., Hostile]]:
    started: list[Hostile] = []

    def start(protocol: str, behaviour: str, *args: str) -> Hostile:
        server = Hostile(protocol, behaviour, *args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def url(scheme: str, server: Hostile, options: str = "", timeout: float = TIMEOUT) -> str:
    return f"{scheme}://{server.address}?timeout={round(timeout * 1000)}ms{options}"


def idle_connections(store: Store) -> int:
    """Connections kept for reuse, over every server of the store."""
    pools = [s.pool for s in getattr(store, "servers", [])]
    router = getattr(store, "_router", None)
    if router is not None:
        pools += [n.pool for n in getattr(router, "_nodes", {}).values()]
        pools += [router.node.pool] if hasattr(router, "node") else []
    return sum(len(p._idle) for p in pools)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize(("scheme", "protocol", "behaviour"), CASES, ids=lambda x: str(x))
def test_a_hostile_reply_is_the_store_s_error_within_the_timeout(
    hostile: Callable[..., Hostile], scheme: str, protocol: str, behaviour: str, operation: str
) -> None:
    server = hostile(protocol, behaviour)
    store = open_store(url(scheme, server))
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        OPERATIONS[operation](store)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT + MARGIN, f"{behaviour}: failed after {elapsed:.2f} s"
    assert isinstance(caught.value, ServerError), caught.value  # StoreTimeout is one
    assert caught.value.server == server.address
    assert sum(count for _, count in store.server_errors()) >= 1, "a failure of the server, toward ejection"
    assert idle_connections(store) == 0, "the connection the reply arrived on is closed, not reused"
    store.close()


@pytest.mark.parametrize(("scheme", "protocol", "behaviour"), CASES, ids=lambda x: str(x))
def test_caches_read_a_hostile_server_as_a_miss(
    hostile: Callable[..., Hostile], scheme: str, protocol: str, behaviour: str
) -> None:
    server = hostile(protocol, behaviour)
    cache = larder.Cache(url(scheme, server, "&failures=1000"))
    started = time.monotonic()
    assert cache.get("k", "miss") == "miss"
    assert cache.get_many(["a", "b"]) == {}
    assert cache.fetch("f", lambda: "computed") == "computed"
    assert time.monotonic() - started < 3 * (TIMEOUT + MARGIN)
    assert cache.stats().store_errors >= 3
    assert asyncio.run(larder.AsyncCache(cache).get("k", "miss")) == "miss"
    cache.close()


def test_the_django_backend_reads_a_hostile_server_as_a_miss(hostile: Callable[..., Hostile]) -> None:
    from support import configure_django

    server = hostile("memcached", "drip")
    configure_django()
    from larder.django import LarderCache

    backend = LarderCache(url("memcached", server, "&failures=1000"), {})
    started = time.monotonic()
    assert backend.get("k", "default") == "default"
    assert backend.get_many(["a", "b"]) == {}
    assert time.monotonic() - started < 2 * (TIMEOUT + MARGIN)
    redis_server = hostile("redis", "nested")
    assert LarderCache(url("redis", redis_server), {}).get("k", "default") == "default"


PEAK_RSS = """
import json, resource, sys
from larder.stores import StoreError, open_store
store = open_store(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
errors = []
for read in (lambda: store.get("k"), lambda: store.get_many(["a", "b", "c"])):
    try:
        read()
    except StoreError as e:
        errors.append(type(e).__name__)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kib": after - before, "errors": errors}))
"""


@pytest.mark.parametrize("protocol", ["memcached", "redis"])
def test_a_gigabyte_reply_costs_far_less_than_the_bound(hostile: Callable[..., Hostile], protocol: str) -> None:
    server = hostile(protocol, "huge")  # 1 GiB, as fast as the client reads
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, url(protocol, server, "&failures=1000", timeout=5)],
        capture_output=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["errors"] == ["ServerError", "ServerError"]
    assert result["growth_kib"] < 8 * 1024, f"peak RSS grew {result['growth_kib']} KiB for a refused 1 GiB reply"


#: Replies each of whose parts is within its bound, the whole past any (spec/STORES.md §2, "Whole reply"; issue 32
#: finding 4): 1,000 strings of 64 MiB (each within max_value) in one array, and 10,000 values of 512 KiB (each
#: within max_item).
WIDE = {
    "memcached": ["--count", "10000", "--size", str(512 << 10)],
    "redis": ["--count", "1000", "--size", str(64 << 20)],
}
WIDE_RSS = """
import json, resource, sys, time
from larder.stores import StoreError, StoreTimeout, open_store
url = sys.argv[1]
operations = {
    "get": lambda s: s.get("k1"),
    "get_many": lambda s: s.get_many(["k1", "k2", "k3"]),
    "set": lambda s: s.set("k1", b"v"),
    "set_many": lambda s: s.set_many([("k1", b"v"), ("k2", b"v")]),
    "add": lambda s: s.add("k1", b"v"),
    "incr": lambda s: s.incr("k1", 1),
    "delete": lambda s: s.delete("k1"),
    "delete_many": lambda s: s.delete_many(["k1", "k2"]),
    "delete_if": lambda s: s.delete_if("k1", b"v"),
    "purge_tag": lambda s: s.purge_tag("t"),
    "purge_prefix": lambda s: s.purge_prefix("k"),
    "clear": lambda s: s.clear(),
    "stats": lambda s: s.stats(),
}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
results = {}
for name, operation in operations.items():
    store = open_store(url)  # fresh: no ejection from an earlier operation
    started = time.monotonic()
    try:
        operation(store)
        outcome = "success"
    except StoreTimeout:
        outcome = "timeout"
    except StoreError as e:
        outcome = type(e).__name__
    results[name] = [outcome, round((time.monotonic() - started) * 1000)]
    store.close()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kib": after - before, "results": results}))
"""


@pytest.mark.parametrize(
    ("scheme", "protocol"), [("memcached", "memcached"), ("redis", "redis"), ("redis+cluster", "redis")]
)
def test_a_wide_reply_is_refused_at_once_on_every_operation(
    hostile: Callable[..., Hostile], scheme: str, protocol: str
) -> None:
    """A counter's script answered with 1,000 strings of 64 MiB (1 GiB of replies whose every part is within its
    bound; Go's client grew by 1.1 GB before the fix) fails at its first line, as does every other operation: a
    ServerError well before the 5 s timeout, and the process grows by far less than one such string."""
    server = hostile(protocol, "wide", *WIDE[protocol])
    done = subprocess.run(
        [sys.executable, "-c", WIDE_RSS, url(scheme, server, "&failures=1000", timeout=5)],
        capture_output=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout)
    for name, (outcome, elapsed_ms) in result["results"].items():
        assert outcome == "ServerError", f"{name}: {outcome} after {elapsed_ms} ms"
        assert elapsed_ms < 2000, f"{name}: refused only after {elapsed_ms} ms"
    assert result["growth_kib"] < 8 * 1024, f"peak RSS grew {result['growth_kib']} KiB"


def test_a_value_past_a_smaller_max_value_is_refused_when_announced(hostile: Callable[..., Hostile]) -> None:
    server = hostile("redis", "huge", "--size", str(48 << 20))
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, url("redis", server, "&failures=1000&max_value=32M", timeout=5)],
        capture_output=True,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result["errors"] == ["ServerError", "ServerError"]
    assert result["growth_kib"] < 8 * 1024, "refused when the length is announced, before reading"


def test_a_real_redis_value_over_max_value_is_refused_fast(redis_server: Redis) -> None:
    writer = open_store(f"{redis_server.url}?prefix=big:")
    writer.set("big", b"x" * (2 << 20))
    writer.set("small", b"ok")
    reader = open_store(f"{redis_server.url}?prefix=big:&max_value=1M&failures=1000")
    started = time.monotonic()
    with pytest.raises(ServerError, match="bound is 1048576"):
        reader.get("big")
    with pytest.raises(ServerError):
        reader.get_many(["small", "big"])
    assert time.monotonic() - started < 1.0
    assert reader.get("small") == b"ok", "a new connection, in step with the server"
    assert reader.get_many(["small"]) == [b"ok"]
    assert larder.Cache(reader).get("big", "miss") == "miss"
    assert writer.get("big") == b"x" * (2 << 20), "the default max_value (64M) reads it"
    writer.close()
    reader.close()


class CannedMemcached:
    """A memcached stand-in that answers each request (whatever it holds) with `answer`."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.listener.accept()
                with connection:
                    while connection.recv(65536):
                        connection.sendall(self.answer)

    def close(self) -> None:
        self.listener.close()


@pytest.mark.parametrize(
    ("operation", "answer", "surplus"),
    [
        ("stats", b"STAT curr_items 3\r\nEND\r\nMN\r\n", b"STAT curr_items 9\r\nEND\r\nMN\r\n"),
        ("clear", b"OK\r\nMN\r\n", b"OK\r\nMN\r\n"),
        ("get", b"VA 1\r\nx\r\nMN\r\n", b"VA 1\r\ny\r\nMN\r\n"),
        ("delete", b"HD\r\nMN\r\n", b"HD\r\nMN\r\n"),
    ],
)
def test_a_memcached_answer_with_more_than_its_replies_before_mn_is_refused(
    operation: str, answer: bytes, surplus: bytes
) -> None:
    """spec/STORES.md §4.1: every request ends with `mn`, and its answer is exactly its replies, then `MN`; a
    second answer where `MN` should be is malformed at once (a reader stopping at END or at the replies it counted
    would leave it for the next request, or read it as that request's answer)."""
    calls: dict[str, Callable[[Store], object]] = {
        "stats": lambda s: s.stats().entries,
        "clear": lambda s: s.clear(),
        "get": lambda s: s.get("k"),
        "delete": lambda s: s.delete("k"),
    }
    expected = {"stats": 3, "clear": None, "get": b"x", "delete": True}
    good = CannedMemcached(answer)
    store = open_store(f"memcached://{good.address}?timeout=2s&prefix_purge=false")
    assert calls[operation](store) == expected[operation]
    assert calls[operation](store) == expected[operation], "the connection stayed in step"
    store.close()
    good.close()
    bad = CannedMemcached(answer.removesuffix(b"MN\r\n") + surplus)
    store = open_store(f"memcached://{bad.address}?timeout=2s&prefix_purge=false&failures=1000")
    with pytest.raises(ServerError, match="where MN ends the replies"):
        calls[operation](store)
    assert idle_connections(store) == 0
    store.close()
    bad.close()
