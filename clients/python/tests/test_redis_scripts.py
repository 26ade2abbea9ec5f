"""The Redis store's Lua scripts are spec/redis's files, byte for byte (spec/STORES.md §5, "Scripts"): what
larder.stores.scripts loads in this checkout, and what a real redis-server ends up holding after the store sent each
script once whole (EVAL, its script cache emptied first) and then by SHA (EVALSHA). That a built wheel carries the
same bytes is tests/test_packaging.py."""

from __future__ import annotations

import hashlib
import re
import uuid

import larder
from larder.stores import open_store
from larder.stores.scripts import NAMES, Script, load, location
from servers import Redis
from support import REPO_ROOT

SPEC = REPO_ROOT / "spec" / "redis"


def spec_sha(name: str) -> str:
    return hashlib.sha1((SPEC / f"{name}.lua").read_bytes()).hexdigest()


def test_the_scripts_are_spec_redis_s_files() -> None:
    assert sorted(NAMES) == sorted(p.stem for p in SPEC.glob("*.lua")), "every script of spec/redis, no other"
    assert str(location()) == str(SPEC), "a source checkout reads spec/redis itself"
    for name in NAMES:
        assert load(name) == (SPEC / f"{name}.lua").read_bytes()
        assert Script(name).sha == spec_sha(name)


def evalsha_calls(redis: Redis) -> int:
    found = re.search(r"cmdstat_evalsha:calls=(\d+)", redis.cli("INFO", "commandstats"))
    return int(found.group(1)) if found else 0


def test_a_redis_server_runs_exactly_those_bytes(redis_server: Redis) -> None:
    store = open_store(f"{redis_server.url}?prefix=scripts-{uuid.uuid4().hex[:8]}:")
    try:
        redis_server.cli("SCRIPT", "FLUSH")
        shas = [spec_sha(name) for name in NAMES]
        assert redis_server.cli("SCRIPT", "EXISTS", *shas).split() == ["0", "0", "0"]
        before = evalsha_calls(redis_server)
        store.set("tagged", larder.encode("v", tags=["t"]))  # tag.lua
        assert store.incr("n", 2, None, True) == 2  # incr.lua
        assert store.add("lock", b"token", 10)
        assert store.delete_if("lock", b"token")  # delete_if.lua
        assert redis_server.cli("SCRIPT", "EXISTS", *shas).split() == ["1", "1", "1"], "cached under spec's SHA-1"
        assert store.incr("n", 3, None, True) == 5
        assert evalsha_calls(redis_server) >= before + 4, "asked by SHA first, every time"
        assert store.purge_tag("t") == 1
    finally:
        store.close()
