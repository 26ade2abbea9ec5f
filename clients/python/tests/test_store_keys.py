"""Keys at every store boundary (spec/STORES.md §2 "Keys"): every store refuses a key that is not a safe key, or is
empty, with `InvalidKey` (kind `invalid_key`) on every operation, before sending anything; the same for purge
prefixes (the empty prefix allowed). Hostile keys, generated, against the real servers: a key never reaches
another key (a CR LF in a memcached key would be a second command), and the store answers on the same connection
afterwards. `Cache` and the Django backend apply `safe_key`, so their callers may use any key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import larder
from larder.stores import Store, StoreError, open_store
from larder.stores.base import InvalidKey, key_problem
from servers import free_port
from support import configure_django, examples, load_vectors
from test_stores import BACKENDS, store_url

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
