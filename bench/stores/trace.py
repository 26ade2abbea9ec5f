#!/usr/bin/env python3
"""Request traces for bench/shared-proxies.sh: generate one, describe one, replay one through HTTP proxies.

    trace.py generate --out FILE [--requests 30000] [--urls 5000] [--alpha 0.9] [--seed 42]
        A Zipf-like trace: request i asks for the URL of rank r with probability proportional to 1 / r^alpha,
        drawn with Python's seeded Mersenne Twister (the same file on every machine). Ranks are mapped to URL
        numbers by a seeded shuffle, so popular URLs are not the low numbers. Written in the "lirs" format of
        `larder bench hit-ratio` (one integer key per line), so the same file can be replayed offline:
        larder bench hit-ratio --trace FILE --format lirs --capacity N.

    trace.py describe --trace FILE [--format lirs|arc] [--limit N] [--proxies 3]
        JSON: requests, distinct keys, and the hit ratios an unbounded cache would reach when one cache sees
        every request (shared) and when the requests are dealt round-robin to --proxies private caches.

    trace.py replay --trace FILE --ports P1,P2,P3 [--format lirs|arc] [--limit N] [--host shop.example]
                    [--prefix /p/] [--concurrency 6]
        Sends request i of the trace (GET <prefix><key>) to proxy i mod (number of ports), with the same Host
        header for all, so every proxy computes the same cache key. --concurrency workers take the requests in
        trace order over kept-alive connections. Prints JSON: requests, x-cache statuses, errors, seconds.

Traces ending in .gz, .xz or .zst are decompressed (.zst needs the zstd command).
"""

import argparse
import gzip
import http.client
import json
import lzma
import random
import subprocess
import sys
import threading
import time


def die(message):
    print(f"trace.py: {message}", file=sys.stderr)
    sys.exit(1)


# --------------------------------------------------------------------------------------------------------------
# Reading and writing


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt")
    if path.endswith(".xz"):
        return lzma.open(path, "rt")
    if path.endswith(".zst"):
        proc = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE, text=True)
        return proc.stdout
    return open(path, encoding="ascii")


def read_keys(path, fmt, limit):
    """The trace's keys, in order; at most `limit` of them (0 = all)."""
    keys = []
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                if fmt == "lirs":
                    keys.append(int(line))
                else:  # arc: start block, block count, ...
                    fields = line.split()
                    start, count = int(fields[0]), int(fields[1])
                    keys.extend(range(start, start + count))
            except (ValueError, IndexError):
                die(f"{path}: line {n} is not a {fmt} record: {line[:80]!r}")
            if limit and len(keys) >= limit:
                return keys[:limit]
    if not keys:
        die(f"{path}: no requests")
    return keys


def generate(out, requests, urls, alpha, seed):
    rng = random.Random(seed)
    ids = list(range(urls))
    rng.shuffle(ids)
    cumulative = []
    total = 0.0
    for rank in range(1, urls + 1):
        total += 1.0 / rank**alpha
        cumulative.append(total)
    ranks = rng.choices(range(urls), cum_weights=cumulative, k=requests)
    with open(out, "w", encoding="ascii") as f:
        f.write("".join(f"{ids[r]}\n" for r in ranks))


def describe(keys, proxies):
    distinct = len(set(keys))
    private_misses = sum(len(set(keys[p::proxies])) for p in range(proxies))
    return {
        "requests": len(keys),
        "distinct": distinct,
        "proxies": proxies,
        "ideal_shared_hit_ratio": 1 - distinct / len(keys),
        "ideal_shared_origin_requests": distinct,
        "ideal_private_hit_ratio": 1 - private_misses / len(keys),
        "ideal_private_origin_requests": private_misses,
    }


# --------------------------------------------------------------------------------------------------------------
# Replay


def replay(keys, ports, host, prefix, concurrency, timeout):
    lock = threading.Lock()
    state = {"next": 0, "errors": 0, "statuses": {}, "per_proxy": [{} for _ in ports], "first_error": None}

    def worker():
        connections = {}
        local = {}
        local_proxy = [{} for _ in ports]
        errors = 0
        while True:
            with lock:
                i = state["next"]
                if i >= len(keys):
                    break
                state["next"] = i + 1
            which = i % len(ports)
            path = f"{prefix}{keys[i]}"
            for attempt in range(2):
                conn = connections.get(which)
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", ports[which], timeout=timeout)
                    connections[which] = conn
                try:
                    conn.request("GET", path, headers={"Host": host, "User-Agent": "larder-bench-replay"})
                    resp = conn.getresponse()
                    resp.read()
                    status = resp.getheader("x-cache") or "-"
                    if resp.status != 200:
                        status = f"http-{resp.status}"
                    status = status.upper()
                    local[status] = local.get(status, 0) + 1
                    local_proxy[which][status] = local_proxy[which].get(status, 0) + 1
                    if resp.getheader("connection", "").lower() == "close":
                        conn.close()
                        connections.pop(which, None)
                    break
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    connections.pop(which, None)
                    if attempt == 1:
                        errors += 1
                        with lock:
                            state["first_error"] = state["first_error"] or f"{path} on :{ports[which]}: {e!r}"
        for conn in connections.values():
            conn.close()
        with lock:
            state["errors"] += errors
            for k, v in local.items():
                state["statuses"][k] = state["statuses"].get(k, 0) + v
            for p, counts in enumerate(local_proxy):
                for k, v in counts.items():
                    state["per_proxy"][p][k] = state["per_proxy"][p].get(k, 0) + v

    started = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {
        "requests": len(keys),
        "statuses": state["statuses"],
        "per_proxy": state["per_proxy"],
        "errors": state["errors"],
        "first_error": state["first_error"],
        "seconds": round(time.monotonic() - started, 3),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--out", required=True)
    g.add_argument("--requests", type=int, default=30000)
    g.add_argument("--urls", type=int, default=5000)
    g.add_argument("--alpha", type=float, default=0.9)
    g.add_argument("--seed", type=int, default=42)
    for name in ("describe", "replay"):
        p = sub.add_parser(name)
        p.add_argument("--trace", required=True)
        p.add_argument("--format", choices=["lirs", "arc"], default="lirs")
        p.add_argument("--limit", type=int, default=0)
        if name == "describe":
            p.add_argument("--proxies", type=int, default=3)
        else:
            p.add_argument("--ports", required=True)
            p.add_argument("--host", default="shop.example")
            p.add_argument("--prefix", default="/p/")
            p.add_argument("--concurrency", type=int, default=6)
            p.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    if args.what == "generate":
        if args.requests < 1 or args.urls < 1 or args.alpha < 0:
            die("--requests and --urls must be positive and --alpha not negative")
        generate(args.out, args.requests, args.urls, args.alpha, args.seed)
    elif args.what == "describe":
        print(json.dumps(describe(read_keys(args.trace, args.format, args.limit), args.proxies)))
    else:
        ports = [int(p) for p in args.ports.split(",") if p]
        if not ports:
            die("--ports: no port")
        keys = read_keys(args.trace, args.format, args.limit)
        print(json.dumps(replay(keys, ports, args.host, args.prefix, max(1, args.concurrency), args.timeout)))


if __name__ == "__main__":
    main()
