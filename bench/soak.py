#!/usr/bin/env python3
"""bench/soak.py: the front with an L1 over memcached under mixed load for a long time (issue 33, deliverable 5).

What it does
  Starts memcached, an origin of this script and `larder serve --store memcached://… --l1 64M` with its admin API,
  then for --seconds keeps it busy with:
    - 24 kept-alive connections asking for small pages (2 KiB; 20,000 URLs, Zipf-like, so hits and misses mix),
      large pages (256 KiB; 200 URLs), pages the app forbids storing (no-store), and URLs never asked before;
    - a purge every 2 s through the admin API (a tag that covers 1/20 of the small pages, or a URL prefix);
    - clients that stall: every 3 s a connection that sends half a request and waits, and one that asks for a large
      page and reads it a kilobyte a second; each gives up after 15 s.
  Every 5 s it samples the front's resident memory (VmRSS), open file descriptors, threads, and the requests of the
  window (count, errors, p50, p99).

What it checks (exit 1 when one fails; a short run is part of `make test`)
  - memory: the largest VmRSS stays within the configured bounds (L1 64 MiB + the fill buffer, 64 MiB by default +
    the outage memory, which is the L1 itself here) plus an overhead of 96 MiB for the runtime, connections, buffers
    and the allocator's slack; the figure is stated in the report;
  - no leak: within 5 s of the last client closing, none of the clients' connections is open, the descriptors are
    back within 16 of where they were before the load began (besides kept-alive connections to the app and the
    store, counted apart), and
    VmRSS has not grown by more than 32 MiB between the second and the last third of the run (the first is the
    warm-up, while the L1 fills);
  - steady latency: the median of the windows' p99 in the last third is within twice that of the second third plus
    10 ms; and no request fails except the stallers'.

Usage: bench/soak.py [--seconds 1800] [--binary target/release/larder] [--json FILE]
Only the standard library; memcached from Debian's package.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drills import ERRORS, ROOT, Server, free_port, percentile, wait_port

MIB = 1 << 20
L1_BYTES = 64 * MIB
FILL_BUFFER = 64 * MIB
OVERHEAD = 96 * MIB
SMALL, LARGE = b"s" * 2048, b"L" * (256 << 10)
#: Failed requests by kind (a status, or the exception's class), for the report.
KINDS: dict[str, int] = {}
#: The first failed requests, with their paths, for the report.
SLOW: list[str] = []


class Origin:
    """Small and large cacheable pages with tags, uncacheable pages; 5 ms to render. It runs in a process of its own
    (`soak.py --origin PORT`), so that the load generator never holds up the app it measures (one interpreter lock
    for both made a starved machine's app take seconds, and the clients waiting on it time out)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, __file__, "--origin", str(self.port)])
        wait_port(self.port, "the soak's origin")

    @property
    def requests(self) -> int:
        """How many requests it has answered (its own count, asked at /__count)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/__count", timeout=10) as answer:
            return int(answer.read())

    def stop(self) -> None:
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def serve_origin(port: int) -> None:
    """The origin's process."""
    served = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        with contextlib.suppress(Exception):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                if path == "/__count":
                    body, headers = str(served).encode(), "cache-control: no-store\r\n"
                else:
                    served += 1
                    await asyncio.sleep(0.005)
                    kind, _, n = path.strip("/").partition("/")
                    if kind == "l":
                        body, headers = LARGE, "cache-control: max-age=30\r\nsurrogate-key: large\r\n"
                    elif kind == "u":
                        body, headers = SMALL, "cache-control: no-store\r\n"
                    else:
                        number = n.split("?")[0]
                        tag = f"g{int(number) % 20}" if number.isdigit() else "new"
                        body, headers = SMALL, f"cache-control: max-age=30\r\nsurrogate-key: small {tag}\r\n"
                writer.write(f"HTTP/1.1 200 OK\r\n{headers}content-length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=512)
        await server.serve_forever()

    asyncio.run(main())


def zipf_index(n: int, alpha: float = 0.9) -> int:
    """An index in [0, n) drawn roughly Zipf-like (inverse transform of a continuous power law)."""
    u = random.random()
    return min(n - 1, int((n ** (1 - alpha) * u) ** (1 / (1 - alpha))))


async def client(port: int, end: float, window: dict[str, list[float]]) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    serial = 0
    while time.monotonic() < end:
        roll = random.random()
        if roll < 0.75:
            path = f"/s/{zipf_index(20_000)}"
        elif roll < 0.85:
            path = f"/l/{random.randrange(200)}"
        elif roll < 0.92:
            path = f"/u/{random.randrange(1000)}"
        else:
            serial += 1
            path = f"/s/new?c={id(window)}-{serial}-{random.random()}"
        started = time.monotonic()
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
            assert reader is not None
            writer.write(f"GET {path} HTTP/1.1\r\nhost: shop.example\r\n\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            length = next(
                int(h.split(b":", 1)[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")
            )
            await asyncio.wait_for(reader.readexactly(length), 10)
            status = head.split(b" ", 2)[1]
            if status != b"200":
                window["errors"].append(1)
                KINDS[status.decode()] = KINDS.get(status.decode(), 0) + 1
            window["latency"].append((time.monotonic() - started) * 1000)
        except ERRORS as error:
            window["errors"].append(1)
            KINDS[type(error).__name__] = KINDS.get(type(error).__name__, 0) + 1
            SLOW.append(f"{path} failed after {time.monotonic() - started:.1f} s: {type(error).__name__}")
            if writer is not None:
                writer.close()
            reader = writer = None


async def staller(port: int) -> None:
    """Half a request, then silence for 15 s."""
    writer: asyncio.StreamWriter | None = None
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /s/1 HTTP/1.1\r\nhost: shop")
        await writer.drain()
        await asyncio.sleep(15)
    except ERRORS:
        return
    finally:
        if writer is not None:
            writer.close()


async def slow_reader(port: int) -> None:
    """A large page read a kilobyte a second, for 15 s."""
    writer: asyncio.StreamWriter | None = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
        writer.write(b"GET /l/7 HTTP/1.1\r\nhost: shop.example\r\n\r\n")
        await writer.drain()
        for _ in range(15):
            await reader.read(1024)
            await asyncio.sleep(1)
    except ERRORS:
        return
    finally:
        if writer is not None:
            writer.close()


def purge(admin: int) -> None:
    body = (
        {"tag": f"g{random.randrange(20)}"}
        if random.random() < 0.7
        else {"url_prefix": f"http://shop.example/s/{random.randrange(10)}"}
    )
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin}/purge",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with (
        contextlib.suppress(Exception),
        urllib.request.urlopen(request, timeout=5) as answer,
    ):
        answer.read()


def connections(pid: int, listen: int) -> tuple[int, int]:
    """The front's TCP connections: (accepted on its listening port, every other one: upstream and store)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    accepted = other = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes and fields[3] != "0A":  # not the listening socket
                    if int(fields[1].rsplit(":", 1)[1], 16) == listen:
                        accepted += 1
                    else:
                        other += 1
    return accepted, other


def proc(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    field = lambda name: int(next(line.split()[1] for line in status.splitlines() if line.startswith(name + ":")))
    return {
        "rss": field("VmRSS") * 1024,
        "threads": field("Threads"),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


async def load(port: int, admin: int, seconds: float, pid: int, samples: list[dict[str, float]]) -> None:
    end = time.monotonic() + seconds
    window: dict[str, list[float]] = {"latency": [], "errors": []}
    tasks = [asyncio.create_task(client(port, end, window)) for _ in range(24)]
    background: set[asyncio.Task[None]] = set()
    began = time.monotonic()
    next_sample, next_purge, next_stall = began + 5, began + 2, began + 3
    while time.monotonic() < end:
        await asyncio.sleep(0.1)
        now = time.monotonic()
        if now >= next_purge:
            next_purge += 2
            await asyncio.to_thread(purge, admin)
        if now >= next_stall:
            next_stall += 3
            for make in (staller, slow_reader):
                task = asyncio.create_task(make(port))
                background.add(task)
                task.add_done_callback(background.discard)
        if now >= next_sample:
            next_sample += 5
            seen = sorted(window["latency"])
            errors = len(window["errors"])
            window["latency"].clear()
            window["errors"].clear()
            sample = {
                "t": round(now - began, 1),
                **proc(pid),
                "requests": len(seen),
                "errors": errors,
                "p50_ms": round(percentile(seen, 0.5), 2),
                "p99_ms": round(percentile(seen, 0.99), 2),
            }
            samples.append(sample)
            print(json.dumps(sample), file=sys.stderr, flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)
    for task in list(background):
        task.cancel()
    await asyncio.gather(*background, return_exceptions=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description="The front with an L1 over memcached under mixed load (bench/soak.py)."
    )
    parser.add_argument("--seconds", type=float, default=1800)
    parser.add_argument("--binary", default=str(ROOT / "target/release/larder"))
    parser.add_argument("--json", default="")
    parser.add_argument("--origin", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.origin:
        serve_origin(args.origin)
        return 0
    memcached = Server("memcached")
    origin = Origin()
    port, admin = free_port(), free_port()
    front = subprocess.Popen(
        [
            args.binary,
            "serve",
            "--upstream",
            f"http://127.0.0.1:{origin.port}",
            "--listen",
            f"127.0.0.1:{port}",
            "--admin",
            f"127.0.0.1:{admin}",
            "--admin-no-token",
            "--store",
            f"memcached://127.0.0.1:{memcached.port}",
            "--l1",
            str(L1_BYTES),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    samples: list[dict[str, float]] = []
    try:
        wait_port(port, "larder serve")
        before = proc(front.pid)
        asyncio.run(load(port, admin, args.seconds, front.pid, samples))
        # Every client has closed its connections; the front's descriptors must come back (a leak never does).
        settle = time.monotonic() + 5
        while time.monotonic() < settle and connections(front.pid, port)[0] > 0:
            time.sleep(0.2)
        after = proc(front.pid)
        accepted, kept = connections(front.pid, port)
        app_requests = origin.requests
    finally:
        front.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            front.wait(timeout=10)
        origin.stop()
        memcached.stop()
    if len(samples) < 3:
        print("soak: too short to judge (give --seconds 15 or more)", file=sys.stderr)
        return 1
    # The first third is the warm-up (the L1 fills to its bound); growth and latency compare the second and the last.
    third = max(1, len(samples) // 3)
    first, last = samples[third : 2 * third] or samples[:1], samples[-third:]
    bound = L1_BYTES + FILL_BUFFER + OVERHEAD
    peak = max(s["rss"] for s in samples)
    growth = statistics.median(s["rss"] for s in last) - statistics.median(s["rss"] for s in first)
    p99_first = statistics.median(s["p99_ms"] for s in first)
    p99_last = statistics.median(s["p99_ms"] for s in last)
    failed_requests = sum(s["errors"] for s in samples)
    checks = {
        f"peak VmRSS {peak / MIB:.0f} MiB within {bound / MIB:.0f} MiB (L1 64 + fill buffer 64 + overhead 96)": peak
        <= bound,
        f"VmRSS grew {growth / MIB:.1f} MiB from the second third to the last (at most 32)": growth <= 32 * MIB,
        f"clients' connections still open 5 s after the last closed: {accepted} (none should)": accepted == 0,
        f"open descriptors {before['fds']} before, {after['fds']} after, of which {kept} kept connections to the app and"
        f" the store (at most 16 more besides those)": after["fds"] <= before["fds"] + 16 + kept,
        f"p99 {p99_first:.1f} ms in the second third, {p99_last:.1f} ms in the last (at most 2x + 10 ms)": p99_last
        <= 2 * p99_first + 10,
        f"{failed_requests} requests failed (none should){': ' + json.dumps(KINDS) if KINDS else ''}": failed_requests
        == 0,
    }
    total = sum(s["requests"] for s in samples)
    print(
        f"soak: {args.seconds:.0f} s, {total:,} requests, {app_requests:,} reached the app, threads {before['threads']}->{after['threads']}"
    )
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    for line in SLOW[:10]:
        print(f"  failed: {line}")
    if args.json:
        Path(args.json).write_text(json.dumps({"samples": samples, "checks": checks, "before": before, "after": after}))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
