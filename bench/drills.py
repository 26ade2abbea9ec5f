#!/usr/bin/env python3
"""bench/drills.py: fault drills (issue 33). The front and every client's `fetch` under sustained load while the
store is frozen, killed, slowed past its timeout, restarted empty, or loses one server of a pool of three.

What it measures
  For each drill and target, a real memcached (or redis-server) with `larder-faults` in front of each server, and
  the target loading it for --seconds: the fault is set at 1/3 of the run and lifted at 2/3. Per drill:
    app      requests that reached the app (loader runs; the front's origin requests) while the fault lasted and
             until the store carried the traffic again, beside the calls made meanwhile (what the app would have
             received without a cache);
    errors   calls that failed (target 0);
    p99      the worst interval's 99th percentile latency while the fault lasted;
    recover  seconds from the end of the fault until the store carries the traffic again: the first interval in
             which the bytes the proxy passes from the server reach half their rate before the fault.
  Every target also prints one JSON line per 250 ms; the report draws them over time (docs/bench/drill-*.svg).

Targets
  rust, python, ruby, typescript, go, elixir: each client's drill program (the contract below);
  front, front-l1: `larder serve --store …` (without and with `--l1 64M`) in front of an origin of this script
  (every path: 200, Cache-Control: max-age=60, 20 ms to render, a 2 KiB page), loaded by 16 kept-alive
  connections of this script over 50 URLs.

The drill program contract (crates/cache/examples/drill.rs, clients/*/bench/drill.*)
  PROGRAM --store URL --seconds S [--workers 16] [--keys 50] [--ttl-ms 60000] [--loader-ms 20] [--interval-ms 250]
  `workers` callers fetch drill:<n> (n uniform in [0, keys)) with ttl-ms; the loader counts a load, sleeps
  loader-ms and returns {"id": n, "rows": [{"i": j, "name": "row j", "score": j * 1.5} for 24 rows]}. Every
  interval it prints {"t_ms", "calls", "errors", "loads", "p50_ms", "p99_ms", "max_ms"}; at the end
  {"done": true, "calls", "errors", "loads"}; it stops within 2 s of --seconds even with the store frozen.

Usage: bench/drills.py [--quick] [--seconds S] [--targets a,b] [--drills a,b] [--out DIR] [--charts DIR]
       bench/drills.py --issue-table   (issue 33's table: 40 clients x 15 requests for one page, store frozen/killed)
  --quick: 9 s runs of frozen and killed memcached only (about 3 minutes); the full run is about 25 minutes.
Needs memcached, redis-server, the release build (target/release/larder, target/release/examples/drill), the
debug larder-faults, and each client's toolchain (the Makefile's `bench` target sets them up). Only the standard
library.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(
    os.environ.get("LARDER_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "larder"
)
FAULTS = ROOT / "target" / "debug" / "larder-faults"
INTERVAL_MS = 250
KEYS = 50


ERRORS = (OSError, EOFError, ValueError, StopIteration, asyncio.TimeoutError, asyncio.IncompleteReadError)


def percentile(seen: list[float], q: float) -> float:
    """The q-quantile of sorted latencies (nearest rank), 0 when there are none."""
    return seen[min(int(len(seen) * q), len(seen) - 1)] if seen else 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), timeout=0.2),
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


# ---- servers and the fault proxies --------------------------------------------------------------------------


class Server:
    """A memcached or redis-server on a free loopback port."""

    def __init__(self, kind: str) -> None:
        self.kind, self.port = kind, free_port()
        if kind == "memcached":
            argv = [
                "memcached",
                "-l",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "0",
                "-m",
                "64",
                "-t",
                "2",
            ]
            argv += ["-u", "root"] if os.geteuid() == 0 else []
        else:
            argv = [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            argv += ["--protected-mode", "no", "--loglevel", "warning"]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, kind)

    def flush(self) -> None:
        """Empties it, as a restarted server is."""
        command = b"flush_all\r\n" if self.kind == "memcached" else b"FLUSHALL\r\n"
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(command)
            s.recv(100)

    def stop(self) -> None:
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


class Faults:
    """larder-faults in front of a server: one command per line on its standard input."""

    def __init__(self, server: Server) -> None:
        self.process = subprocess.Popen(
            [str(FAULTS), f"127.0.0.1:{server.port}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.address = self.process.stdout.readline().strip()
        self.lock = threading.Lock()

    def command(self, line: str) -> str:
        with self.lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
            answer = self.process.stdout.readline().strip()
        if not answer.startswith("ok"):
            raise RuntimeError(f"larder-faults {line}: {answer}")
        return answer

    def bytes_down(self) -> int:
        return int(json.loads(self.command("stats")[3:])["bytes_down"])

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


# ---- drills ------------------------------------------------------------------------------------------------


@dataclass
class Drill:
    name: str
    store: str  # memcached, redis
    servers: int  # 1, or 3 for the pool
    start: str  # the fault command
    note: str
    restart_empty: bool = False

    def url(self, faults: list[Faults]) -> str:
        hosts = ",".join(f.address for f in faults)
        return f"redis://{hosts}/0" if self.store == "redis" else f"memcached://{hosts}"


DRILLS = [
    Drill(
        "memcached-frozen",
        "memcached",
        1,
        "freeze",
        "stopped (SIGSTOP-like): connections open, nothing answered",
    ),
    Drill(
        "memcached-killed",
        "memcached",
        1,
        "refuse",
        "killed: nothing listens, open connections closed",
    ),
    Drill(
        "memcached-slow",
        "memcached",
        1,
        "delay 400",
        "every reply held 400 ms, past the 250 ms timeout",
    ),
    Drill(
        "memcached-restarted-empty",
        "memcached",
        1,
        "refuse",
        "killed, then back empty",
        restart_empty=True,
    ),
    Drill(
        "memcached-pool-one-lost",
        "memcached",
        3,
        "refuse",
        "one of three servers killed",
    ),
    Drill(
        "redis-frozen",
        "redis",
        1,
        "freeze",
        "stopped: connections open, nothing answered",
    ),
    Drill("redis-killed", "redis", 1, "refuse", "killed"),
    Drill("redis-cluster-failover", "redis+cluster", 6, "kill a master", "a master killed, its replica promoted"),
]


# ---- targets -----------------------------------------------------------------------------------------------


def go_env() -> dict[str, str]:
    return {
        "GOMODCACHE": str(CACHE_DIR / "go" / "mod"),
        "GOCACHE": str(CACHE_DIR / "go" / "build"),
        "GOFLAGS": "-mod=readonly",
        "GOTOOLCHAIN": "local",
    }


def elixir_env() -> dict[str, str]:
    return {
        "MIX_HOME": str(CACHE_DIR / "mix"),
        "HEX_HOME": str(CACHE_DIR / "hex"),
        "MIX_ENV": "dev",
    }


#: name -> (working directory, argv prefix, environment additions, build command or None)
PROGRAMS: dict[str, tuple[Path, list[str], dict[str, str], list[str] | None]] = {
    "rust": (ROOT, [str(ROOT / "target/release/examples/drill")], {}, None),
    "python": (
        ROOT,
        [str(ROOT / ".venv/bin/python"), "clients/python/bench/drill.py"],
        {},
        None,
    ),
    "ruby": (ROOT, ["ruby", "clients/ruby/bench/drill.rb"], {}, None),
    "typescript": (ROOT, ["node", "clients/typescript/build/bench/drill.js"], {}, None),
    "go": (
        ROOT / "clients/go",
        [str(ROOT / "clients/go/bin/drill")],
        {},
        ["go", "build", "-o", "bin/drill", "./bench/drill"],
    ),
    "elixir": (
        ROOT / "clients/elixir",
        ["mix", "run", "bench/drill.exs"],
        {},
        ["mix", "compile"],
    ),
}
TARGETS = [*PROGRAMS, "front", "front-l1"]


def build(targets: list[str]) -> None:
    """Builds what the targets run: the release front and Rust drill, the Go binary, the TypeScript and Elixir code."""
    cargo = [
        "cargo",
        "build",
        "--release",
        "--locked",
        "-p",
        "larder-cli",
        "-p",
        "larder-testkit",
    ]
    subprocess.run([*cargo, "--bins"], cwd=ROOT, check=True, stdout=sys.stderr)
    subprocess.run(
        ["cargo", "build", "--locked", "-p", "larder-testkit", "--bins"],
        cwd=ROOT,
        check=True,
        stdout=sys.stderr,
    )
    if "rust" in targets:
        subprocess.run(
            [
                "cargo",
                "build",
                "--release",
                "--locked",
                "-p",
                "larder-cache",
                "--example",
                "drill",
            ],
            cwd=ROOT,
            check=True,
            stdout=sys.stderr,
        )
    if "typescript" in targets:
        subprocess.run(
            ["npx", "tsc", "-p", "tsconfig.json"],
            cwd=ROOT / "clients/typescript",
            check=True,
            stdout=sys.stderr,
        )
    for name in targets:
        if name not in PROGRAMS:
            continue
        cwd, _, _, command = PROGRAMS[name]
        if command:
            env = {
                **os.environ,
                **(go_env() if name == "go" else elixir_env() if name == "elixir" else {}),
            }
            subprocess.run(command, cwd=cwd, env=env, check=True, stdout=sys.stderr)


@dataclass
class Run:
    """What one target did in one drill."""

    lines: list[dict[str, float]] = field(default_factory=list)
    fault_at: float = 0.0
    lifted_at: float = 0.0
    bytes_down: list[tuple[float, int]] = field(default_factory=list)
    done: dict[str, float] = field(default_factory=dict)
    failure: str = ""


def read_lines(stream: IO[str], run: Run, started: float) -> None:
    """The program's JSON lines, each stamped with when it arrived (seconds since the harness started it)."""
    for raw in stream:
        with contextlib.suppress(json.JSONDecodeError):
            line = json.loads(raw)
            if line.get("done"):
                run.done = line
            else:
                line["at"] = time.monotonic() - started
                run.lines.append(line)


