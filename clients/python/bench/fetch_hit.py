"""The cost of a hit in process memory: larder.Cache("memory://").get and .fetch on a present key holding a small
dict, against a plain dict lookup and a functools.lru_cache hit. Prints ns per call and calls/s.

    ../../.venv/bin/python bench/fetch_hit.py [--rounds 7]           (from clients/python)

Each figure is the least of `--rounds` interleaved rounds, both in wall time and in the thread's CPU time
(`time.thread_time`): on a machine shared with other work the wall figure also counts the time the thread waited for
a core, the CPU figure does not, so it is the one to compare with a target; the dict and lru_cache figures of the
same run show how fast the machine was.
"""

from __future__ import annotations

import argparse
import functools
import gc
import time

import larder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
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
    counts = {}
    for name, call in cases.items():
        n = 1000
        while True:
            start = time.perf_counter()
            for _ in range(n):
                call()
            if time.perf_counter() - start > 0.1:
                break
            n *= 2
        counts[name] = n
    wall = dict.fromkeys(cases, float("inf"))
    cpu = dict.fromkeys(cases, float("inf"))
    gc.disable()
    try:
        for _ in range(args.rounds):
            for name, call in cases.items():
                n = counts[name]
                start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
                for _ in range(n):
                    call()
                cpu[name] = min(cpu[name], (time.thread_time_ns() - start_cpu) / n)
                wall[name] = min(wall[name], (time.perf_counter_ns() - start) / n)
    finally:
        gc.enable()
    print(f"{'':<36}{'ns/call':>10}{'CPU ns/call':>13}{'calls/s':>14}")
    for name in cases:
        print(f"{name:<36}{wall[name]:>10,.0f}{cpu[name]:>13,.0f}{1e9 / wall[name]:>14,.0f}")


if __name__ == "__main__":
    main()
