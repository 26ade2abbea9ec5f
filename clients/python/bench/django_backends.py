"""Django cache backends side by side on the same servers: larder's LarderCache (memcached and Redis) against
Django's PyMemcacheCache and RedisCache and django-redis. Prints ops/s for get (hit), set, get_many of 100 keys and
fetch hit (get_or_set on a present key), at 1 KiB and 64 KiB values.

    ../../.venv/bin/python bench/django_backends.py [--seconds 0.5]     (from clients/python)

It starts its own memcached and redis-server on free loopback ports (tests/servers.py). One client thread; the
servers share the machine's cores with it, so compare the columns of one run, as ratios.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import django
from django.conf import settings

from servers import Memcached, Redis

SIZES = {"1 KiB": 1 << 10, "64 KiB": 64 << 10}


def rate(op: Callable[[], object], seconds: float) -> float:
    """Calls per second of `op`, run for about `seconds` (after a short warm-up)."""
    for _ in range(20):
        op()
    calls, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(10):
            op()
        calls += 10
        now = time.perf_counter()
        if now >= deadline:
            return calls / (now - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement (default 0.5)")
    args = parser.parse_args()
    memcached, redis = Memcached(), Redis()
    try:
        mc, rd = memcached.address, f"redis://127.0.0.1:{redis.port}"
        settings.configure(
            CACHES={
                "larder memcached": {"BACKEND": "larder.django.LarderCache", "LOCATION": f"memcached://{mc}"},
                "larder redis": {"BACKEND": "larder.django.LarderCache", "LOCATION": f"{rd}/0"},
                "PyMemcacheCache": {"BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache", "LOCATION": mc},
                "RedisCache": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": f"{rd}/1"},
                "django-redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": f"{rd}/2"},
            }
        )
        django.setup()
        from django.core.cache import caches

        rng = random.Random(7)
        print(f"ops/s, one thread, {args.seconds} s per figure; memcached {mc}, redis {rd}")
        for size_name, size in SIZES.items():
            value = "".join(rng.choices(string.ascii_letters + string.digits + " ", k=size))
            print(f"\n{size_name} values (random text)")
            print(f"{'backend':<18}{'get':>10}{'set':>10}{'get_many(100)':>15}{'fetch hit':>11}")
            for alias in settings.CACHES:
                cache = caches[alias]
                keys = [f"bench:{size}:{i}" for i in range(100)]
                cache.set_many(dict.fromkeys(keys, value), 300)
                assert cache.get(keys[0]) == value, alias
                assert len(cache.get_many(keys)) == 100, alias
                figures = [
                    rate(lambda c=cache, k=keys[0]: c.get(k), args.seconds),
                    rate(lambda c=cache, k=keys[1], v=value: c.set(k, v, 300), args.seconds),
                    rate(lambda c=cache, ks=keys: c.get_many(ks), args.seconds),
                    rate(lambda c=cache, k=keys[2], v=value: c.get_or_set(k, lambda: v, 300), args.seconds),
                ]
                print(f"{alias:<18}" + "".join(f"{f:>{w},.0f}" for f, w in zip(figures, (10, 10, 15, 11), strict=True)))
    finally:
        memcached.stop()
        redis.stop()


if __name__ == "__main__":
    main()