# ---- the front's origin and load ---------------------------------------------------------------------------


class Origin:
    """The app behind the front: every path 200, max-age=60, 20 ms to render, a 2 KiB page; counts its requests."""

    def __init__(self, render: float = 0.02) -> None:
        self.port = free_port()
        self.requests = 0
        self.render = render
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self.ready.wait(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self.ready.set()
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(server.serve_forever())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = b"<html>" + b"x" * 2048 + b"</html>"
        with contextlib.suppress(Exception):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head:
                    return
                with self.lock:
                    self.requests += 1
                await asyncio.sleep(self.render)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncache-control: max-age=60\r\ncontent-type: text/html\r\n"
                    + f"content-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()

    def taken(self) -> int:
        with self.lock:
            n, self.requests = self.requests, 0
        return n


async def load_front(port: int, seconds: float, origin: Origin, out: list[str]) -> None:
    """16 kept-alive connections asking for /p/<n>, n in [0, 50); one line per interval, as a drill program prints."""
    end = time.monotonic() + seconds
    latencies: list[float] = []
    errors = [0]

    async def worker() -> None:
        reader = writer = None
        while time.monotonic() < end:
            started = time.monotonic()
            try:
                if writer is None:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
                n = random.randrange(KEYS)
                writer.write(f"GET /p/{n} HTTP/1.1\r\nhost: shop.example\r\n\r\n".encode())
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)  # type: ignore[union-attr]
                status = head.split(b" ", 2)[1]
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await asyncio.wait_for(reader.readexactly(length), 10)  # type: ignore[union-attr]
                if status != b"200":
                    errors[0] += 1
            except ERRORS:
                errors[0] += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
            latencies.append((time.monotonic() - started) * 1000)

    async def reporter() -> None:
        began = time.monotonic()
        while time.monotonic() < end:
            await asyncio.sleep(INTERVAL_MS / 1000)
            seen, errs = sorted(latencies), errors[0]
            latencies.clear()
            errors[0] = 0
            out.append(
                json.dumps(
                    {
                        "t_ms": int((time.monotonic() - began) * 1000),
                        "calls": len(seen),
                        "errors": errs,
                        "loads": origin.taken(),
                        "p50_ms": percentile(seen, 0.5),
                        "p99_ms": percentile(seen, 0.99),
                        "max_ms": seen[-1] if seen else 0.0,
                    }
                )
            )

    await asyncio.gather(reporter(), *(worker() for _ in range(16)), return_exceptions=True)


