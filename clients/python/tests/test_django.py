"""`larder.django.LarderCache` in a configured Django: the verbs and Django's async methods on a real memcached, and
what Django writes is a larder entry that the Rust binary reads (Django's own suite runs from django_tests/run.py)."""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess

import msgpack
import pytest

import larder
from servers import Memcached
from support import configure_django, larder_bin


@pytest.fixture(scope="module")
def django_cache(memcached_server: Memcached) -> object:
    configure_django(f"memcached://{memcached_server.address}")
    from django.core.cache import cache

    return cache


def test_verbs_and_timeouts(django_cache: object) -> None:
    from django.core.cache import cache

    cache.set("a", {"x": 1}, 60)
    assert cache.get("a") == {"x": 1}
    assert cache.add("a", 2) is False
    cache.set("t", (1, 2))
    assert cache.get("t") == (1, 2)
    cache.set("z", 1, 0)
    assert cache.get("z") is None
    cache.set("n", 41)
    assert cache.incr("n") == 42
    with pytest.raises(ValueError, match="not found"):
        cache.incr("missing")
    assert cache.get_many(["a", "n", "nope"]) == {"a": {"x": 1}, "n": 42}
    assert cache.touch("a", 10) is True
    assert cache.delete("a") is True
    assert cache.has_key("a") is False


def test_async_methods(django_cache: object) -> None:
    from django.core.cache import cache

    async def main() -> None:
        await cache.aset("async", [1, 2, 3], 30)
        assert await cache.aget("async") == [1, 2, 3]
        assert await cache.aadd("async", 0) is False
        assert await cache.aget_or_set("other", lambda: "made") == "made"
        await cache.adelete("async")
        assert await cache.aget("async") is None

    asyncio.run(main())


def test_django_values_are_larder_entries_rust_reads(django_cache: object, memcached_server: Memcached) -> None:
    from django.core.cache import cache

    cache.set("page", {"title": "Grüße", "n": 7}, 60)
    cache.set("when", datetime.date(2024, 5, 1), 60)
    key = cache.make_key("page")
    assert key == "dj:1:page"
    url = f"memcached://{memcached_server.address}"
    shown = subprocess.run(
        [str(larder_bin()), "store", "get", "--inspect", "--json", key, "--store", url],
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["value"] == {"title": "Grüße", "n": 7}
    raw = subprocess.run(
        [str(larder_bin()), "store", "get", cache.make_key("when"), "--store", url], capture_output=True, check=True
    ).stdout
    entry = larder.decode(raw)
    assert isinstance(entry.value, msgpack.ExtType), "a Python-only value is an opaque ext to other readers"
    assert entry.value.code == 80


@pytest.mark.parametrize(
    ("options", "capacity"), [({"MAX_ENTRIES": 30}, 129), ({"MAX_ENTRIES": 30, "CULL_FREQUENCY": 0}, 119)]
)
def test_memory_culls_as_locmemcache_does(django_cache: object, options: dict[str, int], capacity: int) -> None:
    """Django's own test_cull and test_zero_cull, on memory://: the counts LocMemCache gives at the installed Django
    (29 and 19 in Django 5.2), whatever they are."""
    from django.core.cache.backends.base import BaseCache
    from django.core.cache.backends.locmem import LocMemCache

    from larder.django import LarderCache

    def left(backend: BaseCache) -> int:
        for i in range(1, 50):
            backend.set(f"cull{i}", "value", 1000)
        return sum(backend.has_key(f"cull{i}") for i in range(1, 50))

    # Caches of one LOCATION share their data (LocMemCache's dict per name, larder's store per memory:// URL).
    expected = left(LocMemCache(f"cull-{capacity}", {"OPTIONS": options}))
    assert expected <= 30, "LocMemCache culled to MAX_ENTRIES or below"
    assert left(LarderCache(f"memory://?capacity={capacity}M", {"OPTIONS": options})) == expected
    emptied = LarderCache("memory://?capacity=99M", {"OPTIONS": {"MAX_ENTRIES": 30}})
    emptied._max_entries = -1  # Django's test_cull_delete_when_store_empty: a cull before the first write
    emptied.set("force_cull_delete", "value", 1000)
    assert emptied.has_key("force_cull_delete") is True


def test_shared_stores_are_not_culled(django_cache: object, memcached_server: Memcached) -> None:
    from larder.django import LarderCache

    backend = LarderCache(f"memcached://{memcached_server.address}", {"OPTIONS": {"MAX_ENTRIES": 3}})
    backend.set_many({f"k{i}": i for i in range(10)}, 60)
    assert len(backend.get_many([f"k{i}" for i in range(10)])) == 10


def test_caches_of_one_memory_location_share_it(django_cache: object) -> None:
    from larder.django import LarderCache

    one = LarderCache("memory://?capacity=98M", {"KEY_PREFIX": "p"})
    two = LarderCache("memory://?capacity=98M", {"KEY_PREFIX": "p"})
    other = LarderCache("memory://?capacity=97M", {"KEY_PREFIX": "p"})
    one.set("k", 1)
    assert two.get("k") == 1
    assert other.get("k") is None
