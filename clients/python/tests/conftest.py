"""Test configuration: a hypothesis profile that keeps the whole suite fast and leaves no files behind."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "larder",
    deadline=None,  # subprocesses and compressors have uneven timings
    database=None,  # no example database to keep; failures print how to reproduce them
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "larder"))


# --------------------------------------------------------------------------------------------------- real servers
# Started once per test session on free loopback ports and stopped at the end (tests/servers.py). A missing binary
# fails the tests that need it, with a message saying to run `make services`.

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

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