def start_front(url: str, origin: Origin, l1: bool) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    argv = [
        str(ROOT / "target/release/larder"),
        "serve",
        "--upstream",
        f"http://127.0.0.1:{origin.port}",
    ]
    argv += ["--listen", f"127.0.0.1:{port}", "--no-admin", "--store", url] + (["--l1", "64M"] if l1 else [])
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, "larder serve")
    return process, port


# ---- one drill, one target ---------------------------------------------------------------------------------


class Fixture:
    """The store of one drill and its fault: faulted servers behind larder-faults."""

    def __init__(self, drill: Drill) -> None:
        self.drill = drill
        self.servers = [Server(drill.store) for _ in range(drill.servers)]
        self.faults = [Faults(s) for s in self.servers]
        self.broken = self.faults[1] if drill.servers == 3 else self.faults[0]
        self.url = drill.url(self.faults)

    def fault(self) -> None:
        self.broken.command(self.drill.start)

    def lift(self) -> None:
        if self.drill.restart_empty:
            self.servers[0].flush()
        self.broken.command("pass")

    def progress(self) -> int:
        """What the broken server has carried so far: bytes of replies through its proxy."""
        return self.broken.bytes_down()

    def stop(self) -> None:
        for f in self.faults:
            f.stop()
        for s in self.servers:
            s.stop()


