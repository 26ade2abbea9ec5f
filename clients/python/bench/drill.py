"""The fetch drill (issue 33, deliverable 4): loads larder.Cache steadily from many threads while a harness
(bench/drills.py) freezes, kills, slows and restarts the store behind it, and reports every interval what the
callers saw.

    .venv/bin/python clients/python/bench/drill.py --store memcached://127.0.0.1:11211 --seconds 10   (from the root)

`workers` threads each loop until `seconds` have passed: pick n uniformly in [0, keys) and call
`cache.fetch("drill:<n>", loader, ttl=ttl-ms / 1000)` on one `larder.Cache(store)` with default options (the outage
memory on, at its default size). The loader counts one load, sleeps `loader-ms` and returns a query result of about
1 KiB. A fetch that raises counts one error (and one call: it completed); the worker carries on.

Every `interval-ms` one line of JSON goes to standard output, at once:
    {"t_ms": …, "calls": …, "errors": …, "loads": …, "p50_ms": …, "p99_ms": …, "max_ms": …}
(counts within the interval; latencies of the calls completed in it, nearest-rank percentiles, 0 when none), then,
after `seconds`, a last interval line for what completed since the previous one and
    {"done": true, "calls": …, "errors": …, "loads": …}
and exit 0. Workers stop starting calls at `seconds`; calls still in flight get at most a grace of 0.5 s, after which
they are abandoned (daemon threads; the process leaves with os._exit), so the program ends within 2 s of `seconds`
even with the store frozen. Logs go to standard error; bad arguments print a usage message there and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
from typing import Any

import larder
from larder.stores import UrlError

#: How long calls still in flight at `seconds` may take to finish before they are abandoned.
GRACE_S = 0.5


class Counters:
    """What the workers saw, per interval and in total. One lock; a worker holds it for a few additions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.errors = 0
        self.loads = 0
        self.latencies: list[float] = []
        self.total_calls = 0
        self.total_errors = 0
        self.total_loads = 0

    def call(self, latency_ms: float, failed: bool) -> None:
        with self.lock:
            self.calls += 1
            self.latencies.append(latency_ms)
            if failed:
                self.errors += 1

    def load(self) -> None:
        with self.lock:
            self.loads += 1

    def interval(self, t_ms: int) -> dict[str, Any]:
        """The interval's line, and a new interval begins."""
        with self.lock:
            calls, errors, loads, latencies = self.calls, self.errors, self.loads, self.latencies
            self.calls = self.errors = self.loads = 0
            self.latencies = []
            self.total_calls += calls
            self.total_errors += errors
            self.total_loads += loads
        latencies.sort()
        return {
            "t_ms": t_ms,
            "calls": calls,
            "errors": errors,
            "loads": loads,
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "max_ms": round(latencies[-1], 3) if latencies else 0.0,
        }

    def done(self) -> dict[str, Any]:
        with self.lock:
            return {"done": True, "calls": self.total_calls, "errors": self.total_errors, "loads": self.total_loads}


def percentile(ordered: list[float], p: float) -> float:
    """The nearest-rank `p`th percentile of an ascending list (0.0 for an empty one)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return round(ordered[rank - 1], 3)


def query_result(n: int) -> dict[str, Any]:
    """What the application's query returns for key n: a map holding a list of 25 small maps, about 1 KiB."""
    return {"id": n, "rows": [{"i": j, "name": f"row {j}", "score": j * 1.5} for j in range(25)]}


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def log(message: str) -> None:
    print(f"drill: {message}", file=sys.stderr, flush=True)


def worker(
    cache: larder.Cache, counters: Counters, args: argparse.Namespace, deadline: float, logged: set[str]
) -> None:
    rng = random.Random()
    ttl = args.ttl_ms / 1000
    loader_s = args.loader_ms / 1000
    while time.perf_counter() < deadline:
        n = rng.randrange(args.keys)

        def loader(n: int = n) -> dict[str, Any]:
            counters.load()
            time.sleep(loader_s)
            return query_result(n)

        start = time.perf_counter()
        failed = False
        try:
            cache.fetch(f"drill:{n}", loader, ttl=ttl)
        except Exception as e:
            failed = True
            kind = type(e).__name__
            if kind not in logged:  # each kind of error once, not once per call
                logged.add(kind)
                log(f"fetch raised {kind}: {e}")
        counters.call((time.perf_counter() - start) * 1000, failed)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"cannot be negative: {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


# argparse names the type function in its message ("invalid positive_int value"); these read better.
positive_int.__name__ = "integer (at least 1)"
non_negative_int.__name__ = "integer (0 or more)"
positive_float.__name__ = "positive number"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="drill.py",
        description="Loads larder.Cache.fetch from many threads for a while and prints, every interval, one JSON line "
        "of what the callers saw (calls, errors, loads, latencies), then a done line.",
    )
    parser.add_argument("--store", required=True, help="the store URL, e.g. memcached://127.0.0.1:11211")
    parser.add_argument("--seconds", type=positive_float, required=True, help="how long to run")
    parser.add_argument("--workers", type=positive_int, default=16, help="concurrent callers (threads); default 16")
    parser.add_argument("--keys", type=positive_int, default=50, help="keys drill:0 .. drill:<keys-1>; default 50")
    parser.add_argument("--ttl-ms", type=non_negative_int, default=60000, help="each entry's TTL; default 60000")
    parser.add_argument("--loader-ms", type=non_negative_int, default=20, help="how long a load takes; default 20")
    parser.add_argument(
        "--interval-ms", type=positive_int, default=250, help="how often a line is printed; default 250"
    )
    args = parser.parse_args(argv)
    try:
        args.cache = larder.Cache(args.store)
    except (UrlError, ValueError) as e:
        parser.error(f"--store {args.store}: {e}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cache: larder.Cache = args.cache
    counters = Counters()
    logged: set[str] = set()
    log(
        f"{args.workers} workers, {args.keys} keys, ttl {args.ttl_ms} ms, loader {args.loader_ms} ms, "
        f"{args.seconds} s on {args.store}"
    )
    start = time.perf_counter()
    deadline = start + args.seconds
    threads = [
        threading.Thread(target=worker, args=(cache, counters, args, deadline, logged), name=f"drill-{i}", daemon=True)
        for i in range(args.workers)
    ]
    for thread in threads:
        thread.start()

    interval = args.interval_ms / 1000
    tick = 1
    while True:
        at = start + tick * interval
        if at >= deadline:
            break
        time.sleep(max(0.0, at - time.perf_counter()))
        emit(counters.interval(round((time.perf_counter() - start) * 1000)))
        tick += 1
    time.sleep(max(0.0, deadline - time.perf_counter()))
    grace_end = deadline + GRACE_S
    for thread in threads:
        thread.join(max(0.0, grace_end - time.perf_counter()))
    stuck = sum(thread.is_alive() for thread in threads)
    emit(counters.interval(round((time.perf_counter() - start) * 1000)))
    emit(counters.done())
    stats = cache.stats()
    log(f"cache stats: {stats}")
    if stuck:
        log(f"{stuck} calls still in flight abandoned")
        sys.stderr.flush()
        os._exit(0)  # daemon threads blocked in the store: do not wait for them, nor let shutdown trip over them
    cache.close()


if __name__ == "__main__":
    main()
