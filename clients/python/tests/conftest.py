"""Test configuration: a hypothesis profile that keeps the whole suite fast and leaves no files behind, the random
order's seed printed even under -q, and the real servers the store tests share."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "larder",
    deadline=None,  # subprocesses and compressors have uneven timings
    database=None,  # no example database to keep; failures print how to reproduce them
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "larder"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """The seed of this run's random order (pytest-random-order prints it in the header, which -q hides)."""
    seed = str(config.getoption("random_order_seed", default="")).removeprefix("default:")
    if seed:
        terminalreporter.write_line(f"random order: run it again with --random-order-seed={seed}")


# --------------------------------------------------------------------------------------------------- real servers
# Started once per test session on free loopback ports and stopped at the end (tests/servers.py). A missing binary
# fails the tests that need it, with a message saying to run `make services`.

from collections.abc import Iterator  # noqa: E402

from servers import Memcached, Postgres, Redis, RedisCluster  # noqa: E402


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[Memcached]:
    server = Memcached()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def memcached_pair() -> Iterator[tuple[Memcached, Memcached]]:
    servers = (Memcached(), Memcached())
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Redis]:
    server = Redis()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    cluster = RedisCluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    server = Postgres()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def conformance_env() -> Iterator[dict[str, str]]:
    """The environment the hostile_*.json and outage.json vectors need (spec/vectors/README.md): a memcached and a
    Redis of their own (the runner flushes them, so not the session's shared servers), larder-hostile and
    larder-faults."""
    from faults import faults_bin
    from hostile import hostile_bin

    memcached, redis = Memcached(), Redis()
    yield {
        "LARDER_CONFORMANCE_MEMCACHED": memcached.address,
        "LARDER_CONFORMANCE_REDIS": f"127.0.0.1:{redis.port}",
        "LARDER_HOSTILE": str(hostile_bin()),
        "LARDER_FAULTS": str(faults_bin()),
    }
    memcached.stop()
    redis.stop()