class ClusterFixture:
    """A Redis Cluster of three masters with a replica each; the fault kills a master (SIGKILL), its replica takes
    over after cluster-node-timeout (1 s), and recovery is the promoted replica carrying the dead master's traffic."""

    def __init__(self, drill: Drill) -> None:
        self.drill = drill
        self.dir = tempfile.mkdtemp(prefix="larder-drill-cluster-")
        # A node's cluster bus listens 10,000 ports above it, so its own port must be at most 55535.
        self.ports: list[int] = []
        while len(self.ports) < 6:
            port = free_port()
            if port <= 55000 and port not in self.ports:
                self.ports.append(port)
        self.processes = []
        for port in self.ports:
            argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
            argv += ["--cluster-node-timeout", "1000", "--protected-mode", "no", "--loglevel", "warning"]
            self.processes.append(
                subprocess.Popen(argv, cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        for port in self.ports:
            wait_port(port, "redis-server (cluster)")
        create = ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports)]
        subprocess.run(
            [*create, "--cluster-replicas", "1", "--cluster-yes"], check=True, capture_output=True, timeout=60
        )
        deadline = time.monotonic() + 30
        while not self._ready() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.url = "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])
        self.master, self.replica = self._pair()
        self.base: tuple[int, int] | None = None

    def _cli(self, port: int, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=5, check=False
        )
        return done.stdout

    def _nodes(self, port: int) -> list[list[str]]:
        return [line.split() for line in self._cli(port, "cluster", "nodes").splitlines() if line.strip()]

    def _ready(self) -> bool:
        ok = all("cluster_state:ok" in self._cli(p, "cluster", "info") for p in self.ports)
        replicas = sum(1 for node in self._nodes(self.ports[0]) if "slave" in node[2])
        return ok and replicas == 3

    def _pair(self) -> tuple[int, int]:
        """A master's port and its replica's."""
        nodes = self._nodes(self.ports[0])
        by_id = {node[0]: int(node[1].split("@")[0].rsplit(":", 1)[1]) for node in nodes}
        for node in nodes:
            if "slave" in node[2]:
                return by_id[node[3]], by_id[node[0]]
        raise RuntimeError("the cluster has no replica")

    def fault(self) -> None:
        self.base = (self._commands(self.master), self._commands(self.replica))
        self.processes[self.ports.index(self.master)].kill()

    def lift(self) -> None:
        """The dead master stays dead: the replica's promotion is the recovery."""

    def _commands(self, port: int) -> int:
        for line in self._cli(port, "info", "stats").splitlines():
            if line.startswith("total_commands_processed:"):
                return int(line.split(":", 1)[1])
        return 0

    def progress(self) -> int:
        """Commands the master processed, then, once it is killed, those its replica has processed since (it carries
        the dead master's keys once promoted): one count whose rate recovers when the replica takes the traffic."""
        if self.base is None:
            return self._commands(self.master)
        return self.base[0] + self._commands(self.replica) - self.base[1]

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


