"""The cost of a hit in process memory: larder.Cache("memory://").fetch on a present key, against a plain dict
lookup and a functools.lru_cache hit. Prints ns per call and calls/s.

    ../../.venv/bin/python bench/fetch_hit.py            (from clients/python)
"""

from __future__ import annotations

import functools
import timeit

import larder


def main() -> None:
    value = {"id": 7, "name": "Ada", "tags": ["a", "b"]}
    cache = larder.Cache("memory://")
    cache.set("user:7", value, ttl=300)
    table = {"user:7": value}

    @functools.lru_cache(maxsize=1024)
    def cached(key: str) -> object:
        return value

    cached("user:7")

    def loader() -> object:
        raise AssertionError("a hit never loads")

    cases = {
        "dict lookup": lambda: table["user:7"],
        "functools.lru_cache hit": lambda: cached("user:7"),
        "larder.Cache.get (memory://)": lambda: cache.get("user:7"),
        "larder.Cache.fetch hit (memory://)": lambda: cache.fetch("user:7", loader, ttl=300),
    }
    assert cache.fetch("user:7", loader) == value
    print(f"{'':<36}{'ns/call':>10}{'calls/s':>14}")
    for name, call in cases.items():
        timer = timeit.Timer(call)
        number, _ = timer.autorange()
        best = min(timer.repeat(repeat=5, number=number)) / number
        print(f"{name:<36}{best * 1e9:>10,.0f}{1 / best:>14,.0f}")


if __name__ == "__main__":
    main()
