"""Django cache backends side by side on the same servers: larder's LarderCache on memory://, memcached and Redis
against Django's LocMemCache, PyMemcacheCache and RedisCache and django-redis. Measures get (hit), set, get_many of
100 keys and fetch hit (get_or_set on a present key) of the values a view caches (bench/shapes.py: text and a query
result at 1 KiB and 64 KiB, a nested document, a rendered page), in interleaved rounds, and prints the median ops/s
of each backend and larder's ratio to each peer on the same store (issues 18 and 34: >= 1.0x).

    .venv/bin/python clients/python/bench/django_backends.py [--rounds 5] [--seconds 0.2] [--shapes a,b]
        [--only memory,memcached,redis] [--raw FILE]

It starts its own memcached and redis-server on free loopback ports (tests/servers.py). One client thread; the
servers share the machine's cores with it. Every round measures every backend once per (size, operation), the
backends in a rotating order, so that a burst of load elsewhere on the machine falls on all of them alike; a ratio
is computed within each round (larder and its peer measured back to back) and the median of the rounds is shown
with the lowest and highest round. Beside each rate, the client's CPU µs per call (process time: what the machine's
other load does not change, though the servers' CPU is not in it). `--raw FILE` appends every measurement to FILE in
bench/report.py's raw format (bench "python"), for `make bench`'s report and charts.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import django
from django.conf import settings

from servers import Memcached, Redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shapes import shapes

OPS = ("get", "set", "get_many(100)", "fetch hit")
#: larder's backend on each store, and the peers it is compared with on that store.
PAIRS = {
    "larder memory": ("LocMemCache",),
    "larder memcached": ("PyMemcacheCache",),
    "larder redis": ("RedisCache", "django-redis"),
}


def rate(op: Callable[[], object], seconds: float) -> tuple[float, float]:
    """(calls per second, client CPU µs per call) of `op`, run for about `seconds` after a short warm-up (20 calls, or
    a tenth of `seconds` for a slow call)."""
    warm = time.perf_counter() + seconds / 10
    for _ in range(20):
        op()
        if time.perf_counter() > warm:
            break
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    deadline = start + seconds
    batch = 1
    while True:
        for _ in range(batch):
            op()
        calls += batch
        batch = min(batch * 2, 10)
        now = time.perf_counter()
        if now >= deadline:
            return calls / (now - start), (time.process_time() - cpu) / calls * 1e6


def caches_setting(mc: str, rd: str) -> dict[str, dict[str, Any]]:
    """Each backend under its own KEY_PREFIX as well (two backends on one memcached would otherwise read each other's
    entries: larder's reads of a pickle are misses, and a benchmark of misses measures nothing). larder's stores get a
    5 s deadline instead of their 250 ms default: Django's clients have none, and on a machine busy with other work a
    request can wait that long for a core, which larder would count as a failure (a miss, then an ejection). Both
    in-process backends hold 10,000 entries instead of Django's 300, so that every shape's 100 keys stay."""
    backends = {
        "larder memory": {"BACKEND": "larder.django.LarderCache", "LOCATION": "memory://"},
        "LocMemCache": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "bench"},
        "larder memcached": {"BACKEND": "larder.django.LarderCache", "LOCATION": f"memcached://{mc}?timeout=5s"},
        "PyMemcacheCache": {"BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache", "LOCATION": mc},
        "larder redis": {"BACKEND": "larder.django.LarderCache", "LOCATION": f"{rd}/0?timeout=5s"},
        "RedisCache": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": f"{rd}/1"},
        "django-redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": f"{rd}/2"},
    }
    for i, config in enumerate(backends.values()):
        config["KEY_PREFIX"] = f"b{i}"
        config["OPTIONS"] = (
            {"MAX_ENTRIES": 10_000} if "memory" in config["LOCATION"] or "LocMem" in config["BACKEND"] else {}
        )
    return backends


def operations(cache: Any, keys: list[str], value: Any) -> dict[str, Callable[[], object]]:
    return {
        "get": lambda: cache.get(keys[0]),
        "set": lambda: cache.set(keys[1], value, None),
        "get_many(100)": lambda: cache.get_many(keys),
        "fetch hit": lambda: cache.get_or_set(keys[2], lambda: value, None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--seconds", type=float, default=0.2, help="time per measurement (default 0.2)")
    parser.add_argument("--only", default="", help="comma-separated stores to run: memory,memcached,redis")
    parser.add_argument("--shapes", default="", help="comma-separated values to cache (default: all of shapes.py)")
    parser.add_argument("--raw", type=Path, help="also append every measurement here (JSON lines, bench/report.py)")
    args = parser.parse_args()
    pairs = {k: v for k, v in PAIRS.items() if not args.only or k.split()[1] in args.only.split(",")}
    backends = [name for larder, peers in pairs.items() for name in (larder, *peers)]
    memcached, redis = Memcached(), Redis()
    try:
        mc, rd = memcached.address, f"redis://127.0.0.1:{redis.port}"
        settings.configure(CACHES=caches_setting(mc, rd), SECRET_KEY="bench-" + "s" * 50)
        django.setup()
        from django.core.cache import caches

        values = {k: v for k, v in shapes().items() if not args.shapes or k in args.shapes.split(",")}
        sizes = list(values)
        ops: dict[tuple[str, str, str], Callable[[], object]] = {}
        for size, value in values.items():
            for alias in backends:
                cache = caches[alias]
                keys = [f"bench:{sizes.index(size)}:{i}" for i in range(100)]
                cache.set_many(dict.fromkeys(keys, value), None)
                assert cache.get(keys[0]) == value, alias
                assert len(cache.get_many(keys)) == 100, alias
                for op, call in operations(cache, keys, value).items():
                    ops[(size, op, alias)] = call
        # (size, op, backend) -> one (ops/s, cpu µs) per round
        results: dict[tuple[str, str, str], list[tuple[float, float]]] = {key: [] for key in ops}
        print(
            f"{args.rounds} rounds, {args.seconds} s per figure, one thread; memcached {mc}, redis {rd}",
            file=sys.stderr,
        )
        for r in range(args.rounds):
            for size in sizes:
                for op in OPS:
                    order = backends[r % len(backends) :] + backends[: r % len(backends)]
                    for alias in order:
                        results[(size, op, alias)].append(rate(ops[(size, op, alias)], args.seconds))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        for alias in backends:  # a store failure would have made a read a miss: say so
            errors = getattr(caches[alias], "larder", None) and caches[alias].larder.stats().store_errors
            if errors:
                print(f"{alias}: {errors} store errors during the run (read as misses)", file=sys.stderr)
        for size, value in values.items():  # every figure was of hits: the values are all still there
            for alias in backends:
                keys = [f"bench:{sizes.index(size)}:{i}" for i in range(100)]
                assert caches[alias].get(keys[2]) == value, alias
                assert caches[alias].get_many(keys) == dict.fromkeys(keys, value), alias
        report(results, pairs, backends, sizes, args)
    finally:
        memcached.stop()
        redis.stop()


def report(
    results: dict[tuple[str, str, str], list[tuple[float, float]]],
    pairs: dict[str, tuple[str, ...]],
    backends: list[str],
    sizes: list[str],
    args: argparse.Namespace,
) -> None:
    for size in sizes:
        print(f"\n{size}: median ops/s of {args.rounds} rounds (client CPU µs per call)")
        print(f"{'backend':<18}" + "".join(f"{op:>22}" for op in OPS))
        for alias in backends:
            cells = []
            for op in OPS:
                rounds = results[(size, op, alias)]
                ops_s = statistics.median(x[0] for x in rounds)
                cpu = statistics.median(x[1] for x in rounds)
                cells.append(f"{ops_s:>12,.0f} ({cpu:>6.1f})")
            print(f"{alias:<18}" + "".join(f"{c:>22}" for c in cells))
    print("\nlarder / peer, ops/s: median of the rounds' ratios [lowest, highest]")
    print(f"{'':<44}" + "".join(f"{op:>22}" for op in OPS))
    for size in sizes:
        for larder, peers in pairs.items():
            for peer in peers:
                cells = []
                for op in OPS:
                    mine, theirs = results[(size, op, larder)], results[(size, op, peer)]
                    ratios = [a[0] / b[0] for a, b in zip(mine, theirs, strict=True)]
                    cells.append(f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]")
                print(f"{size + ' ' + larder.split()[1] + ' vs ' + peer:<44}" + "".join(f"{c:>22}" for c in cells))
    if args.raw:
        write_raw(args.raw, results, pairs, sizes)


def write_raw(
    path: Path,
    results: dict[tuple[str, str, str], list[tuple[float, float]]],
    pairs: dict[str, tuple[str, ...]],
    sizes: list[str],
) -> None:
    """Appends bench/report.py's raw rows: one meta line (bench "python": metrics ops/s and client CPU µs per call,
    a target of >= 1.0x ops/s for each larder store against each Django backend on that store), then one line per
    case (operation and value), subject (backend) and round."""
    command = ".venv/bin/python clients/python/bench/django_backends.py " + " ".join(sys.argv[1:])
    lines: list[dict[str, Any]] = [
        {
            "meta": True,
            "bench": "python",
            "title": "larder's Django backend against Django's own backends, same servers, one process",
            "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "setup": "bench/shapes.py's values: text and a query result (.values() rows) at 1 KiB and 64 KiB, a"
            " nested document, a rendered page; rounds interleaved, backends in a rotating order",
            "subject": next(iter(pairs)),
            "metrics": [
                {"name": "ops", "label": "ops/s", "better": "higher"},
                {"name": "cpu_us", "label": "client CPU µs/call", "better": "lower"},
            ],
            "pairs": [{"subject": larder, "vs": peer} for larder, peers in pairs.items() for peer in peers],
            "targets": [
                {"case": "*", "subject": larder, "vs": peer, "metric": "ops", "ratio": 1.0}
                for larder, peers in pairs.items()
                for peer in peers
            ],
        }
    ]
    for size in sizes:
        for op in OPS:
            for larder, peers in pairs.items():
                for alias in (larder, *peers):
                    for r, (ops_s, cpu) in enumerate(results[(size, op, alias)], 1):
                        lines.append({"bench": "python", "case": f"{op} {size}", "subject": alias, "round": r,
                                      "ops": ops_s, "cpu_us": cpu})  # fmt: skip
    with path.open("a") as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))


if __name__ == "__main__":
    main()