def run_one(drill: Drill, target: str, seconds: float) -> Run:
    fixture = ClusterFixture(drill) if drill.store == "redis+cluster" else Fixture(drill)
    run = Run()
    url = fixture.url
    stops: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = []
    try:
        started = time.monotonic()
        if target.startswith("front"):
            origin = Origin()
            front, port = start_front(url, origin, target == "front-l1")
            stops.append(front)
            out: list[str] = []
            thread = threading.Thread(target=lambda: asyncio.run(load_front(port, seconds, origin, out)), daemon=True)
            started = time.monotonic()
            thread.start()

            def poll() -> list[dict[str, float]]:
                return [json.loads(x) for x in list(out)]
        else:
            cwd, argv, env_add, _ = PROGRAMS[target]
            env = {
                **os.environ,
                **(go_env() if target == "go" else elixir_env() if target == "elixir" else {}),
                **env_add,
            }
            argv = [*argv, "--store", url, "--seconds", str(int(seconds)), "--interval-ms", str(INTERVAL_MS)]
            program = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
            stops.append(program)
            assert program.stdout is not None
            started = time.monotonic()
            thread = threading.Thread(target=read_lines, args=(program.stdout, run, started), daemon=True)
            thread.start()

            def poll() -> list[dict[str, float]]:
                return run.lines

        # The timeline starts with the target's first interval line (a VM's start-up is not part of the drill).
        deadline = time.monotonic() + 30
        while not poll() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not poll():
            run.failure = "no output"
            return run
        t0 = time.monotonic()
        fault_at, lifted_at = t0 + seconds / 3, t0 + 2 * seconds / 3
        last = 0.0
        while thread.is_alive() and time.monotonic() < t0 + seconds + 10:
            now = time.monotonic()
            if run.fault_at == 0 and now >= fault_at:
                fixture.fault()
                run.fault_at = now - started
            if run.fault_at and run.lifted_at == 0 and now >= lifted_at:
                fixture.lift()
                run.lifted_at = time.monotonic() - started
            if now - last >= 0.1:
                run.bytes_down.append((now - started, fixture.progress()))
                last = now
            time.sleep(0.02)
        thread.join(timeout=5)
        if target.startswith("front"):
            lines = poll()
            for line in lines:
                line["at"] = line["t_ms"] / 1000
            run.lines = lines
            run.done = {key: sum(line[key] for line in lines) for key in ("calls", "errors", "loads")}
        if not run.done:
            run.failure = "no final line"
    finally:
        for process in stops:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            if process.poll() is None:
                process.kill()
        fixture.stop()
    return run


