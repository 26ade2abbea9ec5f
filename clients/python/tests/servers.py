"""Real servers for the store tests: memcached, redis-server, a three-master Redis Cluster and PostgreSQL, each
started on a free loopback port in a temporary directory and stopped afterwards (as crates/testkit does for Rust).

A missing binary is a test failure that says to run `make services`, never a skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

PG_BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")


def find_binary(name: str, dirs: Sequence[str] = ()) -> str:
    found = shutil.which(name)
    if found:
        return found
    for d in dirs:
        path = Path(d) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    pytest.fail(f"{name} is not installed: run `make services` at the repository root", pytrace=False)


def free_port(below: int = 65536) -> int:
    """A free loopback port under `below` (a Redis Cluster node also needs port + 10000 for its bus)."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port < below:
            return port
    raise RuntimeError(f"no free port below {below}")


def free_bus_port() -> int:
    for _ in range(100):
        port = free_port(below=55000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


#: How long a server may take to start, every wait for it included.
START_TIMEOUT = 20.0


def wait_for_port(
    port: int,
    process: subprocess.Popen[bytes],
    what: str,
    timeout: float = START_TIMEOUT,
    deadline: float | None = None,
) -> None:
    """Returns once `port` accepts a connection, by `deadline` (a `time.monotonic()`; else `timeout` from now)."""
    if deadline is None:
        deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on port {port} in time")


class Process:
    """A server process on a loopback port."""

    def __init__(self, what: str, command: list[str], port: int, cwd: str | None = None) -> None:
        self.what = what
        self.command = command
        self.port = port
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        self.process = subprocess.Popen(
            self.command, cwd=self.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        self.wait_ready(self.process, deadline)

    def wait_ready(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        """Returns once the server takes requests, by `deadline`: when its port accepts connections."""
        wait_for_port(self.port, process, self.what, deadline=deadline)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Stops the server abruptly (for failure drills)."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()


class Memcached(Process):
    def __init__(self, port: int | None = None) -> None:
        port = port or free_port()
        command = [find_binary("memcached"), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-t", "2"]
        if os.geteuid() == 0:
            command += ["-u", "root"]
        super().__init__("memcached", command, port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class Redis(Process):
    def __init__(self, cluster: bool = False) -> None:
        port = free_bus_port() if cluster else free_port()
        self.dir = tempfile.TemporaryDirectory(prefix="larder-redis-")
        command = [find_binary("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
        command += ["--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning"]
        if cluster:
            command += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
            command += ["--cluster-node-timeout", "2000"]
        super().__init__("redis-server", command, port, cwd=self.dir.name)

    def cli(self, *args: str) -> str:
        command = [find_binary("redis-cli"), "-h", "127.0.0.1", "-p", str(self.port), *args]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=30).stdout

    def stop(self) -> None:
        super().stop()
        self.dir.cleanup()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class RedisCluster:
    def __init__(self) -> None:
        self.nodes = [Redis(cluster=True) for _ in range(3)]
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        self.nodes[0].cli("--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes")
        deadline = time.monotonic() + 20
        for node in self.nodes:
            while "cluster_state:ok" not in node.cli("cluster", "info"):
                if time.monotonic() > deadline:
                    raise RuntimeError("redis cluster not ok within 20 s")
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class PostgresProcess(Process):
    """The postmaster. PostgreSQL listens before it accepts sessions (a client then reads "the database system is
    starting up"): ready when `pg_isready` says it accepts them, within the same deadline (as crates/testkit's)."""

    def wait_ready(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        wait_for_port(self.port, process, self.what, deadline=deadline)
        ready = find_binary("pg_isready", PG_BIN_DIRS)
        command = [ready, "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "larder", "-d", "postgres", "-t", "1"]
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{self.what} exited with status {process.returncode}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{self.what} on port {self.port} did not accept sessions in time")
            try:
                if subprocess.run(command, timeout=left, check=False).returncode == 0:
                    return
            except subprocess.TimeoutExpired:
                continue  # (the deadline, checked above, says what then)
            time.sleep(0.05)


def _as_postgres(binary: str) -> list[str]:
    if os.geteuid() == 0:
        return [find_binary("runuser"), "-u", "postgres", "--", binary]
    return [binary]


class Postgres:
    """PostgreSQL in a temporary data directory, trust authentication, user `larder` (as the `postgres` user when
    run as root: it refuses to run as root)."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="larder-pg-")
        data = Path(self.dir.name) / "data"
        data.mkdir()
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "postgres:postgres", self.dir.name], check=True)
        initdb = find_binary("initdb", PG_BIN_DIRS)
        subprocess.run(
            [
                *_as_postgres(initdb),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "larder",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            check=True,
            capture_output=True,
        )
        self.data = data
        self.port = free_port()
        postgres = find_binary("postgres", PG_BIN_DIRS)
        command = [*_as_postgres(postgres), "-D", str(data), "-p", str(self.port), "-k", str(data)]
        command += ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off"]
        command += ["-c", "full_page_writes=off", "-c", "max_connections=200"]
        self.process = PostgresProcess("postgres", command, self.port)

    @property
    def url(self) -> str:
        return f"postgres://larder@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + 15
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        self.process.stop()
        self.dir.cleanup()
