"""Entries cross between Python and Rust through every shared store: what `larder.Cache` writes, the Rust binary
(`larder store get`) reads back byte for byte and decodes; what Rust writes (`larder store set`), Python reads; tags
and prefixes purged by one are gone for the other; counters and prefixes agree. Real servers, the real binary."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

import larder
from larder import Cache
from larder.stores import open_store
from support import larder_bin
from test_stores import store_url

SHARED = ["memcached", "redis", "redis-cluster", "sqlite", "postgres", "file"]


def rust(url: str, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(larder_bin()), "store", *args, "--store", url], input=data, capture_output=True, timeout=60, check=False
    )


@pytest.fixture(params=SHARED)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return store_url(request.param, request, tmp_path_factory)


def test_python_writes_rust_reads(url: str) -> None:
    cache = Cache(url, namespace="py")
    cache.set("user:7", {"id": 7, "name": "Ada", "tags": ["x"]}, ttl=300, version="v1", tags=["user:7"])
    got = rust(url, "get", "py:user:7")
    assert got.returncode == 0, got.stderr.decode()
    assert got.stdout == cache.store.get("py:user:7"), "the same bytes"
    shown = rust(url, "get", "--inspect", "--json", "py:user:7")
    assert shown.returncode == 0, shown.stderr.decode()
    fields = json.loads(shown.stdout)
    assert fields["value"] == {"id": 7, "name": "Ada", "tags": ["x"]}
    assert (fields["version"], fields["tags"]) == ("v1", ["user:7"])
    big = "x" * 5000  # compressed with lz4
    cache.set("big", big)
    assert larder.decode(rust(url, "get", "py:big").stdout).value == big
    cache.close()


def test_rust_writes_python_reads(url: str) -> None:
    data = larder.encode({"from": "rust"}, ttl_ms=300_000, tags=["t:rust"])
    done = rust(url, "set", "rs:k", data=data)
    assert done.returncode == 0, done.stderr.decode()
    cache = Cache(url, namespace="rs")
    assert cache.get("k") == {"from": "rust"}
    assert cache.store.get("rs:k") == data
    raw = rust(url, "set", "--raw", "rs:n", data=b"41")
    assert raw.returncode == 0, raw.stderr.decode()
    assert cache.incr("n") == 42, "a counter written by Rust is a counter for Python"
    assert rust(url, "get", "rs:n").stdout.rstrip(b" ") == b"42"
    cache.close()


def test_purges_cross_languages(url: str) -> None:
    store = open_store(url)
    old = larder.now_ms() - 5000
    store.set("a/1", larder.encode(1, created_at=old, tags=["blue"]))
    store.set("a/2", larder.encode(2, created_at=old, tags=["red"]))
    store.set("b/1", larder.encode(3, created_at=old))
    purged = rust(url, "purge", "--tag", "blue")
    assert purged.returncode == 0, purged.stderr.decode()
    assert store.get("a/1") is None
    assert store.get("a/2") is not None
    purged = rust(url, "purge", "--prefix", "a/")
    assert purged.returncode == 0, purged.stderr.decode()
    assert store.get("a/2") is None
    assert store.get("b/1") is not None
    # and the other way: Python purges what Rust wrote
    rust(url, "set", "c/1", data=larder.encode(4, created_at=old, tags=["green"]))
    store.purge_tag("green")
    assert rust(url, "get", "c/1").returncode == 1, "purged for Rust too"
    store.close()


def test_deletes_cross_languages(url: str) -> None:
    store = open_store(url)
    key = f"del-{uuid.uuid4().hex[:8]}"
    store.set(key, larder.encode("v"))
    deleted = rust(url, "delete", key)
    assert deleted.stdout.strip() == b"1", deleted.stderr.decode(errors="replace")
    assert store.get(key) is None
    store.close()
