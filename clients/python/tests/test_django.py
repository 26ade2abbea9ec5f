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
