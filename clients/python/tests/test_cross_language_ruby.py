"""Python and Ruby through every shared store: values (MessagePack, lz4-compressed above 1 KiB, with tags) written by
`larder.Cache` are read by the Ruby client's `Larder::Cache` (clients/ruby, run as `ruby -I…/lib`), values Ruby
writes are read here, and a tag purged from Python is gone for Ruby. Ruby missing is a failure, not a skip."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import larder
from servers import Memcached, Postgres, Redis, RedisCluster

RUBY_LIB = Path(__file__).resolve().parents[2] / "ruby" / "lib"
NAMESPACE = "py-rb"

# Reads the keys given in ARGV[1..] (printing them as one JSON object, absent ones as null), then writes "from-ruby".
RUBY = """
require "larder"
require "json"
cache = Larder::Cache.new(Larder::Stores.open(ARGV[0]), namespace: "py-rb")
found = ARGV[1..].to_h { |key| [key, cache.read(key)] }
cache.write("from-ruby", { "lang" => "ruby", "n" => [1, 2.5, nil, true], "text" => "é" * 700 }, ttl: 60, tags: ["rb"])
puts JSON.generate(found)
"""


def ruby(store_url: str, *keys: str) -> dict[str, Any]:
    binary = shutil.which("ruby")
    if binary is None:
        pytest.fail("ruby is not installed: run `make services` at the repository root", pytrace=False)
    run = subprocess.run(
        [binary, "-I", str(RUBY_LIB), "-e", RUBY, store_url, *keys], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    found: dict[str, Any] = json.loads(run.stdout)
    return found


def crossing(store_url: str) -> None:
    cache = larder.Cache(store_url, namespace=NAMESPACE)
    big = {"lang": "python", "rows": [{"i": i, "name": f"row {i}"} for i in range(200)]}  # lz4-compressed
    cache.set("from-python", {"lang": "python", "n": [1, -2, 3.5, None, False], "text": "ü"}, ttl=60)
    cache.set("big", big, ttl=60, tags=["py"])
    assert larder.decode(cache.store.get(cache.store_key("big")) or b"").compressor == "lz4"
    found = ruby(store_url, "from-python", "big", "missing")
    assert found == {
        "from-python": {"lang": "python", "n": [1, -2, 3.5, None, False], "text": "ü"},
        "big": big,
        "missing": None,
    }
    assert cache.get("from-ruby") == {"lang": "ruby", "n": [1, 2.5, None, True], "text": "é" * 700}
    cache.purge(tag="py")
    assert ruby(store_url, "big") == {"big": None}
    cache.purge(tag="rb")
    assert cache.get("from-ruby") is None


def test_memcached(memcached_server: Memcached) -> None:
    crossing(f"memcached://{memcached_server.address}")


def test_redis(redis_server: Redis) -> None:
    crossing(f"redis://127.0.0.1:{redis_server.port}/3")


def test_redis_cluster(redis_cluster: RedisCluster) -> None:
    crossing(redis_cluster.url)


def test_postgres(postgres_server: Postgres) -> None:
    crossing(postgres_server.url + "?table=py_rb")


def test_sqlite_and_files(tmp_path: Path) -> None:
    crossing(f"sqlite://{tmp_path / 'cache.db'}")
    crossing(f"file://{tmp_path / 'files'}")