def summarise(run: Run) -> dict[str, float | str]:
    """The drill's figures (see the module's docstring)."""
    if run.failure or not run.fault_at:
        return {"failure": run.failure or "the fault was never set"}
    before = [(t, b) for t, b in run.bytes_down if t < run.fault_at]
    rate = (
        (before[-1][1] - before[len(before) // 2][1]) / max(before[-1][0] - before[len(before) // 2][0], 0.1)
        if len(before) > 2
        else 0
    )
    recovered = None
    for (t1, b1), (t2, b2) in zip(run.bytes_down, run.bytes_down[1:]):
        if t1 >= run.lifted_at and (b2 - b1) / max(t2 - t1, 0.01) >= rate / 2 and rate > 0:
            recovered = t1
            break
    until = recovered if recovered is not None else run.lines[-1]["at"] if run.lines else run.lifted_at
    # An interval counts when it ends after the fault was set (the loads a fault causes come at once).
    during = [line for line in run.lines if run.fault_at < line["at"] <= until + INTERVAL_MS / 1000]
    faulted = [line for line in run.lines if run.fault_at < line["at"] <= run.lifted_at + INTERVAL_MS / 1000]
    healthy = [line for line in run.lines if line["at"] < run.fault_at and line["at"] > run.fault_at / 2]
    return {
        "calls": float(run.done.get("calls", 0)),
        "errors": float(run.done.get("errors", 0)),
        "app_during": float(sum(line["loads"] for line in during)),
        "calls_during": float(sum(line["calls"] for line in during)),
        "p99_healthy_ms": max((line["p99_ms"] for line in healthy), default=0.0),
        "p99_fault_ms": max((line["p99_ms"] for line in faulted), default=0.0),
        "recover_s": round(recovered - run.lifted_at, 2) if recovered is not None else -1.0,
    }


# ---- charts ------------------------------------------------------------------------------------------------

COLOURS = [
    "#1b6ca8",
    "#d1495b",
    "#2e933c",
    "#edae49",
    "#66a182",
    "#8d5a97",
    "#00798c",
    "#30343f",
]


def chart(drill: Drill, runs: dict[str, Run], path: Path) -> None:
    """Calls per second and app requests per second over time, one line per target; the fault window shaded."""
    width, height, left, top, panel = 760, 420, 60, 30, 160
    span = max((line["at"] for r in runs.values() for line in r.lines), default=1.0)
    x = lambda t: left + (width - left - 20) * t / span
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">'
    ]
    parts.append(f'<text x="{left}" y="16" font-size="13">{drill.name}: {drill.note}</text>')
    if not runs:
        return
    some = next(iter(runs.values()))
    if some.fault_at:
        parts.append(
            f'<rect x="{x(some.fault_at):.1f}" y="{top}" width="{x(some.lifted_at) - x(some.fault_at):.1f}" height="{2 * panel + 30}" fill="#f2e6e6"/>'
        )
    for p, (key, label) in enumerate((("calls", "calls/s"), ("loads", "app requests/s"))):
        y0 = top + p * (panel + 30)
        peak = max((line[key] for r in runs.values() for line in r.lines), default=1) * 1000 / INTERVAL_MS or 1
        parts.append(f'<text x="4" y="{y0 + 12}">{label}</text><text x="4" y="{y0 + 26}">max {peak:,.0f}</text>')
        parts.append(f'<line x1="{left}" y1="{y0 + panel}" x2="{width - 20}" y2="{y0 + panel}" stroke="#999"/>')
        for i, (name, r) in enumerate(runs.items()):
            points = " ".join(
                f"{x(line['at']):.1f},{y0 + panel - panel * line[key] * 1000 / INTERVAL_MS / peak:.1f}"
                for line in r.lines
            )
            parts.append(
                f'<polyline fill="none" stroke="{COLOURS[i % len(COLOURS)]}" stroke-width="1.4" points="{points}"/>'
            )
    for i, name in enumerate(runs):
        parts.append(f'<text x="{left + 90 * i}" y="{height - 8}" fill="{COLOURS[i % len(COLOURS)]}">{name}</text>')
    parts.append(f'<text x="{width - 150}" y="{height - 8}">seconds: 0 to {span:.0f}</text></svg>')
    path.write_text("\n".join(parts))


# ---- main --------------------------------------------------------------------------------------------------


def issue_table() -> str:
    """Issue 33's table, as an operator would try it: `larder serve --store memcached://…` with default settings, 40
    clients asking for one cacheable page (max-age=60, 0.5 s to render) 15 times each in a row, with the store
    healthy, frozen and killed, with and without `--l1 64M`."""
    import concurrent.futures
    import urllib.request

    rows = ["| store state | requests | reached the app | errors | time |", "|---|---|---|---|---|"]
    for state, l1 in (("healthy", False), ("frozen", False), ("killed", False), ("frozen", True), ("killed", True)):
        server = Server("memcached")
        faults = Faults(server)
        origin = Origin(render=0.5)
        front, port = start_front(f"memcached://{faults.address}", origin, l1)
        try:

            def client(_: int, port: int = port) -> int:
                failed = 0
                for _ in range(15):
                    request = urllib.request.Request(f"http://127.0.0.1:{port}/page", headers={"host": "shop.example"})
                    try:
                        with urllib.request.urlopen(request, timeout=30) as answer:
                            answer.read()
                            failed += answer.status != 200
                    except OSError:
                        failed += 1
                return failed

            if state != "healthy":
                faults.command("freeze" if state == "frozen" else "refuse")
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(40) as pool:
                errors = sum(pool.map(client, range(40)))
            took = time.monotonic() - started
            label = f"{state}{', with `--l1 64M`' if l1 else ''}"
            rows.append(f"| {label} | 600 | {origin.taken()} | {errors} | {took:.1f} s |")
        finally:
            front.terminate()
            front.wait(timeout=10)
            faults.stop()
            server.stop()
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=0)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--drills", default="")
    parser.add_argument("--out", default="")
    parser.add_argument("--charts", default="")
    parser.add_argument("--issue-table", action="store_true", help="only issue 33's table: 40 clients x 15 requests")
    args = parser.parse_args()
    if args.issue_table:
        print(issue_table())
        return 0
    seconds = args.seconds or (9 if args.quick else 18)
    names = (
        args.drills.split(",")
        if args.drills
        else (["memcached-frozen", "memcached-killed"] if args.quick else [d.name for d in DRILLS])
    )
    drills = [d for d in DRILLS if d.name in names]
    targets = [t for t in args.targets.split(",") if t]
    for t in targets:
        if t not in TARGETS:
            parser.error(f"unknown target {t} (targets: {', '.join(TARGETS)})")
    out = Path(args.out or ROOT / "bench" / "results" / ("drills-" + time.strftime("%Y-%m-%dT%H%M%S")))
    out.mkdir(parents=True, exist_ok=True)
    build(targets)
    rows: list[tuple[str, str, dict[str, float | str]]] = []
    for drill in drills:
        runs: dict[str, Run] = {}
        for target in targets:
            if drill.store == "redis+cluster" and target == "elixir":
                rows.append((drill.name, target, {"failure": "not applicable: the Elixir client has no Redis Cluster"}))
                continue
            print(
                f"[{time.strftime('%H:%M:%S')}] {drill.name} / {target}",
                file=sys.stderr,
                flush=True,
            )
            try:
                runs[target] = run_one(drill, target, seconds)
            except Exception as e:  # noqa: BLE001 - a drill that cannot run is reported, the others go on
                runs[target] = Run(failure=str(e))
            summary = summarise(runs[target])
            rows.append((drill.name, target, summary))
            print(f"    {json.dumps(summary)}", file=sys.stderr, flush=True)
            with (out / "raw.jsonl").open("a") as raw:
                raw.write(
                    json.dumps(
                        {
                            "drill": drill.name,
                            "target": target,
                            "summary": summary,
                            "lines": runs[target].lines,
                            "fault_at": runs[target].fault_at,
                            "lifted_at": runs[target].lifted_at,
                        }
                    )
                    + "\n"
                )
        chart(
            drill,
            {k: v for k, v in runs.items() if v.lines},
            out / f"drill-{drill.name}.svg",
        )
    table = [
        "| drill | target | calls | errors | app requests during the fault (calls meanwhile) | p99 healthy / in the fault (ms) | recovered after (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, target, s in rows:
        if "failure" in s:
            table.append(f"| {name} | {target} | failed: {s['failure']} | | | | |")
            continue
        recover = f"{s['recover_s']:.1f}" if float(s["recover_s"]) >= 0 else "not within the run"
        table.append(
            f"| {name} | {target} | {int(float(s['calls'])):,} | {int(float(s['errors']))} | {int(float(s['app_during']))} ({int(float(s['calls_during'])):,}) "
            f"| {float(s['p99_healthy_ms']):.1f} / {float(s['p99_fault_ms']):.1f} | {recover} |"
        )
    report = "\n".join(table)
    (out / "report.md").write_text(report + "\n")
    print(report)
    if args.charts:
        Path(args.charts).mkdir(parents=True, exist_ok=True)
        for svg in out.glob("drill-*.svg"):
            shutil.copy(svg, Path(args.charts) / svg.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
